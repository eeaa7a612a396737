"""`attncomp data prepare`: parallel text -> sentencepiece BPE + memory-mapped token arrays.

With one language (`--lang`, PrepareOptions.mono) the text is PREFIX.LANG, and both sides of every
split hold it (so every reader works unchanged); the manifest says `"monolingual": true`, and a
decoder-only model then trains on `text </s>` rather than `source <sep> target </s>`.

The output directory holds, per split and side, `{split}.{src,tgt}.bin` (token ids, each sentence
ending in </s>) and `.idx` (int64 offsets, one more than sentences), the sentencepiece model(s), and
`manifest.json`, written last. The directory is built under a temporary name and renamed into
place, so a half-written directory never looks like a good one. The manifest records a fingerprint
of the inputs and options: preparing the same inputs again is a no-op.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncomp import __version__
from attncomp.data.text import file_digest, input_files, read_mono, read_parallel
from attncomp.data.tokenizer import Tokenizer, train_sentencepiece
from attncomp.errors import DataError
from attncomp.files import read_json
from attncomp.progress import Progress
from attncomp.vocab import EOS

MANIFEST = "manifest.json"
FORMAT = "attncomp-data"
SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class PrepareOptions:
    src_lang: str = "src"
    tgt_lang: str = "tgt"
    vocab_size: int = 8000  # shared vocabulary
    separate: bool = False
    src_vocab_size: int | None = None  # with separate: per side (default vocab_size)
    tgt_vocab_size: int | None = None
    character_coverage: float = 1.0
    max_len: int = 256  # training pairs with more tokens on either side are dropped
    max_ratio: float = 9.0  # ... or whose lengths differ by more than this factor
    seed: int = 1
    mono: bool = False  # one language (src_lang == tgt_lang): PREFIX.LANG, written to both sides
    given: str = ""  # --tokenizers: sha256 of the given src and tgt sentencepiece models ("" = train them)


def fingerprint(sources: dict[str, list[str]], options: PrepareOptions) -> str:
    fields = dataclasses.asdict(options)
    for key in ("mono", "given"):
        if not fields[key]:
            del fields[key]  # a preparation keeps the fingerprint it had before the option existed
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode())
    for split in SPLITS:
        for source in sources.get(split, []):
            for path in input_files(source, options.src_lang, options.tgt_lang):
                digest.update(f"{split}:{path.name}:{file_digest(path)}".encode())
    return digest.hexdigest()


def _existing(out: Path) -> dict | None:
    """The manifest of a prepared directory at `out`, None if nothing is there; else an error."""
    if not out.exists():
        return None
    manifest = out / MANIFEST
    if not manifest.is_file():
        raise DataError(f"{out} exists but is not a prepared data directory (no {MANIFEST}); "
                        "remove it or choose another --out")
    return read_json(manifest, what="manifest",
                     error=lambda reason: DataError(f"{out}/{MANIFEST} is corrupt ({reason}); remove {out} "
                                                    "and prepare again"))


def _train_tokenizer(work: Path, pairs: list[tuple[str, str]], side: str | None, size: int,
                     options: PrepareOptions) -> Tokenizer:
    text = work / f"spm_input.{side or 'shared'}.txt"
    with open(text, "w", encoding="utf-8") as f:
        for src, tgt in pairs:
            if side in (None, "src") and src:
                f.write(src + "\n")
            if side in (None, "tgt") and tgt and not options.mono:
                f.write(tgt + "\n")
    prefix = work / ("spm" if side is None else f"spm.{side}")
    model = train_sentencepiece(text, prefix, size, options.character_coverage, options.seed)  # prefix.model
    text.unlink()
    Path(f"{prefix}.vocab").unlink(missing_ok=True)
    return Tokenizer.from_file(model)


def _write_side(work: Path, name: str, sequences: list[list[int]], dtype) -> int:
    lengths = np.fromiter((len(s) + 1 for s in sequences), dtype=np.int64, count=len(sequences))
    offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.empty(int(offsets[-1]), dtype=dtype)
    for i, seq in enumerate(sequences):
        flat[offsets[i] : offsets[i + 1] - 1] = seq
        flat[offsets[i + 1] - 1] = EOS
    flat.tofile(work / f"{name}.bin")
    offsets.tofile(work / f"{name}.idx")
    return int(offsets[-1])


@contextmanager
def _stage(print_fn, what: str):
    """Log how long a stage took: `sentencepiece (shared, 8000): 41.2s`."""
    start = time.monotonic()
    yield
    print_fn(f"{what}: {time.monotonic() - start:.1f}s")


def _encode(tokenizer: Tokenizer, lines: list[str], label: str) -> list[list[int]]:
    out: list[list[int]] = []
    step = 10_000
    with Progress(len(lines), f"encode {label}", "lines", summary=False) as bar:  # _stage times the whole
        for start in range(0, len(lines), step):
            out += tokenizer.encode(lines[start : start + step])
            bar.update(min(step, len(lines) - start))
    return out


def _keep(src: list[list[int]], tgt: list[list[int]], options: PrepareOptions) -> list[int]:
    keep = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        ls, lt = len(s) + 1, len(t) + 1
        if ls > options.max_len or lt > options.max_len or max(ls, lt) > options.max_ratio * min(ls, lt):
            continue
        if len(s) == 0 or len(t) == 0:
            continue
        keep.append(i)
    return keep


def _given_tokenizers(work: Path, given: tuple[bytes, bytes]) -> tuple[Tokenizer, Tokenizer, dict[str, str]]:
    """A checkpoint's sentencepiece models (--tokenizers), written as the data's own."""
    names = {"src": "spm.model", "tgt": "spm.model"} if given[0] == given[1] else \
        {"src": "spm.src.model", "tgt": "spm.tgt.model"}
    for side, model in zip(("src", "tgt"), given):
        (work / names[side]).write_bytes(model)
    return Tokenizer(given[0]), Tokenizer(given[1]), names


def _tokenizers(work: Path, train: list[tuple[str, str]], options: PrepareOptions, print_fn,
                given: tuple[bytes, bytes] | None = None) -> tuple[Tokenizer, Tokenizer, dict[str, str]]:
    """Train the shared or the two separate sentencepiece models, or take the given ones: (src, tgt,
    model file names)."""
    if given is not None:
        return _given_tokenizers(work, given)
    print_fn(f"training sentencepiece on {len(train):,} pairs")
    with _stage(print_fn, "sentencepiece"):
        if options.separate:
            src_tok = _train_tokenizer(work, train, "src", options.src_vocab_size or options.vocab_size, options)
            tgt_tok = _train_tokenizer(work, train, "tgt", options.tgt_vocab_size or options.vocab_size, options)
            return src_tok, tgt_tok, {"src": "spm.src.model", "tgt": "spm.tgt.model"}
        tok = _train_tokenizer(work, train, None, options.vocab_size, options)
        return tok, tok, {"src": "spm.model", "tgt": "spm.model"}


def _write_split(work: Path, split: str, pairs: list[tuple[str, str]], tokenizers: tuple[Tokenizer, Tokenizer],
                 dtype, options: PrepareOptions, print_fn) -> dict:
    """Encode one split, drop bad training pairs, write its four files; its manifest entry."""
    with _stage(print_fn, f"encode and write {split}"):
        src = _encode(tokenizers[0], [p[0] for p in pairs], f"{split}.{options.src_lang}")
        tgt = src if options.mono else _encode(tokenizers[1], [p[1] for p in pairs], f"{split}.{options.tgt_lang}")
        keep = _keep(src, tgt, options) if split == "train" else list(range(len(pairs)))
        if split == "train" and not keep:
            raise DataError(f"no training pair is kept: all {len(pairs):,} are empty on one side, longer than "
                            f"--max-len {options.max_len} tokens, or differ in length by more than "
                            f"{options.max_ratio:g}x")
        src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
        stats = {"pairs": len(keep), "dropped": len(pairs) - len(keep),
                 "src_tokens": _write_side(work, f"{split}.src", src, dtype),
                 "tgt_tokens": _write_side(work, f"{split}.tgt", tgt, dtype)}
    print_fn(f"{split}: {len(keep):,} pairs, {stats['src_tokens']:,} + {stats['tgt_tokens']:,} tokens"
             + (f", {stats['dropped']:,} dropped by length" if stats["dropped"] else ""))
    return stats


def _read(source: str, options: PrepareOptions) -> list[tuple[str, str]]:
    if options.mono:
        return read_mono(source, options.src_lang)
    return read_parallel(source, options.src_lang, options.tgt_lang)


def _build(work: Path, sources: dict[str, list[str]], options: PrepareOptions, print_fn,
           given: tuple[bytes, bytes] | None = None) -> dict:
    with _stage(print_fn, "read the text"):
        splits = {split: [p for source in sources.get(split, []) for p in _read(source, options)]
                  for split in SPLITS if sources.get(split)}
    for split, pairs in splits.items():
        if not pairs:
            raise DataError(f"the {split} text ({', '.join(map(str, sources[split]))}) has no lines")
    src_tok, tgt_tok, models = _tokenizers(work, splits["train"], options, print_fn, given)
    largest = max(src_tok.vocab_size, tgt_tok.vocab_size)
    dtype = np.uint16 if largest <= np.iinfo(np.uint16).max else np.int32
    stats = {split: _write_split(work, split, pairs, (src_tok, tgt_tok), dtype, options, print_fn)
             for split, pairs in splits.items()}
    return {
        "format": FORMAT, "version": 1, "attncomp": __version__,
        "languages": {"src": options.src_lang, "tgt": options.tgt_lang},
        "vocab": {"shared": models["src"] == models["tgt"], "src_size": src_tok.vocab_size, "tgt_size": tgt_tok.vocab_size,
                  "src_model": models["src"], "tgt_model": models["tgt"]},
        "dtype": np.dtype(dtype).name, "splits": stats,
        "inputs": {split: [str(s) for s in sources.get(split, [])] for split in SPLITS},
        "options": dataclasses.asdict(options),
        **({"monolingual": True} if options.mono else {}),
    }


def prepare(sources: dict[str, list[str]], out: Path, options: PrepareOptions, force: bool = False,
            print_fn=print, include: dict[str, Path] | None = None,
            tokenizers: tuple[bytes, bytes] | None = None) -> tuple[dict, bool]:
    """Prepare `sources` ({"train": [...], "valid": [...], "test": [...]}) into `out`.

    `tokenizers`: (src, tgt) sentencepiece models to encode with instead of training new ones (a
    checkpoint's, to fine-tune it); `options.given` must then name them (`given_digest`).

    `include` copies extra files into the directory (name -> file) before the manifest is written.
    Returns (manifest, changed); `changed` is False when `out` already holds exactly this preparation.
    """
    if not sources.get("train"):
        raise DataError("data prepare needs at least one --train source")
    digest = fingerprint(sources, options)
    existing = _existing(out)
    if existing is not None and existing.get("fingerprint") == digest:
        return existing, False
    if existing is not None and not force:
        raise DataError(f"{out} holds a different preparation (other inputs or options); "
                        "use --force to replace it, or choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        manifest = _build(work, sources, options, print_fn, tokenizers)
        for name, path in (include or {}).items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, work / name)
        manifest["fingerprint"] = digest
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _swap_in(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return manifest, True


def given_digest(tokenizers: tuple[bytes, bytes]) -> str:
    """PrepareOptions.given for these sentencepiece models: a preparation with others is another one."""
    return ":".join(hashlib.sha256(model).hexdigest() for model in tokenizers)


def _swap_in(work: Path, out: Path) -> None:
    """Replace `out` by `work` with renames only, so `out` is always whole or absent."""
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
        os.replace(work, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(work, out)
