"""`attncomp data prepare`: parallel text -> sentencepiece BPE + memory-mapped token arrays.

In memory that does not grow with the corpus: the text streams by in chunks (`CHUNK` pairs), once
to count and check it, once (training text only) to write the tokenizer's sample (`tokenizer_sample.py`),
and once to encode it on `workers` processes (`encode.py`), each chunk's token arrays appended to
disk as they come; the input files are also hashed once for the fingerprint.

With one language (`--lang`, PrepareOptions.mono) the text is PREFIX.LANG, and both sides of every
split hold it (so every reader works unchanged); the manifest says `"monolingual": true`, and a
decoder-only model then trains on `text </s>` rather than `source <sep> target </s>`.

The output directory holds, per split and side, `{split}.{src,tgt}.bin` (token ids, each sentence
ending in </s>) and `.idx` (int64 offsets, one more than sentences), the sentencepiece model(s), and
`manifest.json`, written last. The directory is built under a temporary name and renamed into
place, so a half-written directory never looks like a good one. The manifest records a fingerprint
of the inputs and options: preparing the same inputs again is a no-op; an input file whose size and
modification time are those recorded is not read again to know it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from attncomp import __version__
from attncomp.data.encode import Encoding, SideWriter, encode_chunks
from attncomp.data.tokenizer_sample import write_sample
from attncomp.data.sources import Source
from attncomp.data.text import file_digest
from attncomp.data.tokenizer import Tokenizer, tokenizer_of, train_sentencepiece
from attncomp.errors import DataError
from attncomp.files import read_json
from attncomp.progress import Progress

MANIFEST = "manifest.json"
FORMAT = "attncomp-data"
SPLITS = ("train", "valid", "test")
CHUNK = 10_000  # pairs read, encoded and written together
SAMPLE = 2_000_000  # sentences sentencepiece trains on by default (each vocabulary's)


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
    sample_sentences: int = SAMPLE  # sentencepiece trains on a seeded sample of this many sentences (or all)
    src_column: str = ""  # JSONL and Parquet: the field of the source text ("" = src_lang)
    tgt_column: str = ""  # ... of the target text ("" = tgt_lang)


def sources_of(inputs: dict[str, list[str]], options: PrepareOptions) -> dict[str, list[Source]]:
    """Each split's inputs as readable sources (missing files are an error here, before anything runs)."""
    langs = (options.src_lang, options.tgt_lang)
    columns = (options.src_column or options.src_lang, options.tgt_column or options.tgt_lang)
    return {split: [Source(name, langs, columns, options.mono) for name in inputs[split]]
            for split in SPLITS if inputs.get(split)}


def input_records(sources: dict[str, list[Source]], known: dict[str, dict]) -> dict[str, dict]:
    """Size, modification time and sha256 of every input file, by absolute path. A file whose size and
    modification time are those `known` (the last preparation's) keeps its recorded digest unread."""
    records = {}
    for path in chain.from_iterable(source.files for split in sources.values() for source in split):
        key = str(path.resolve())
        try:
            stat = path.stat()
        except OSError as err:
            raise DataError(f"cannot read {path}: {err.strerror}") from None
        record = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        old = known.get(key)
        same = isinstance(old, dict) and all(old.get(k) == v for k, v in record.items())
        records[key] = {**record, "sha256": old["sha256"] if same and "sha256" in old else file_digest(path)}
    return records


def fingerprint(sources: dict[str, list[Source]], options: PrepareOptions, records: dict[str, dict]) -> str:
    fields = dataclasses.asdict(options)
    for key in ("mono", "given", "src_column", "tgt_column"):
        if not fields[key]:
            del fields[key]  # a preparation keeps the fingerprint it had before the option existed
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode())
    for split in SPLITS:
        for source in sources.get(split, []):
            for path in source.files:
                digest.update(f"{split}:{path.name}:{records[str(path.resolve())]['sha256']}".encode())
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


@contextmanager
def _stage(print_fn, what: str):
    """Log how long a stage took: `sentencepiece (shared, 8000): 41.2s`."""
    start = time.monotonic()
    yield
    print_fn(f"{what}: {time.monotonic() - start:.1f}s")


