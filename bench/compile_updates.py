"""The runner's --compile on real batches, update by update: how long each of the first updates takes
and which of them compiled a graph (and why: PyTorch's recompile reasons are printed with
TORCH_LOGS=recompiles).

    TORCH_LOGS=recompiles python bench/compile_updates.py --spec base --data DE-EN-37K --updates 25
    python bench/compile_updates.py --spec base --data DE-EN-37K --static    # torch.compile's defaults
    python bench/compile_updates.py --spec base --data DE-EN-37K --whole     # one graph for the whole step
    python bench/compile_updates.py --device cpu --set "train.batch=tokens(2000)" --data DE-EN-37K --updates 3

It steps through the same length-bucketed updates as `bench/throughput.py --data` (a compiled
`TrainStep`, as `attncomp train --compile` builds it), prints each update's seconds (an update that
compiled a graph stands out by minutes), and at the end the number of graphs compiled and how many
parameter tensors the updates changed (all of them, unless the compiled step lost its gradients).
`--static` compiles as torch.compile does by default (static shapes first, dynamic after a miss)
instead of the runner's dynamic shapes from the start; `--whole` compiles the whole step (model and
fused loss) as one graph, with dynamic shapes, instead of the runner's regional compilation (each
layer, compiled once per layer kind).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `python bench/compile_updates.py` from anywhere


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="base", help="base, big, or a spec path")
    parser.add_argument("--data", required=True, help="a prepared data directory (attncomp data prepare)")
    parser.add_argument("--updates", type=int, default=25, help="distinct updates to cycle through")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--static", action="store_true", help="torch.compile's default shapes, not dynamic ones")
    parser.add_argument("--whole", action="store_true",
                        help="the whole step as one compiled graph (as --compile did before regional compilation)")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (CPU smoke tests: aot_eager)")
    parser.add_argument("--set", action="append", default=[], help="a spec override (smaller CPU batches)")
    args = parser.parse_args(argv)

    import attncomp.train.step as step_module
    from attncomp import ir
    from bench.throughput import real_batches

    if args.static:  # real_batches compiles through attncomp.train.step.compiled, as the runner does
        step_module.compiled = lambda step, backend="inductor": torch.compile(step, backend=backend)
    elif args.whole:
        regional = step_module.compiled
        step_module.compiled = lambda step, backend="inductor": regional(step, backend, regional=False)
    path = ROOT / "specs" / f"{args.spec}.attn" if args.spec in ("base", "big") else Path(args.spec)
    spec = ir.load(path, args.set)
    device = torch.device(args.device)
    torch._dynamo.reset()  # count this run's graphs only
    from torch._dynamo.utils import counters

    counters.clear()
    step, _, _ = real_batches(spec, args.data, device, args.updates, compiled=True, backend=args.backend)
    model = step.model
    before = [p.detach().clone() for p in model.parameters()]
    start = time.perf_counter()
    seconds = []
    for i in range(args.updates + 5):  # the first pass meets every shape, then a few again
        t = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - t)
        print(f"update {i:3d}: {seconds[-1]:7.2f} s   ({time.perf_counter() - start:.0f} s in all)", flush=True)
    moved = sum(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    graphs = int(counters["stats"]["unique_graphs"])
    print(f"{graphs} graph(s) compiled; {moved} of {len(before)} parameter tensors changed")
    return {"seconds": seconds, "graphs": graphs, "moved": moved, "parameters": len(before)}


if __name__ == "__main__":
    from bench import run_command

    run_command(main)
