"""Where a training step's GPU time goes: torch.profiler over a few steps of one benchmark configuration.

    python bench/profile_step.py --spec big --config "attncomp + compile" --trace OUT/big.json.gz

The step is bench/throughput.py's (same batch, bf16 autocast, fused Adam). Prints the kernels by
their total GPU time (top --rows) and, with --trace, writes a Chrome/TensorBoard trace (gzipped).
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv=None) -> str:
    from attncomp import ir
    from bench.throughput import CONFIGS, build, make_batch, time_step

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="base", help="base, big, or a spec path")
    parser.add_argument("--config", default="attncomp", choices=CONFIGS)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sentences", type=int, default=390)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--set", action="append", default=[], help="a spec override (tiny CPU runs)")
    parser.add_argument("--trace", help="write the gzipped trace here")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    path = ROOT / "specs" / f"{args.spec}.attn" if args.spec in ("base", "big") else Path(args.spec)
    spec = ir.load(path, args.set)
    batch = make_batch(args.sentences, args.length, spec.model.tgt_vocab, device)
    step = build(args.config, spec, batch, device)
    time_step(step, device, args.warmup, 1)  # warm-up (and torch.compile) outside the trace
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        time_step(step, device, 0, args.steps)
    sort = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
    table = prof.key_averages().table(sort_by=sort, row_limit=args.rows, max_name_column_width=70)
    print(f"{args.spec} / {args.config}: {args.steps} steps\n{table}")
    if args.trace:
        with tempfile.NamedTemporaryFile(suffix=".json") as raw:
            prof.export_chrome_trace(raw.name)
            with open(raw.name, "rb") as source, gzip.open(args.trace, "wb") as target:
                shutil.copyfileobj(source, target)
    return table


if __name__ == "__main__":
    from bench import run_command

    run_command(main)
