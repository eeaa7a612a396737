"""A run's data: the batcher over the training split, the validation split, and the losses of one
micro-batch (moved to the device, run under autocast)."""

from __future__ import annotations

import numpy as np
import torch

from attncomp.data.batching import Batcher, lm_batch, translation_batch
from attncomp.data.dataset import PreparedData
from attncomp.train.config import check_vocab


class RunData:
    """Every worker reads its own share of each update (attncomp.data.batching)."""

    def __init__(self, path: str, spec, world: int, max_tokens_per_worker: int, device: torch.device, autocast):
        self.spec, self.device, self.cuda, self.autocast = spec, device, device.type == "cuda", autocast
        self.lm = spec.model.encoder is None
        self.data = PreparedData(path)
        check_vocab(self.data, spec.model)
        self.train_split = self.data.split("train")
        self.valid_split = self.data.split("valid") if self.data.has_split("valid") else None
        src, tgt = self.train_split.src.lengths, self.train_split.tgt.lengths
        loss_lengths = src + tgt if self.lm else tgt
        keep = self.fits(self.train_split)
        self.batcher = Batcher(src, loss_lengths, spec.train.batch.count, spec.train.seed, world,
                               max_tokens_per_worker, keep)
        self.collate = lm_batch if self.lm else translation_batch

    def fits(self, split) -> np.ndarray:
        """Sentences the model's learned position table can hold."""
        positions = self.spec.model.positions
        src, tgt = split.src.lengths, split.tgt.lengths
        if positions.kind != "learned":
            return np.ones(len(src), dtype=bool)
        longest = positions.max_len
        return (src + tgt <= longest) if self.lm else (src <= longest) & (tgt <= longest)

    def losses(self, net, split, indices: np.ndarray) -> torch.Tensor:
        """[loss, NLL, tokens] of a micro-batch; one without source padding runs the mask-free graph."""
        batch = {k: (v.pin_memory() if self.cuda else v).to(self.device, non_blocking=True)  # pinned: no wait
                 for k, v in self.collate(split, indices).items()}
        lengths = split.src.lengths[indices]
        dense = not self.lm and bool((lengths == lengths[0]).all())
        with self.autocast:
            return net(batch, dense)
