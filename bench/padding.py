"""Padding in the runner's updates, for each sort order: a property of the data and the batching alone.

    python bench/padding.py DATA [--tokens 25000]

DATA is a directory made by `attncomp data prepare`. For each sort order of attncomp.data.batching
it cuts one epoch of the training split into updates of at most `--tokens` source and `--tokens`
target tokens and prints the mean source and target tokens per update (the runner's order), the
fraction of padding (source and target together, each padded to its update's longest sentence) and
the fraction of updates whose sources need no padding (those can run the mask-free graph); then
the time to turn one update into padded tensors on this CPU (the runner's collation, mean over 100
updates), which a GPU waits for between updates.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def padding(src_lengths, tgt_lengths, updates) -> tuple[float, float]:
    real = padded = unpadded_src = 0
    for update in updates:
        for lengths in (src_lengths[update], tgt_lengths[update]):
            real += int(lengths.sum())
            padded += int(lengths.max()) * len(update)
        unpadded_src += bool((src_lengths[update] == src_lengths[update][0]).all())
    return 1.0 - real / padded, unpadded_src / len(updates)


def main(argv=None) -> dict[str, tuple[float, float]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data")
    parser.add_argument("--tokens", type=int, default=25000, help="source and target tokens per update, each")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    import numpy as np

    from attncomp.data.batching import SORT_ORDERS, Batcher
    from attncomp.data.dataset import PreparedData

    split = PreparedData(args.data).split("train")
    src, tgt = split.src.lengths, split.tgt.lengths
    print(f"{args.data}: {len(src):,} pairs, at most {args.tokens:,} source and {args.tokens:,} target tokens "
          "per update")
    runner = Batcher(src, tgt, args.tokens, args.seed, 1, 1 << 30).epoch(0)
    print(f"per update (mean of {len(runner):,}): {np.mean([src[u].sum() for u in runner]):,.0f} source tokens, "
          f"{np.mean([tgt[u].sum() for u in runner]):,.0f} target tokens")
    print("| sort order | padding | updates without source padding |")
    print("|------------|---------|--------------------------------|")
    results = {}
    for name in SORT_ORDERS:
        updates = Batcher(src, tgt, args.tokens, args.seed, 1, 1 << 30, sort=name).epoch(0)
        results[name] = padding(src, tgt, updates)
        print(f"| {name} | {100 * results[name][0]:.1f}% | {100 * results[name][1]:.1f}% |")
    print(f"collating one update into tensors: {collate_ms(split, args.tokens, args.seed):.1f} ms")
    return results


def collate_ms(split, tokens: int, seed: int, updates: int = 100) -> float:
    from attncomp.data.batching import Batcher, translation_batch

    batcher = Batcher(split.src.lengths, split.tgt.lengths, tokens, seed, 1, 32768)
    plan = batcher.epoch(0)[:updates]
    start = time.perf_counter()
    for update in plan:
        for part in batcher.parts(update):
            translation_batch(split, part)
    return (time.perf_counter() - start) / len(plan) * 1e3


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from bench import run_command

    run_command(main)
