"""Evaluation during training: validation loss and perplexity, the same on every worker."""

from __future__ import annotations

import math

import numpy as np
import torch

from attncomp.train.batches import RunData
from attncomp.train.cluster import all_reduce


@torch.no_grad()
def evaluate(model: torch.nn.Module, train_step: torch.nn.Module, data: RunData, max_tokens_per_worker: int,
             rank: int, world: int) -> dict[str, float]:
    """Validation loss and perplexity; every worker runs the same number of batches (FSDP's
    forward is collective), a short share padded with zero-weighted ones."""
    split = data.valid_split
    if split is None:
        return {}
    model.eval()
    lengths = split.src.lengths + split.tgt.lengths
    per_batch = max(1, max_tokens_per_worker // max(1, int(lengths.max(initial=1))))
    shares = np.array_split(np.flatnonzero(data.fits(split)), world)
    rounds = max(math.ceil(len(share) / per_batch) for share in shares)
    mine, totals = shares[rank], torch.zeros(3, device=data.device)
    for i in range(rounds):
        indices = mine[i * per_batch : (i + 1) * per_batch]
        weight = 1.0 if len(indices) else 0.0
        losses = data.losses(train_step, split, indices if len(indices) else shares[0][:1])
        totals += losses.float() * weight
    model.train()
    loss, nll, tokens = all_reduce(totals).tolist()
    tokens = max(tokens, 1.0)
    return {"loss": loss / tokens, "ppl": math.exp(min(nll / tokens, 50.0))}