def _given_tokenizers(work: Path, given: tuple[bytes, bytes]) -> tuple[Tokenizer, Tokenizer, dict[str, str]]:
    """A checkpoint's tokenizers (--tokenizers: sentencepiece models or tokenizer.json envelopes), written as the
    data's own."""
    kind = "tokenizer.json" if given[0][:1] == b"{" else "model"  # an imported model's tokenizer.json envelope
    names = {"src": f"spm.{kind}", "tgt": f"spm.{kind}"} if given[0] == given[1] else \
        {"src": f"spm.src.{kind}", "tgt": f"spm.tgt.{kind}"}
    for side, model in zip(("src", "tgt"), given):
        (work / names[side]).write_bytes(model)
    return tokenizer_of(given[0]), tokenizer_of(given[1]), names


def _tokenizers(work: Path, train: list[Source], pairs: int, options: PrepareOptions, print_fn,
                given: tuple[bytes, bytes] | None = None) -> tuple[Tokenizer, Tokenizer, dict[str, str], dict]:
    """Train the shared or the two separate sentencepiece models on a sample of the training text, or take
    the given ones: (src, tgt, model file names, what the sample was)."""
    if given is not None:
        return (*_given_tokenizers(work, given), {})
    shared = not (options.separate or options.mono)
    models = {"src": "spm.model", "tgt": "spm.model"} if not options.separate else \
        {"src": "spm.src.model", "tgt": "spm.tgt.model"}
    texts = {side: work / f"{Path(name).stem}.sample.txt" for side, name in models.items()
             if side == "src" or not options.mono}
    chosen = min(pairs, math.ceil(options.sample_sentences / 2) if shared else options.sample_sentences)
    with _stage(print_fn, "sample for sentencepiece"):
        sentences = write_sample(train, pairs, chosen, texts, options.seed, CHUNK)
    print_fn(f"training sentencepiece on {sentences:,} sentences ({chosen:,} of {pairs:,} pairs)")
    sizes = {"src": options.src_vocab_size or options.vocab_size, "tgt": options.tgt_vocab_size or options.vocab_size}
    with _stage(print_fn, "sentencepiece"):
        for side, text in texts.items():
            if side == "tgt" and shared:
                continue
            prefix = work / Path(models[side]).stem
            train_sentencepiece(text, prefix, sizes[side] if options.separate else options.vocab_size,
                                options.character_coverage, options.seed)
            text.unlink()
            Path(f"{prefix}.vocab").unlink(missing_ok=True)
    src = Tokenizer.from_file(work / models["src"])
    tgt = src if models["tgt"] == models["src"] else Tokenizer.from_file(work / models["tgt"])
    return src, tgt, models, {"sentences": sentences, "pairs": chosen, "of_pairs": pairs}


def _write_split(work: Path, split: str, sources: list[Source], pairs: int, encoding: Encoding, workers: int,
                 print_fn) -> dict:
    """Encode one split chunk by chunk, drop bad training pairs, append to its four files; its manifest entry."""
    workers = max(1, min(workers, math.ceil(pairs / CHUNK)))  # no processes for a chunk or two
    writers = (SideWriter(work, f"{split}.src"), SideWriter(work, f"{split}.tgt"))
    dropped = 0
    chunks = chain.from_iterable(source.chunks(CHUNK) for source in sources)
    try:
        with _stage(print_fn, f"encode and write {split}"), \
                Progress(pairs, f"encode {split}", "pairs", summary=False) as bar:  # _stage times the whole
            for encoded in encode_chunks(chunks, encoding, workers):
                writers[0].write(encoded.src_ids, encoded.src_lengths)
                writers[1].write(encoded.tgt_ids, encoded.tgt_lengths)
                dropped += encoded.dropped
                bar.update(len(encoded.src_lengths) + encoded.dropped)
    finally:
        for writer in writers:
            writer.close()
    kept = writers[0].sentences
    if split == "train" and not kept:
        raise DataError(f"no training pair is kept: all {pairs:,} are empty on one side, longer than "
                        f"--max-len {encoding.max_len} tokens, or differ in length by more than "
                        f"{encoding.max_ratio:g}x")
    stats = {"pairs": kept, "dropped": dropped, "src_tokens": writers[0].tokens, "tgt_tokens": writers[1].tokens}
    print_fn(f"{split}: {kept:,} pairs, {stats['src_tokens']:,} + {stats['tgt_tokens']:,} tokens"
             + (f", {dropped:,} dropped by length" if dropped else ""))
    return stats


