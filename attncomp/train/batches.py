"""A run's data: the batcher over the training split, the validation split, and the losses of one
micro-batch (moved to the device, run under autocast).

The objective follows the model and the data (attncomp.data.objective): an encoder-decoder translates
(source -> target); a decoder-only model is a causal LM over `source <sep> target </s>`, or over
`text </s>` on monolingual data; an encoder-only model is a masked LM over the source side, or over
both sides of a pair with segments (attncomp.data.masking)."""

from __future__ import annotations

import numpy as np
import torch

from attncomp.data.batching import Batcher
from attncomp.data.dataset import PreparedData
from attncomp.data.objective import objective_of
from attncomp.train.config import check_vocab


class RunData:
    """Every worker reads its own share of each update (attncomp.data.batching)."""

    def __init__(self, path: str, spec, world: int, max_tokens_per_worker: int, device: torch.device, autocast):
        """`spec`: a Spec, or a model's facts with its recipe (attncomp.ir.family.Described)."""
        self.spec, self.device, self.cuda, self.autocast = spec, device, device.type == "cuda", autocast
        self.data = PreparedData(path)
        self.objective = objective_of(spec.model, self.data.monolingual)
        check_vocab(self.data, spec.model)
        self.train_split = self.data.split("train")
        self.valid_split = self.data.split("valid") if self.data.has_split("valid") else None
        self.collate = self.objective.batcher_collate(spec, lambda: self.data.tokenizer("tgt"),
                                                      self.data.path)
        lengths = self.objective.lengths(self.train_split, spec.train.seed, spec.train.mlm.rate, spec.model.specials)
        self.batcher = Batcher(*lengths, spec.train.batch.count, spec.train.seed, world, max_tokens_per_worker,
                               self.fits(self.train_split))

    def fits(self, split) -> np.ndarray:
        """Sentences the model's learned position table can hold."""
        return self.objective.fits(split, self.spec.model)

    def losses(self, net, split, indices: np.ndarray) -> torch.Tensor:
        """[loss, NLL, tokens] of a micro-batch; one without padding in its inputs runs the mask-free graph."""
        batch = {k: (v.pin_memory() if self.cuda else v).to(self.device, non_blocking=True)  # pinned: no wait
                 for k, v in self.collate(split, indices).items()}
        lengths = self.objective.inputs(split.src.lengths[indices], split.tgt.lengths[indices])
        dense = self.objective.dense and bool((lengths == lengths[0]).all())
        with self.autocast:
            return net(batch, dense)
