"""Batches of tokens, not sentences, whose composition does not depend on the number of workers.

An epoch is cut into *updates* of about `tokens_per_update` target tokens (the spec's batch,
global): sentences are shuffled with a seed, sorted by their longer side, then source, then target
length (so an update holds similar lengths and little padding: 9.5% on the de-en corpus with 25,000
tokens per update, against 24.8% sorting by target length first), cut greedily, and the updates
shuffled — all independent of the world size. Each update is then split into
`world * accumulation` parts of similar size; worker r takes parts r*a .. (r+1)*a - 1, reading only
its own sentences. The same update is computed whatever the world size: with the loss summed and
divided by the update's target tokens, one process accumulating two parts and two processes with one
part each produce the same gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attncomp.data.dataset import Split
from attncomp.vocab import BOS, PAD, SEP


@dataclass
class Update:
    epoch: int
    index: int  # position within the epoch
    parts: list[np.ndarray]  # sentence indices of each micro-batch, all workers'; some may be empty
    target_tokens: int  # real (unpadded) target tokens of the whole update

    def mine(self, rank: int, world: int) -> list[np.ndarray]:
        per = len(self.parts) // world
        return self.parts[rank * per : (rank + 1) * per]


# Sort keys for np.lexsort (last key first): the runner's, and two others bench/padding.py compares.
SORT_ORDERS = {
    "longer": lambda src, tgt: (tgt, src, np.maximum(src, tgt)),  # the longer side, then source, target
    "target": lambda src, tgt: (src, tgt),  # target length, then source length
    "source": lambda src, tgt: (tgt, src),  # source length, then target length
}


class Batcher:
    """Deterministic updates for a split, given the seed; `keep` masks sentences out (too long)."""

    def __init__(self, src_lengths: np.ndarray, tgt_lengths: np.ndarray, tokens_per_update: int, seed: int,
                 world: int, max_tokens_per_worker: int, keep: np.ndarray | None = None, sort: str = "longer"):
        self.src_lengths, self.tgt_lengths = src_lengths, tgt_lengths
        self.sort_key = SORT_ORDERS[sort]
        self.tokens_per_update = tokens_per_update
        self.seed, self.world, self.max_tokens = seed, world, max_tokens_per_worker
        self.indices = np.flatnonzero(keep) if keep is not None else np.arange(len(src_lengths))
        if len(self.indices) == 0:
            raise ValueError("no usable sentences")

    def epoch(self, epoch: int) -> list[np.ndarray]:
        """The updates of one epoch, as arrays of sentence indices sorted by length."""
        rng = np.random.default_rng([self.seed, epoch])
        order = self.indices[rng.permutation(len(self.indices))]
        src, tgt = self.src_lengths[order], self.tgt_lengths[order]
        order = order[np.lexsort(self.sort_key(src, tgt))]
        cuts, total = [0], 0
        for i, n in enumerate(self.tgt_lengths[order]):
            if total and total + n > self.tokens_per_update:
                cuts.append(i)
                total = 0
            total += int(n)
        cuts.append(len(order))
        updates = [order[a:b] for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
        return [updates[i] for i in rng.permutation(len(updates))]

    def parts(self, update: np.ndarray) -> list[np.ndarray]:
        """Split an update into world * accumulation micro-batches of similar padded size.

        An update with fewer sentences than workers leaves some parts empty (see Update.mine).
        """
        longest = int(max(self.src_lengths[update].max(), self.tgt_lengths[update].max())) + 1
        padded = longest * len(update)
        accumulation = max(1, math.ceil(padded / (self.world * self.max_tokens)))
        accumulation = min(accumulation, max(1, math.ceil(len(update) / self.world)))
        return list(np.array_split(update, self.world * accumulation))

    def updates(self, start_epoch: int = 0, start_index: int = 0):
        """Updates forever, from a position (epoch, index within it)."""
        epoch, index = start_epoch, start_index
        while True:
            plan = self.epoch(epoch)
            for i in range(index, len(plan)):
                update = plan[i]
                yield Update(epoch, i, self.parts(update), int(self.tgt_lengths[update].sum()))
            epoch, index = epoch + 1, 0


# --- turning sentence indices into tensors ----------------------------------------------------


def _pad(rows: list[np.ndarray]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), PAD, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return torch.from_numpy(out)


def translation_batch(split: Split, indices: np.ndarray) -> dict[str, torch.Tensor]:
    """src (ends in </s>), tgt_in (<s> + target without its last token), tgt_out (target + </s>)."""
    src = [split.src[i] for i in indices]
    tgt = [split.tgt[i] for i in indices]
    return {"src": _pad(src), "tgt_in": _pad([np.concatenate(([BOS], t[:-1])) for t in tgt]), "tgt_out": _pad(tgt)}


def lm_sequence(src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """A decoder-only model reads `source <sep> target </s>`."""
    return np.concatenate((src[:-1], [SEP], tgt))


def lm_batch(split: Split, indices: np.ndarray) -> dict[str, torch.Tensor]:
    seqs = [lm_sequence(split.src[i], split.tgt[i]) for i in indices]
    return {"tokens": _pad([np.concatenate(([BOS], s[:-1])) for s in seqs]), "tgt_out": _pad(seqs)}
