"""`attncomp export CHECKPOINT --format safetensors|ctranslate2|torch-export|hf --out DIR`."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from attncomp import checkpoint, files
from attncomp.checkpoint import safetensors_dir
from attncomp.data.hf_tokenizer import is_hf
from attncomp.data.tokenizer import Tokenizer
from attncomp.errors import UsageError, printable
from attncomp.interop import ctranslate2_export, hf_export, torch_export
from attncomp.loading import checked_spec

FORMATS = ("safetensors", "ctranslate2", "torch-export", "hf")
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16")


def _ctranslate2(found, out: Path, quantization: str) -> list[Path]:
    spec = checkpoint.stored_spec(found)
    ctranslate2_export.check_supported(spec)  # the architecture first: what keeps a model out, named
    stored = {side: found.header.tokenizers[side].numpy().tobytes() for side in ("src", "tgt")}
    if any(is_hf(model) for model in stored.values()):
        return _ctranslate2_imported(spec, found, stored, out, quantization)
    src, tgt = (ctranslate2_export.vocabulary(Tokenizer(stored[side])) for side in ("src", "tgt"))
    ctranslate2_export.write(spec, found.model, src, tgt, out, quantization)
    for side in ("src", "tgt"):  # the sentencepiece models, for tokenising beside CTranslate2
        (out / f"{side}.model").write_bytes(stored[side])
    return sorted(out.iterdir())


def _ctranslate2_imported(spec, found, stored: dict, out: Path, quantization: str) -> list[Path]:
    """An imported model with its tokenizer.json (or M2M100's files): the vocabulary by attncomp's ids, the
    config's special tokens, the tokenizer files, and attncomp_decoding.json (source template, target prefix)."""
    import json

    from attncomp.data.hf_tokenizer import HFTokenizer

    if stored["src"] != stored["tgt"]:
        raise UsageError("--format ctranslate2: this imported model has two tokenizers (not exported to CTranslate2)")
    tokenizer = HFTokenizer.from_bytes(stored["tgt"])
    vocab = ctranslate2_export.hf_vocabulary(tokenizer, spec.model.tgt_vocab)
    tokens = ctranslate2_export.config_tokens(tokenizer.specials, vocab, ctranslate2_export.start_is_language(tokenizer))
    ctranslate2_export.write(spec, found.model, vocab, vocab, out, quantization, tokens)
    for name, data in tokenizer.files().items():
        (out / name).write_bytes(data)
    decoding = ctranslate2_export.decoding(tokenizer, vocab)
    (out / "attncomp_decoding.json").write_text(json.dumps(decoding, ensure_ascii=False, indent=1) + "\n",
                                                encoding="utf-8")
    return sorted(out.iterdir())


def _export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {args.out}: exists and is not an empty directory")
    if args.quantization != "float32" and args.format != "ctranslate2":
        raise UsageError("--quantization applies to --format ctranslate2 only")
    if args.family is not None and args.format != "hf":
        raise UsageError("--family applies to --format hf only")
    found = checkpoint.read_trained(args.checkpoint)  # checked; a sharded one gathered; an export read back
    checked_spec(found)  # its spec held to the size limit before anything is built from it
    # built under a temporary name beside --out and renamed into place (onto an empty directory too), so that a
    # failure or Ctrl-C never leaves a directory that looks like an export
    out = out.resolve() if out.is_symlink() else out  # an empty directory it links to: replaced, not the link
    work = out.parent / f".{out.name}.tmp-{os.getpid()}"
    try:
        files.make_dir(out.parent)
        shutil.rmtree(work, ignore_errors=True)
        files.make_dir(work)
        written = _write(args, found, work)
        try:
            os.replace(work, out)
        except OSError as err:
            raise UsageError(f"cannot create --out {files.shown_path(out)}: {files.os_reason(err)}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {printable(str(out))} ({', '.join(printable(p.name) for p in written)})")
    return 0


def _write(args: argparse.Namespace, found, out: Path) -> list[Path]:
    if args.format == "safetensors":
        return safetensors_dir.write(found, out)
    if args.format == "torch-export":
        return torch_export.write(found, out)
    if args.format == "hf":
        return hf_export.write(found, out, args.family)
    return _ctranslate2(found, out, args.quantization)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a checkpoint as a deployable directory (safetensors, CTranslate2, torch.export)")
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="a checkpoint file, sharded checkpoint directory or safetensors export")
    p.add_argument("--format", choices=FORMATS, default="safetensors",
                   help="safetensors: weights + spec + sentencepiece models, loadable without pickle; "
                        "ctranslate2: a CTranslate2 model directory (+ the sentencepiece models); "
                        "torch-export: torch.export programs of encode, init_cache and decode_step "
                        "(dynamic batch and lengths) + spec + sentencepiece models; "
                        "hf: a save_pretrained directory of a model `attncomp import` read (docs/interop.md)")
    p.add_argument("--quantization", choices=QUANTIZATIONS, default="float32",
                   help="ctranslate2: the weights' type (int8 for fast CPU decoding; default float32)")
    p.add_argument("--family", metavar="NAME", help="hf: the Hugging Face family (model_type) to write a spec "
                   "written by hand as, where several match (docs/interop.md)")
    p.add_argument("--out", "-o", required=True, metavar="DIR", help="the directory to write (new or empty)")
    p.set_defaults(handler=_export)
