"""The output projection + label-smoothed loss, forward and backward, timed alone on one device.

    python bench/loss.py --device cuda --tokens 25000 --d-model 1024       # big's shape on a GPU
    python bench/loss.py --device cpu --tokens 8192 --d-model 64          # CPU: the non-matmul work shows

Times `plain` (logits materialised, float32 log_softmax; what --plain-loss runs) and `fused`
(attncomp.train.loss.linear_cross_entropy, chunks of --chunk tokens; the runner's default), under
bf16 autocast on a GPU, and prints milliseconds per forward + backward and peak memory.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent


def losses(tokens: int, d_model: int, vocab: int, chunk: int, device: torch.device) -> tuple[dict, tuple]:
    """The two losses as closures over one random problem, and the leaves whose gradients they make."""
    from attncomp.train.loss import linear_cross_entropy, token_losses

    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(tokens, d_model, generator=g).to(device).requires_grad_()
    weight = (torch.randn(vocab, d_model, generator=g) * d_model**-0.5).to(device).requires_grad_()
    target = torch.randint(4, vocab, (tokens,), generator=g).to(device)
    return {
        "plain": lambda: token_losses(F.linear(hidden, weight), target, 0.1),
        "fused": lambda: linear_cross_entropy(hidden, weight, target, 0.1, chunk),
    }, (hidden, weight)


def time_one(fn, leaves, device: torch.device, reps: int) -> tuple[float, float]:
    from bench.throughput import _sync

    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    times = []
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    for i in range(reps + 2):  # two warm-ups
        _sync(device)
        start = time.perf_counter()
        with autocast:
            total = fn()[0]
        total.backward()
        _sync(device)
        if i >= 2:
            times.append(time.perf_counter() - start)
        for leaf in leaves:
            leaf.grad = None
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0
    return statistics.median(times) * 1e3, peak


def main(argv=None) -> dict[str, tuple[float, float]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens", type=int, default=25000)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=37000)
    parser.add_argument("--chunk", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    fns, leaves = losses(args.tokens, args.d_model, args.vocab, args.chunk, device)
    print(f"{args.tokens} tokens, d_model {args.d_model}, vocabulary {args.vocab}, chunk {args.chunk}, {device}")
    print("| loss | ms (forward + backward, median) | peak memory GB |")
    print("|------|----------------------------------|----------------|")
    results = {}
    for name, fn in fns.items():
        results[name] = time_one(fn, leaves, device, args.reps)
        print(f"| {name} | {results[name][0]:.1f} | {results[name][1]:.2f} |")
    return results


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from bench import run_command

    run_command(main)