def _build(work: Path, sources: dict[str, list[Source]], options: PrepareOptions, print_fn, workers: int,
           given: tuple[bytes, bytes] | None = None) -> dict:
    with _stage(print_fn, "read the text"):
        pairs = {split: sum(source.count() for source in split_sources) for split, split_sources in sources.items()}
    for split, count in pairs.items():
        if not count:
            raise DataError(f"the {split} text ({', '.join(s.name for s in sources[split])}) has no lines")
    src_tok, tgt_tok, models, sample = _tokenizers(work, sources["train"], pairs["train"], options, print_fn,
                                                   given)
    largest = max(src_tok.vocab_size, tgt_tok.vocab_size)
    dtype = np.uint16 if largest <= np.iinfo(np.uint16).max else np.int32
    stats = {}
    for split in sources:
        encoding = Encoding(src_tok.model_bytes, tgt_tok.model_bytes, np.dtype(dtype).name, options.mono,
                            options.max_len if split == "train" else None, options.max_ratio)
        stats[split] = _write_split(work, split, sources[split], pairs[split], encoding, workers, print_fn)
    return {
        "format": FORMAT, "version": 1, "attncomp": __version__,
        "languages": {"src": options.src_lang, "tgt": options.tgt_lang},
        "vocab": {"shared": models["src"] == models["tgt"], "src_size": src_tok.vocab_size, "tgt_size": tgt_tok.vocab_size,
                  "src_model": models["src"], "tgt_model": models["tgt"]},
        "dtype": np.dtype(dtype).name, "splits": stats,
        "options": dataclasses.asdict(options),
        **({"tokenizer_sample": sample} if sample else {}),
        **({"monolingual": True} if options.mono else {}),
    }


def _work_dir(out: Path) -> Path:
    """A fresh directory beside `out` to build in; those of earlier runs on this machine that died are removed."""
    host = socket.gethostname().replace("/", "_")
    for stale in out.parent.glob(f".{out.name}.tmp-{host}-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    work = out.parent / f".{out.name}.tmp-{host}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    return work


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: running
        return True
    return True


def prepare(inputs: dict[str, list[str]], out: Path, options: PrepareOptions, force: bool = False,
            print_fn=print, include: dict[str, Path] | None = None,
            tokenizers: tuple[bytes, bytes] | None = None, workers: int = 1) -> tuple[dict, bool]:
    """Prepare `inputs` ({"train": [...], "valid": [...], "test": [...]}) into `out`, encoding on `workers`
    processes (the output is the same for any number).

    `tokenizers`: (src, tgt) sentencepiece models to encode with instead of training new ones (a
    checkpoint's, to fine-tune it); `options.given` must then name them (`given_digest`).

    `include` copies extra files into the directory (name -> file) before the manifest is written.
    Returns (manifest, changed); `changed` is False when `out` already holds exactly this preparation
    (`force` prepares it again all the same).
    """
    if not inputs.get("train"):
        raise DataError("data prepare needs at least one --train source")
    sources = sources_of(inputs, options)
    existing = _existing(out)
    known = existing.get("input_files") if existing is not None and not force else None
    records = input_records(sources, known if isinstance(known, dict) else {})
    digest = fingerprint(sources, options, records)
    if existing is not None and existing.get("fingerprint") == digest and not force:
        return existing, False
    if existing is not None and not force:
        raise DataError(f"{out} holds a different preparation (other inputs or options); "
                        "use --force to replace it, or choose another --out")
    print_fn(f"preparing {out} from {len(records)} input file{'s' if len(records) > 1 else ''} "
             f"({sum(record['size'] for record in records.values()) / 1e9:.2f} GB)")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = _work_dir(out)
    try:
        manifest = _build(work, sources, options, print_fn, workers, tokenizers)
        manifest["inputs"] = {split: [str(s) for s in inputs.get(split, [])] for split in SPLITS}
        manifest["input_files"] = records
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
