"""`attncomp translate` and `attncomp eval`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from attncomp.cli.args import (device as device_name, finite_non_negative_float, input_file, int_at_least, output_file,
                               positive_int, write_text_atomic)
from attncomp.cli.spec_commands import add_overrides
from attncomp.errors import UsageError, printable

MAX_SOURCE_TOKENS = 256  # the longest pair `data prepare` keeps by default (--max-len), </s> included


def read_input_lines(data: bytes, name: str) -> list[str]:
    """Text lines; bytes that are not UTF-8 become U+FFFD, with one warning naming the lines."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line.rstrip("\r") for line in lines]
    bad = [i + 1 for i, line in enumerate(lines) if "\ufffd" in line]
    if bad and b"\xef\xbf\xbd" not in data:
        shown = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        print(f"warning: {name}: line(s) {shown} are not valid UTF-8; bad bytes were replaced by U+FFFD",
              file=sys.stderr)
    return lines


def _read(path: str | None) -> list[str]:
    if path is None or path == "-":
        return read_input_lines(sys.stdin.buffer.read(), "stdin")
    try:
        return read_input_lines(Path(path).read_bytes(), path)
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None


def _translator(args: argparse.Namespace):
    import torch

    from attncomp.compiler import load_checkpoint
    from attncomp.data.tokenizer import Tokenizer
    from attncomp.decode.translate import Translator

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model, found = load_checkpoint(args.checkpoint, args.overrides, device=device, expect_spec=args.spec)
    decode = model.spec.decode
    beam = args.beam or decode.beam
    if args.nbest > beam:
        raise UsageError(f"--nbest {args.nbest} asks for more hypotheses than the beam keeps ({beam}); "
                         f"raise --beam to at least {args.nbest}")
    tokenizers = {side: Tokenizer(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt")}
    return Translator(model, tokenizers["src"], tokenizers["tgt"], beam=beam,
                      alpha=decode.length_penalty if args.alpha is None else args.alpha, max_len=decode.max_len,
                      nbest=args.nbest, batch_tokens=args.batch_tokens, device=device,
                      max_source_tokens=args.max_source_tokens)


def _warn_cut(translator, name: str | None) -> None:
    """One warning naming the input lines that were cut to the source limit (the first ten)."""
    if translator.truncated:
        shown = ", ".join(map(str, translator.cut_lines[:10])) + (" ..." if translator.truncated > 10 else "")
        print(f"warning: {printable(name or 'stdin')}: {translator.truncated} line(s) were longer than the model "
              f"reads and were cut to {translator.source_limit()} source tokens (line(s) {shown}; "
              f"--max-source-tokens)", file=sys.stderr)


def _write(path: str | None, lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    if path is None or path == "-":
        sys.stdout.write(text)
    else:
        write_text_atomic(path, text)


def _translate(args: argparse.Namespace) -> int:
    translator = _translator(args)
    lines = _read(args.input)
    results = translator.translate(lines)
    if args.nbest > 1:
        out = [f"{i}\t{t.score:.4f}\t{t.text}" for i, options in enumerate(results) for t in options]
    else:
        out = [options[0].text for options in results]
    _write(args.output, out)
    _warn_cut(translator, args.input)
    return 0


def _eval(args: argparse.Namespace) -> int:
    from attncomp.decode.score import sacrebleu_test_set, score

    if args.sacrebleu_test:
        if not args.langpair:
            raise UsageError("--sacrebleu-test needs --langpair (e.g. en-de)")
        sources, references = sacrebleu_test_set(args.sacrebleu_test, args.langpair)
    elif args.src and args.ref:
        if args.src == "-" and args.ref == "-":
            raise UsageError("--src and --ref cannot both be stdin (-)")
        sources, references = _read(args.src), _read(args.ref)
    else:
        raise UsageError("give --src FILE and --ref FILE, or --sacrebleu-test SET --langpair L1-L2")
    if not sources:
        raise UsageError(f"{args.src or args.sacrebleu_test}: no source lines to translate and score")
    if len(sources) != len(references):
        raise UsageError(f"{len(sources)} source lines but {len(references)} reference lines "
                         f"({args.src}, {args.ref}); a reference needs one line per source line")
    translator = _translator(args)
    start = time.perf_counter()
    hypotheses = [options[0].text for options in translator.translate(sources)]
    seconds = time.perf_counter() - start
    _warn_cut(translator, args.src or args.sacrebleu_test)
    if args.output:
        _write(args.output, hypotheses)
    result = score(hypotheses, references)
    speed = {"seconds": round(seconds, 3), "sentences_per_s": round(len(sources) / max(seconds, 1e-9), 2),
             "beam": translator.beam, "device": str(translator.device)}
    if args.json:
        print(json.dumps({**result.to_json(), **speed}, indent=2))
    else:
        print(f"{result.bleu_text}\nBLEU signature: {result.bleu_signature}")
        print(f"chrF2 = {result.chrf:.2f}\nchrF signature: {result.chrf_signature}")
        print(f"{len(sources)} sentences in {seconds:.1f}s ({speed['sentences_per_s']:.1f}/s, beam "
              f"{translator.beam}, {translator.device})")
    return 0


def _decode_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", metavar="CHECKPOINT")
    p.add_argument("--beam", type=positive_int, help="beam size, at least 1 (default: the spec's)")
    p.add_argument("--alpha", type=finite_non_negative_float,
                   help="length penalty alpha, finite and >= 0 (default: the spec's)")
    p.add_argument("--nbest", type=positive_int, default=1, help="hypotheses per line (translate: index, score, text)")
    p.add_argument("--batch-tokens", type=positive_int, default=6000, metavar="N",
                   help="source tokens x beam per batch (default 6000)")
    p.add_argument("--max-source-tokens", type=int_at_least(2), default=MAX_SOURCE_TOKENS, metavar="N",
                   help=f"cut longer lines to N tokens, </s> included, with a warning naming them (default "
                        f"{MAX_SOURCE_TOKENS}, never above what the model reads); output is at most 2N tokens")
    p.add_argument("--device", type=device_name, help="cpu, cuda, cuda:1 (default: cuda if present)")
    p.add_argument("--spec", metavar="SPEC", help="refuse a checkpoint not trained with exactly this spec")
    add_overrides(p)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("translate", help="translate lines (stdin or --input) with a checkpoint")
    _decode_options(p)
    p.add_argument("--input", type=input_file, metavar="FILE", help="read lines from FILE (default stdin)")
    p.add_argument("--output", type=output_file, metavar="FILE", help="write translations to FILE (default stdout)")
    p.set_defaults(handler=_translate)

    p = sub.add_parser("eval", help="translate a test set and score it with sacreBLEU (BLEU, chrF)")
    _decode_options(p)
    p.add_argument("--src", type=input_file, metavar="FILE")
    p.add_argument("--ref", type=input_file, metavar="FILE")
    p.add_argument("--sacrebleu-test", metavar="SET", help="a sacreBLEU test set, e.g. wmt14 (downloads)")
    p.add_argument("--langpair", metavar="L1-L2", help="with --sacrebleu-test, e.g. en-de")
    p.add_argument("--output", type=output_file, metavar="FILE", help="also write the translations")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_eval)
