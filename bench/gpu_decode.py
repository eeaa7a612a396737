"""Decoding speed on one GPU: `attncomp eval` of a trained checkpoint beside its CTranslate2 export.

    python bench/gpu_decode.py CHECKPOINT --src test.en --ref test.de --json OUT.json
        [--beam 4] [--alpha 0] [--dtypes float32,bfloat16,float16] [--ct2 float16,bfloat16] [--batch-tokens 6000]

Every row translates the whole test set with the same beam and length penalty and scores it with
sacreBLEU (attncomp.decode.score). attncomp's rows run `attncomp eval --device cuda --dtype D` (the
command a user runs: its sentences/s are timed from the first batch to the last). CTranslate2's rows
export the checkpoint once (`attncomp export --format ctranslate2`), load it with `compute_type` C on
the GPU, and time one `translate_batch` over the whole set, with what attncomp's search does: the same
source tokens with `</s>` appended, `<pad>`, `<s>` and `<sep>` suppressed, batches of the same number of
source tokens (`--batch-tokens` / beam), at most the longest source + 50 tokens (attncomp's limit is
per sentence: src + 50). The length penalty defaults to 0: CTranslate2's is len^alpha, attncomp's
tensor2tensor's ((5 + len) / 6)^alpha, and they agree only at 0. A row that cannot run (CTranslate2
without its CUDA libraries, say) is recorded with its error and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ATTNCOMP = [sys.executable, "-m", "attncomp.cli.main"]


def ours(checkpoint: str, src: str, ref: str, dtype: str, args) -> dict:
    done = subprocess.run([*ATTNCOMP, "eval", checkpoint, "--src", src, "--ref", ref, "--json", "--device",
                           args.device, "--dtype", dtype, "--beam", str(args.beam), "--alpha", str(args.alpha),
                           "--batch-tokens", str(args.batch_tokens)], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError((done.stderr.strip().splitlines() or ["attncomp eval failed"])[-1])
    found = json.loads(done.stdout)
    return {k: found[k] for k in ("bleu", "chrf", "sentences_per_s", "seconds", "bleu_signature")}


def ctranslate2_rows(checkpoint: str, src: str, ref: str, compute_types: list[str], args) -> list[dict]:
    import ctranslate2

    from attncomp.data.tokenizer import Tokenizer
    from attncomp.decode.score import score
    from attncomp.interop.ctranslate2_export import vocabulary
    from attncomp.loading import load_checkpoint

    _, found = load_checkpoint(checkpoint, device="cpu")
    tokenizers = {side: Tokenizer(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt")}
    source_pieces = vocabulary(tokenizers["src"])
    target_ids = {piece: i for i, piece in enumerate(vocabulary(tokenizers["tgt"]))}
    sources, references = Path(src).read_text().splitlines(), Path(ref).read_text().splitlines()
    tokens = [[source_pieces[i] for i in ids] + ["</s>"] for ids in tokenizers["src"].encode(sources)]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "ct2"
        done = subprocess.run([*ATTNCOMP, "export", checkpoint, "--format", "ctranslate2", "--out", str(out)],
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError((done.stderr.strip().splitlines() or ["attncomp export failed"])[-1])
        for compute_type in compute_types:
            row = {"engine": "CTranslate2", "dtype": compute_type, "version": ctranslate2.__version__}
            try:
                translator = ctranslate2.Translator(str(out), device=args.device, compute_type=compute_type)
                start = time.perf_counter()
                results = translator.translate_batch(
                    tokens, beam_size=args.beam, length_penalty=args.alpha,
                    max_decoding_length=max(map(len, tokens)) - 1 + 50, batch_type="tokens",
                    max_batch_size=max(1, args.batch_tokens // args.beam),
                    suppress_sequences=[["<pad>"], ["<s>"], ["<sep>"]])
                seconds = time.perf_counter() - start
                hypotheses = tokenizers["tgt"].decode([[target_ids[t] for t in r.hypotheses[0]] for r in results])
                scored = score(hypotheses, references).to_json()
                row.update(bleu=scored["bleu"], chrf=scored["chrf"], bleu_signature=scored["bleu_signature"],
                           seconds=round(seconds, 3), sentences_per_s=round(len(sources) / seconds, 2))
            except Exception as err:  # noqa: BLE001 - one engine that cannot run must not lose the others
                row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
            rows.append(row)
    return rows


def _dtypes(text: str) -> list[str]:
    """attncomp's rows: names of `attncomp eval --dtype` (checked here, before any row runs)."""
    from attncomp.cli.decode_command import DTYPES

    names = list(filter(None, text.split(",")))
    bad = [name for name in names if name not in DTYPES]
    if bad:
        raise argparse.ArgumentTypeError(f"{bad[0][:40]!r} is not one of {', '.join(DTYPES)}")
    return names


