"""Translation quality, side by side: an attncomp spec and a hand-written torch.nn.Transformer, same
data, tokenizer, time budget and recipe, both scored with sacreBLEU on the same test set.

    python bench/quality.py --minutes 15 --out bench_runs/quality        # ../shared/data/de-en
    python bench/quality.py --prepared DIR --src T.src --ref T.tgt --minutes 0.1   # any prepared data
    python bench/quality.py --spec specs/base.attn --device cuda --compile --minutes 10 --only attncomp ...

On a GPU (`--device cuda`) attncomp trains with `--gpus 1` (and `--compile`) and decodes there; the
reference trains there too, with bf16 autocast, fused Adam and the runner's micro-batch size (and
`--compile`: torch.compile over its model and loss). `--only attncomp` or `--only reference` trains and
scores one side: the two sides can then run in two sessions, each side's figures kept in results.json.

attncomp trains through its own command (`attncomp train ... --time-limit`), averages its last
checkpoints and decodes with the key/value cache; the reference trains in this process with the
same batches, loss, optimiser, schedule and checkpoint averaging, and decodes with the same beam
search without a cache. Prints a table and writes OUT/results.json. Run again with the same OUT, it
reuses the prepared data and a finished attncomp run, and trains the reference again.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DE_EN = ROOT.parent / "shared" / "data" / "de-en"
ATTNCOMP = [sys.executable, "-m", "attncomp.cli.main"]


def _prepare_de_en(data_dir: Path, out: Path, vocab: int) -> tuple[Path, Path, Path]:
    from attncomp.data.prepare import PrepareOptions, prepare

    sources = {"train": [str(data_dir / "train"), str(data_dir / "phrases")], "valid": [str(data_dir / "valid")],
               "test": [str(data_dir / "test")]}
    prepare(sources, out / "data", PrepareOptions("en", "de", vocab_size=vocab), print_fn=print)
    texts = []
    for lang in ("en", "de"):
        plain = out / f"test.{lang}"
        with gzip.open(data_dir / f"test.{lang}.gz", "rt", encoding="utf-8") as f:
            plain.write_text(f.read())
        texts.append(plain)
    return out / "data", texts[0], texts[1]


def _ours(spec: Path, data: Path, out: Path, minutes: float, src: Path, ref: Path, device: str = "cpu",
          compile: bool = False, sets: list[str] = ()) -> dict:
    run_dir = out / "attncomp"
    workers = ["--gpus", "1"] if device == "cuda" else ["--procs", "1"]
    if not (run_dir / "checkpoint_avg.pt").exists():  # a finished run is reused (it spent its whole budget)
        subprocess.run([*ATTNCOMP, "train", str(spec), "--data", str(data), "--out", str(run_dir), *workers,
                        "--time-limit", str(minutes), *(["--compile"] if compile else []),
                        *(arg for kv in sets for arg in ("--set", kv))], check=True)
    result = subprocess.run([*ATTNCOMP, "eval", str(run_dir / "checkpoint_avg.pt"), "--src", str(src),
                             "--ref", str(ref), "--json", "--device", device, "--output", str(out / "attncomp.hyp")],
                            check=True, stdout=subprocess.PIPE, text=True)  # its error line reaches stderr
    scores = json.loads(result.stdout)
    from attncomp import checkpoint as ckpt

    scores["steps"] = ckpt.load(run_dir / ckpt.AVERAGE, model=False).header.step
    return scores


def _reference(spec_path: Path, data_dir: Path, minutes: float, src: Path, ref: Path, out: Path,
               device: str = "cpu", compile: bool = False, sets: list[str] = ()) -> dict:
    import torch

    from attncomp import ir
    from attncomp.data.dataset import PreparedData
    from attncomp.decode.beam import FullStepper
    from attncomp.decode.score import score
    from attncomp.decode.translate import Translator
    from attncomp.files import write_atomically as write_text_atomic
    from attncomp.train.run_job import DEFAULT_TOKENS
    from bench.reference import train_reference

    torch.set_num_threads(max(1, torch.get_num_threads()))
    spec = ir.load(spec_path, list(sets))
    data = PreparedData(data_dir)
    model, stats = train_reference(spec, data, minutes, max_tokens=DEFAULT_TOKENS[device],
                                   device=torch.device(device), compile=compile)
    tok = data.tokenizer("src")
    translator = Translator(model, tok, data.tokenizer("tgt"), spec.decode.beam, spec.decode.length_penalty,
                            spec.decode.max_len, stepper=FullStepper, progress=False, device=torch.device(device))
    sources, references = src.read_text().splitlines(), ref.read_text().splitlines()
    start = time.perf_counter()
    hypotheses = [t[0].text for t in translator.translate(sources)]
    seconds = time.perf_counter() - start
    write_text_atomic(out / "reference.hyp", "\n".join(hypotheses) + "\n")
    result = score(hypotheses, references).to_json()
    result.update(stats, seconds=round(seconds, 1), sentences_per_s=round(len(sources) / seconds, 2))
    return result


def _text_file(text: str) -> str:
    from attncomp.cli.args import input_file

    if text == "-":
        raise argparse.ArgumentTypeError("give a file (both sides read it), not stdin (-)")
    return input_file(text)


def _earlier(path: Path) -> dict:
    """results.json of an earlier run (--only keeps the other side's figures), or one error line."""
    from attncomp.errors import UsageError
    from attncomp.files import read_json

    results = read_json(path, what="results file", error=UsageError)
    if not isinstance(results, dict) or not all(isinstance(v, dict) for v in results.values()):
        raise UsageError(f"{path}: not the results of an earlier run (an object of sides); move it away")
    return results


def main(argv=None) -> dict:
    from attncomp.cli.args import output_dir, positive_float

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default=str(ROOT / "specs/examples/small.attn"))
    parser.add_argument("--minutes", type=positive_float, default=15.0, help="training budget for each model")
    parser.add_argument("--out", type=output_dir, default="bench_runs/quality")
    parser.add_argument("--data-dir", default=str(DE_EN), help="the de-en corpus (train, phrases, valid, test)")
    parser.add_argument("--prepared", help="use this prepared data directory instead")
    parser.add_argument("--src", type=_text_file, help="with --prepared: test source file")
    parser.add_argument("--ref", type=_text_file, help="with --prepared: test reference file")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="train and decode here (cpu)")
    parser.add_argument("--compile", action="store_true", help="both sides under torch.compile")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a spec override for both sides, e.g. train.checkpoint.every=2min (repeatable)")
    parser.add_argument("--only", choices=("attncomp", "reference"),
                        help="train and score one side; results.json keeps the other side's earlier figures")
    args = parser.parse_args(argv)
    if (args.prepared or args.src or args.ref) and not (args.prepared and args.src and args.ref):
        parser.error("--prepared DIR needs --src FILE and --ref FILE (the test set), and they need --prepared")
    from attncomp import ir
    from attncomp.files import make_dir, write_atomically as write_text_atomic

    # before any training: a bad --spec or --set, or an unreadable results.json, after minutes of it would lose them
    vocab = ir.load(args.spec, args.set).model.tgt_vocab  # the data's vocabulary is the spec's
    out = Path(args.out)
    path = out / "results.json"
    results = _earlier(path) if args.only and path.exists() else {}
    if args.prepared:
        from attncomp.data.dataset import PreparedData

        data, src, ref = Path(args.prepared), Path(args.src), Path(args.ref)
        PreparedData(data)  # a directory that is not prepared data: its one line, before either side trains
    make_dir(out)
    if not args.prepared:
        data, src, ref = _prepare_de_en(Path(args.data_dir), out, vocab)
    setup = {"minutes": args.minutes, "spec": args.spec, "set": args.set, "device": args.device,
             "compile": args.compile, "command": " ".join(sys.argv)}
    if args.only != "reference":
        results["attncomp"] = {**_ours(Path(args.spec), data, out, args.minutes, src, ref, args.device,
                                       args.compile, args.set), **setup}
        write_text_atomic(path, json.dumps(results, indent=2) + "\n")  # kept if the reference side fails
    if args.only != "attncomp":
        results["reference"] = {**_reference(Path(args.spec), data, args.minutes, src, ref, out, args.device,
                                             args.compile, args.set), **setup}
    write_text_atomic(path, json.dumps(results, indent=2) + "\n")
    print("| model | device | minutes | steps | BLEU | chrF | decoding (sentences/s, beam 4) |")
    print("|-------|--------|---------|-------|------|------|--------------------------------|")
    for name in ("attncomp", "reference"):
        if name in results:
            r = results[name]
            print(f"| {name} | {r.get('device', 'cpu')} | {r.get('minutes')} | {r['steps']} | {r['bleu']:.2f} | "
                  f"{r['chrf']:.2f} | {r['sentences_per_s']:.1f} |")
    print(f"BLEU signature: {next(iter(results.values()))['bleu_signature']}")
    return results


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from bench import run_command

    run_command(main)
