"""A run's data: the batcher over the training split, the validation split, and the losses of one
micro-batch (moved to the device, run under autocast).

The objective follows the model: an encoder-decoder translates (source -> target); a decoder-only
model is a causal LM over `source <sep> target </s>`, or over `text </s>` on monolingual data; an
encoder-only model is a masked LM over the source side (attncomp.data.masking)."""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

from attncomp.data import masking
from attncomp.data.batching import Batcher, lm_batch, mlm_batch, mono_batch, pair_mlm_batch, translation_batch
from attncomp.data.dataset import PreparedData
from attncomp.errors import DataError
from attncomp.train.config import check_vocab


class RunData:
    """Every worker reads its own share of each update (attncomp.data.batching)."""

    def __init__(self, path: str, spec, world: int, max_tokens_per_worker: int, device: torch.device, autocast):
        self.spec, self.device, self.cuda, self.autocast = spec, device, device.type == "cuda", autocast
        self.lm = spec.model.encoder is None
        self.mlm = spec.model.decoder is None
        self.data = PreparedData(path)
        # masked LM over `source </s> target </s>` (data.batching.pair_mlm_batch): segments on parallel text
        self.pairs = self.mlm and spec.model.segments >= 2 and not self.data.monolingual
        self.mono = self.lm and self.data.monolingual
        check_vocab(self.data, spec.model)
        self.train_split = self.data.split("train")
        self.valid_split = self.data.split("valid") if self.data.has_split("valid") else None
        keep = self.fits(self.train_split)
        self.batcher = Batcher(*self._batch_lengths(), spec.train.batch.count, spec.train.seed, world,
                               max_tokens_per_worker, keep)
        self.collate = self._collate()

    def _batch_lengths(self) -> tuple:
        """(source, loss) tokens per training sentence: what an update's token caps count."""
        split, seed, mlm = self.train_split, self.spec.train.seed, self.spec.train.mlm
        src, tgt = split.src.lengths, split.tgt.lengths
        if self.pairs:
            return src + tgt, masking.chosen_counts(seed, mlm.rate, split.src) + \
                masking.chosen_counts(seed, mlm.rate, split.tgt, after=src)
        if self.mlm:
            return src, masking.chosen_counts(seed, mlm.rate, split.src)
        if self.mono:
            return tgt, tgt
        return (src, src + tgt) if self.lm else (src, tgt)

    def _collate(self):
        if self.mlm:
            mlm = self.spec.train.mlm
            return partial(pair_mlm_batch if self.pairs else mlm_batch, seed=self.spec.train.seed, rate=mlm.rate,
                           mask=mlm.mask, random=mlm.random, vocab=self.spec.model.src_vocab)
        specials = self.data.tokenizer("tgt").specials  # an imported model's own ids (attncomp.vocab)
        if self.lm and not self.mono and specials.sep is None:
            raise DataError(f"{self.data.path} holds pairs, but this decoder-only model's vocabulary has no "
                            "<sep> to join them: prepare monolingual text (data prepare --lang)")
        return partial(mono_batch if self.mono else lm_batch if self.lm else translation_batch, specials=specials)

    def fits(self, split) -> np.ndarray:
        """Sentences the model's learned position table can hold."""
        positions = self.spec.model.positions
        src, tgt = split.src.lengths, split.tgt.lengths
        if positions.kind != "learned":
            return np.ones(len(src), dtype=bool)
        longest = positions.max_len
        if self.pairs:
            return src + tgt <= longest
        if self.mlm:
            return src <= longest
        if self.mono:
            return tgt <= longest
        return (src + tgt <= longest) if self.lm else (src <= longest) & (tgt <= longest)

    def losses(self, net, split, indices: np.ndarray) -> torch.Tensor:
        """[loss, NLL, tokens] of a micro-batch; one without source padding runs the mask-free graph."""
        batch = {k: (v.pin_memory() if self.cuda else v).to(self.device, non_blocking=True)  # pinned: no wait
                 for k, v in self.collate(split, indices).items()}
        lengths = split.src.lengths[indices] + (split.tgt.lengths[indices] if self.pairs else 0)
        dense = not self.lm and bool((lengths == lengths[0]).all())  # no source padding (encoder-only too)
        with self.autocast:
            return net(batch, dense)