def _text_file(text: str) -> str:
    """A readable regular file (not stdin: every row reads it again)."""
    from attncomp.cli.args import input_file

    if text == "-":
        raise argparse.ArgumentTypeError("give a file; each row reads it again, so not stdin (-)")
    return input_file(text)


def _parser() -> argparse.ArgumentParser:
    from attncomp.cli.args import device, finite_non_negative_float, int_at_least, output_file, positive_int
    from attncomp.cli.decode_command import MAX_HYPOTHESES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--src", required=True, type=_text_file)
    parser.add_argument("--ref", required=True, type=_text_file)
    parser.add_argument("--device", default="cuda", type=device)
    parser.add_argument("--beam", type=int_at_least(1, MAX_HYPOTHESES), default=4)
    parser.add_argument("--alpha", type=finite_non_negative_float, default=0.0)
    parser.add_argument("--batch-tokens", type=positive_int, default=6000)
    parser.add_argument("--dtypes", type=_dtypes, default="float32,bfloat16,float16", help="attncomp's rows")
    parser.add_argument("--ct2", default="float16,bfloat16", help="CTranslate2's compute types ('' for none)")
    parser.add_argument("--json", type=output_file, help="write the rows here (rewritten after each row)")
    return parser


def _write_rows(path: str, rows: list[dict]) -> None:
    """The rows so far, whole or not at all (a run stopped mid-write keeps the earlier rows)."""
    from attncomp.cli.args import write_text_atomic
    from attncomp.errors import UsageError

    try:
        write_text_atomic(path, json.dumps(rows, indent=2) + "\n")
    except OSError as err:
        raise UsageError(f"cannot write --json {path}: {err.strerror or err}") from None


def main(argv=None) -> list[dict]:
    from attncomp.checkpoint import load, safetensors_dir
    from attncomp.errors import UsageError

    args = _parser().parse_args(argv)
    # a checkpoint no row can read is its one error line now, not the same error in every row (its header)
    (safetensors_dir.read if safetensors_dir.is_export(args.checkpoint) else load)(args.checkpoint, model=False)
    setup = {"beam": args.beam, "alpha": args.alpha, "batch_tokens": args.batch_tokens, "device": args.device}
    rows: list[dict] = []

    def keep(row: dict) -> None:
        rows.append({**row, **setup})
        shown = row.get("error") or f"{row['sentences_per_s']:,.1f} sentences/s, BLEU {row['bleu']:.2f}"
        print(f"  {row['engine']:12} {row['dtype']:9} {shown}", flush=True)
        if args.json:
            _write_rows(args.json, rows)

    for dtype in args.dtypes:
        row = {"engine": "attncomp", "dtype": dtype}
        try:
            row.update(ours(args.checkpoint, args.src, args.ref, dtype, args))
        except Exception as err:  # noqa: BLE001 - as in ctranslate2_rows
            row["error"] = f"{type(err).__name__}: {err}"
        keep(row)
    compute_types = list(filter(None, args.ct2.split(",")))
    if compute_types:
        try:
            for row in ctranslate2_rows(args.checkpoint, args.src, args.ref, compute_types, args):
                keep(row)
        except Exception as err:  # noqa: BLE001 - no CTranslate2 at all: one row says why
            keep({"engine": "CTranslate2", "dtype": ",".join(compute_types),
                  "error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"})
    if rows and all("error" in row for row in rows):
        raise UsageError(f"no row ran; the first: {rows[0]['engine']} {rows[0]['dtype']}: {rows[0]['error']}")
    return rows


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from bench import run_command

    run_command(main)
