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


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--src", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.0)
    parser.add_argument("--batch-tokens", type=int, default=6000)
    parser.add_argument("--dtypes", default="float32,bfloat16,float16", help="attncomp's rows")
    parser.add_argument("--ct2", default="float16,bfloat16", help="CTranslate2's compute types ('' for none)")
    parser.add_argument("--json", help="write the rows here (rewritten after each row)")
    args = parser.parse_args(argv)
    setup = {"beam": args.beam, "alpha": args.alpha, "batch_tokens": args.batch_tokens, "device": args.device}
    rows: list[dict] = []

    def keep(row: dict) -> None:
        rows.append({**row, **setup})
        shown = row.get("error") or f"{row['sentences_per_s']:,.1f} sentences/s, BLEU {row['bleu']:.2f}"
        print(f"  {row['engine']:12} {row['dtype']:9} {shown}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")

    for dtype in filter(None, args.dtypes.split(",")):
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
    return rows


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from bench import run_command

    run_command(main)
