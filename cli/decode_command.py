"""`attncomp translate` and `attncomp eval`."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
import warnings
from pathlib import Path

import torch

from attncomp.cli.args import (device as device_name, finite_non_negative_float, fraction, input_file, int_at_least,
                               output_file, positive_float, positive_int, write_text_atomic)
from attncomp.cli.spec_commands import add_overrides
from attncomp.data.tokenizer import tokenizer_of
from attncomp.decode.beam import NaNScores
from attncomp.decode.sampling import Sampling
from attncomp.decode.score import sacrebleu_test_set, score
from attncomp.decode.translate import Translator
from attncomp.errors import DataError, UsageError, printable
from attncomp.loading import load_checkpoint
from attncomp.passes import DEFAULT_PASSES

MAX_SOURCE_TOKENS = 256  # the longest pair `data prepare` keeps by default (--max-len), </s> included
MAX_HYPOTHESES = 1024  # --beam and --nbest: beams or samples of a line are rows of one batch


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


def _stdin():
    """Standard input, or a usage error when the command was started with it closed (`<&-`)."""
    if sys.stdin is None:
        raise UsageError("standard input is closed; give the lines with --input FILE (or --src FILE)")
    return sys.stdin


def _stdout():
    """Standard output, or a usage error when the command was started with it closed (`>&-`)."""
    if sys.stdout is None:
        raise UsageError("standard output is closed; write the translations with --output FILE")
    return sys.stdout


def _read(path: str | None) -> list[str]:
    if path is None or path == "-":
        return read_input_lines(_stdin().buffer.read(), "stdin")
    try:
        return read_input_lines(Path(path).read_bytes(), path)
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None


def _translator(args: argparse.Namespace):
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    # on CPU, fuse_qkv's concatenation of W_Q, W_K, W_V at every decode_step costs more than the one
    # matmul saves (docs/performance.md, "CPU decoding"); its graphs compute the same function
    passes = [p for p in DEFAULT_PASSES if p != "fuse_qkv"] if device.type == "cpu" else DEFAULT_PASSES
    if args.int8 and device.type != "cpu":
        raise UsageError("--int8 is dynamic int8 quantisation for CPU decoding; use it with --device cpu")
    if args.int8 and args.dtype != "float32":
        raise UsageError(f"--int8 quantises a float32 model; it cannot be combined with --dtype {args.dtype}")
    model, found = load_checkpoint(args.checkpoint, args.overrides, device=device, expect_spec=args.spec,
                                   passes=passes)
    model = model.to(DTYPES[args.dtype])  # the beam's scores stay float32: beam.py takes log_softmax of .float()
    if args.int8:
        with warnings.catch_warnings():  # torch.ao.quantization's deprecation notices are not the user's to act on
            warnings.simplefilter("ignore")
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    decode = model.spec.decode
    beam = args.beam or decode.beam
    sampling = _sampling(args)
    if args.nbest > beam and sampling is None:
        raise UsageError(f"--nbest {args.nbest} asks for more hypotheses than the beam keeps ({beam}); "
                         f"raise --beam to at least {args.nbest}")
    tokenizers = {side: tokenizer_of(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt")}
    try:  # an imported model's languages (mBART, M2M100, NLLB): the source template's, the forced target's
        tokenizers = {"src": tokenizers["src"].with_source_language(args.src_lang),
                      "tgt": tokenizers["tgt"].with_target_language(args.tgt_lang)}
    except DataError as err:
        raise UsageError(str(err)) from None
    if tokenizers["tgt"].specials.eos is None:
        raise UsageError(f"{args.checkpoint}: its vocabulary declares no end token (the imported config has no "
                         "eos_token_id), so it cannot generate")
    return Translator(model, tokenizers["src"], tokenizers["tgt"], beam=beam,
                      alpha=decode.length_penalty if args.alpha is None else args.alpha, max_len=decode.max_len,
                      nbest=args.nbest, batch_tokens=args.batch_tokens, device=device,
                      max_source_tokens=args.max_source_tokens, sampling=sampling,
                      continuation=_monolingual(found.header.data))


def _monolingual(manifest: str) -> bool:
    """Whether the checkpoint's data manifest (JSON text, checked by attncomp.checkpoint.schema) is one language's."""
    return json.loads(manifest).get("monolingual") is True


@contextlib.contextmanager
def _nan_hint(args: argparse.Namespace):
    """NaN scores (attncomp.decode.beam.NaNScores) in one line that names the checkpoint and what to try."""
    try:
        yield
    except NaNScores as err:
        hint = {"float16": "float16 overflows above 65504: decode with --dtype bfloat16 or float32",
                "bfloat16": "decode with --dtype float32"}.get(args.dtype, "its weights or activations are "
                                                                           "not finite in float32")
        raise DataError(f"{printable(args.checkpoint)}: {err} (--dtype {args.dtype}); {hint}") from None


def _warn_cut(translator, name: str | None) -> None:
    """One warning naming the input lines that were cut to the source limit (the first ten)."""
    if translator.truncated:
        shown = ", ".join(map(str, translator.cut_lines[:10])) + (" ..." if translator.truncated > 10 else "")
        print(f"warning: {printable('stdin' if name in (None, '-') else name)}: {translator.truncated} line(s) were longer than the model "
              f"reads and were cut to {translator.source_limit()} source tokens (line(s) {shown}; "
              f"--max-source-tokens)", file=sys.stderr)


def _sampling(args: argparse.Namespace):
    """Sampling settings when --sample (or one of its options) is given, else None (beam search)."""
    options = (getattr(args, "temperature", None), getattr(args, "top_k", None), getattr(args, "top_p", None))
    if not getattr(args, "sample", False) and all(o is None for o in options):
        return None
    temperature, top_k, top_p = options
    return Sampling(temperature=1.0 if temperature is None else temperature, top_k=top_k or 0,
                    top_p=1.0 if top_p is None else top_p, seed=args.seed)


def _write(path: str | None, lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    if path is None or path == "-":
        _stdout().write(text)
    else:
        write_text_atomic(path, text)


def _shown(index: int, options: list, nbest: int) -> list[str]:
    """One line, or with --nbest N the N lines `index<TAB>score<TAB>text`."""
    if nbest > 1:
        return [f"{index}\t{t.score:.4f}\t{t.text}" for t in options]
    return [options[0].text]


def _stream(translator, args: argparse.Namespace) -> None:
    """Answer each input line as soon as it is read (a terminal, or --stream)."""
    from_stdin = args.input in (None, "-")
    out = _stdout()
    # bytes that are not UTF-8 become U+FFFD, as in the batch path (never a decoding error mid-stream)
    source = io.TextIOWrapper(_stdin().buffer, encoding="utf-8", errors="replace") if from_stdin else \
        open(args.input, encoding="utf-8", errors="replace")
    with contextlib.nullcontext(source) if from_stdin else source:
        lines = (line.rstrip("\n").rstrip("\r") for line in iter(source.readline, ""))
        for index, options in enumerate(translator.translate_stream(lines)):
            out.write("".join(line + "\n" for line in _shown(index, options, args.nbest)))
            out.flush()


def _translate(args: argparse.Namespace) -> int:
    interactive = args.input in (None, "-") and _stdin().isatty()
    if args.stream and args.output not in (None, "-"):
        raise UsageError("--stream writes each translation to stdout as it is made; leave out --output")
    if args.output in (None, "-"):
        _stdout()  # refused before the model loads
    translator = _translator(args)
    if args.stream or (interactive and args.output in (None, "-")):
        with _nan_hint(args):
            _stream(translator, args)
    else:
        with _nan_hint(args):
            results = translator.translate(_read(args.input))
        _write(args.output, [line for i, options in enumerate(results) for line in _shown(i, options, args.nbest)])
    _warn_cut(translator, args.input)
    return 0


def _eval(args: argparse.Namespace) -> int:
    if args.sacrebleu_test:
        if not args.langpair:
            raise UsageError("--sacrebleu-test needs --langpair (e.g. en-de)")
        sources, references = sacrebleu_test_set(args.sacrebleu_test, args.langpair)
    elif args.src and args.ref:
        if args.src == "-" and args.ref == "-":
            raise UsageError("--src and --ref cannot both be stdin (-)")
        if "-" in (args.src, args.ref):
            _stdin()
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
    with _nan_hint(args):
        hypotheses = [options[0].text for options in translator.translate(sources)]
    seconds = time.perf_counter() - start
    _warn_cut(translator, args.src or args.sacrebleu_test)
    if args.output:
        _write(args.output, hypotheses)
    result = score(hypotheses, references)
    speed = {"seconds": round(seconds, 3), "sentences_per_s": round(len(sources) / max(seconds, 1e-9), 2),
             "beam": translator.beam, "device": str(translator.device), "dtype": args.dtype}
    if args.json:
        print(json.dumps({**result.to_json(), **speed}, indent=2))
    else:
        print(f"{result.bleu_text}\nBLEU signature: {result.bleu_signature}")
        print(f"chrF2 = {result.chrf:.2f}\nchrF signature: {result.chrf_signature}")
        print(f"{len(sources)} sentences in {seconds:.1f}s ({speed['sentences_per_s']:.1f}/s, beam "
              f"{translator.beam}, {translator.device}, {args.dtype})")
    return 0


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _decode_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", metavar="CHECKPOINT")
    p.add_argument("--beam", type=int_at_least(1, MAX_HYPOTHESES),
                   help=f"beam size, 1 to {MAX_HYPOTHESES} (default: the spec's)")
    p.add_argument("--alpha", type=finite_non_negative_float,
                   help="length penalty alpha, finite and >= 0 (default: the spec's)")
    p.add_argument("--nbest", type=int_at_least(1, MAX_HYPOTHESES), default=1,
                   help=f"hypotheses per line, 1 to {MAX_HYPOTHESES} (translate: index, score, text)")
    p.add_argument("--batch-tokens", type=positive_int, default=6000, metavar="N",
                   help="source tokens x beam per batch (default 6000)")
    p.add_argument("--max-source-tokens", type=int_at_least(2), default=MAX_SOURCE_TOKENS, metavar="N",
                   help=f"cut longer lines to N tokens, </s> included, with a warning naming them (default "
                        f"{MAX_SOURCE_TOKENS}, never above what the model reads); output is at most 2N tokens")
    p.add_argument("--device", type=device_name, help="cpu, cuda, cuda:1 (default: cuda if present)")
    p.add_argument("--spec", metavar="SPEC", help="refuse a checkpoint not trained with exactly this spec")
    p.add_argument("--src-lang", metavar="LANG",
                   help="an imported multilingual model's source language token (mBART: en_XX, M2M100: __en__, "
                        "NLLB: eng_Latn; default: its tokenizer's)")
    p.add_argument("--tgt-lang", metavar="LANG",
                   help="an imported multilingual model's target language (its forced first token, or decoder "
                        "start: generation_config.json)")
    p.add_argument("--int8", action="store_true",
                   help="CPU: dynamic int8 quantisation of the linear layers (faster; translations may change)")
    p.add_argument("--dtype", choices=tuple(DTYPES), default="float32",
                   help="the weights' and activations' type while decoding (default float32); bfloat16 and "
                        "float16 are for GPUs (faster; translations may change; scores are summed in float32)")
    add_overrides(p)


def _sampling_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sampling (instead of beam search; --nbest N draws N samples per line)")
    g.add_argument("--sample", action="store_true", help="sample translations (implied by the options below)")
    g.add_argument("--temperature", type=positive_float, help="divide the logits by T > 0 (default 1)")
    g.add_argument("--top-k", type=positive_int, metavar="K", help="draw from the K most likely tokens only")
    g.add_argument("--top-p", type=fraction, metavar="P",
                   help="draw from the fewest most likely tokens whose probability reaches P, in (0, 1]")
    g.add_argument("--seed", type=int_at_least(0, 2**63 - 1), default=0,
                   help="random seed of the samples, 0 to 2^63-1 (default 0)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("translate", help="translate lines (stdin or --input) with a checkpoint")
    _decode_options(p)
    p.add_argument("--input", type=input_file, metavar="FILE", help="read lines from FILE (default stdin)")
    p.add_argument("--output", type=output_file, metavar="FILE", help="write translations to FILE (default stdout)")
    p.add_argument("--stream", action="store_true",
                   help="answer each line as it arrives (the default when stdin is a terminal)")
    _sampling_options(p)
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
