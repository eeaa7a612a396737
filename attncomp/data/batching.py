"""Batches of tokens, not sentences, whose composition does not depend on the number of workers.

An epoch is cut into *updates* of at most `tokens_per_update` source tokens and at most as many
target tokens (the spec's batch, global; the paper: "approximately 25000 source tokens and 25000
target tokens"), whichever side fills first: sentences are shuffled with a seed, sorted by their
longer side, then source, then target length (so an update holds similar lengths and little
padding: 9.1% on the de-en corpus with 25,000 tokens per update, against 23.6% sorting by target
length first; docs/performance.md), cut greedily, and the updates shuffled — all independent of
the world size. Each update is then split into `world * accumulation` parts of similar size;
worker r takes parts r*a .. (r+1)*a - 1, reading only its own sentences. The same update is
computed whatever the world size: with the loss summed and divided by the update's target tokens,
one process accumulating two parts and two processes with one part each produce the same gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attncomp.data import masking
from attncomp.data.dataset import Side, Split
from attncomp.errors import DataError
from attncomp.vocab import DEFAULT, IGNORE, Specials


@dataclass
class Update:
    epoch: int
    index: int  # position within the epoch
    parts: list[np.ndarray]  # sentence indices of each micro-batch, all workers'; some may be empty
    target_tokens: int  # real (unpadded) target tokens of the whole update (masked-LM: chosen ones; >= 1)

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
        cuts = _cuts(self.src_lengths[order], self.tgt_lengths[order], self.tokens_per_update)
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
                yield Update(epoch, i, self.parts(update), max(1, int(self.tgt_lengths[update].sum())))
            epoch, index = epoch + 1, 0


def _cuts(src: np.ndarray, tgt: np.ndarray, cap: int) -> list[int]:
    """Where to cut a sequence of sentences so that neither side of a piece sums past `cap` (a
    sentence longer than `cap` alone is a piece of its own): [0, ..., len]."""
    cuts, src_total, tgt_total = [0], 0, 0
    for i, (s, t) in enumerate(zip(src.tolist(), tgt.tolist())):
        if (src_total or tgt_total) and (src_total + s > cap or tgt_total + t > cap):
            cuts.append(i)
            src_total = tgt_total = 0
        src_total += s
        tgt_total += t
    cuts.append(len(src))
    return cuts


# --- turning sentence indices into tensors ----------------------------------------------------


def _place(side: Side, indices: np.ndarray, cols: np.ndarray, first: np.ndarray, count: np.ndarray):
    """Each sentence's first `count` tokens laid out from column `first` (one gather from the memory map):
    (tokens, where they are); elsewhere the tokens are meaningless."""
    inside = (cols >= first[:, None]) & (cols < (first + count)[:, None])
    positions = np.where(inside, side.offsets[indices][:, None] + cols - first[:, None], 0)
    return side.tokens[positions].astype(np.int64), inside


def _padded(side: Side, indices: np.ndarray, fill: int) -> np.ndarray:
    lengths = side.lengths[indices]
    tokens, inside = _place(side, indices, np.arange(int(lengths.max(initial=0))), np.zeros_like(lengths), lengths)
    return np.where(inside, tokens, fill)


def _shifted(rows: np.ndarray, lengths: np.ndarray, specials: Specials) -> np.ndarray:
    """The vocabulary's start (attncomp's <s>, an imported model's decoder start) + each row without its
    last token, padded with <pad>: the decoder's input for the targets `rows`."""
    out = np.concatenate((np.full((len(rows), 1), specials.start, dtype=np.int64), rows[:, :-1]), axis=1)
    out[np.arange(rows.shape[1]) >= lengths[:, None]] = specials.filler
    return out


def translation_batch(split: Split, indices: np.ndarray, specials: Specials = DEFAULT) -> dict[str, torch.Tensor]:
    """src (ends in </s>, padded with <pad>), tgt_in (<s> + target without its last token), tgt_out (target
    + </s>, padded with IGNORE: attncomp.vocab)."""
    tgt = _padded(split.tgt, indices, IGNORE)
    return {"src": torch.from_numpy(_padded(split.src, indices, specials.filler)),
            "tgt_in": torch.from_numpy(_shifted(tgt, split.tgt.lengths[indices], specials)),
            "tgt_out": torch.from_numpy(tgt)}


def lm_batch(split: Split, indices: np.ndarray, specials: Specials = DEFAULT) -> dict[str, torch.Tensor]:
    """A decoder-only model reads `source <sep> target </s>` (the source's </s> becomes <sep>): those
    sequences right-padded (tgt_out), and the same shifted right by <s> (tokens). A source that does not
    end in the vocabulary's </s> is refused: its last token would be lost, and the objective counts a pair
    as its two sides' tokens (attncomp.data.objective), which holds only where <sep> replaces a </s>."""
    src_lengths, tgt_lengths = split.src.lengths[indices], split.tgt.lengths[indices]
    sep = specials.sep
    if sep is None:
        raise ValueError("a decoder-only model whose vocabulary has no <sep> reads monolingual text, not pairs")
    _refuse_sources_without_eos(split.src, np.asarray(indices), src_lengths, specials.eos)
    lengths = src_lengths + tgt_lengths
    cols = np.arange(int(lengths.max(initial=0)))
    src, from_src = _place(split.src, indices, cols, np.zeros_like(src_lengths), src_lengths - 1)  # no </s>
    tgt, from_tgt = _place(split.tgt, indices, cols, src_lengths, tgt_lengths)
    seq = np.select([from_src, cols == src_lengths[:, None] - 1, from_tgt], [src, sep, tgt], IGNORE)
    return {"tokens": torch.from_numpy(_shifted(seq, lengths, specials)), "tgt_out": torch.from_numpy(seq)}


def prefix_lm_batch(split: Split, indices: np.ndarray, specials: Specials = DEFAULT) -> dict[str, torch.Tensor]:
    """A prefix LM (`decoder { mask = prefix }`) reads a pair as lm_batch lays it out, `<s> source <sep> target`,
    with `<s> source` its prefix: prefix (B,), each row's prefix length (its source's length, </s> counted, as <s>
    stands where the </s> was dropped), seen both ways; <sep> is the first causal position. The loss predicts
    `target </s>` only (tgt_out is IGNORE over the prefix's predictions: the source's tokens and <sep>), as T5's
    prefix LM: a prefix position sees the token it would predict, and decoding reads the source, never writes it."""
    batch = lm_batch(split, indices, specials)
    prefix = split.src.lengths[indices].astype(np.int64)
    tgt_out = batch["tgt_out"].numpy()
    tgt_out[np.arange(tgt_out.shape[1]) < prefix[:, None]] = IGNORE
    return {**batch, "prefix": torch.from_numpy(prefix)}


def _refuse_sources_without_eos(side: Side, indices: np.ndarray, lengths: np.ndarray, eos: int | None) -> None:
    if eos is None:
        raise DataError("a decoder-only model reads a pair as `source <sep> target`, the source's </s> replaced "
                        "by <sep>, but the spec's vocabulary declares no eos: declare the data's </s> (eos = ID)")
    last = side.tokens[np.maximum(side.offsets[indices] + lengths - 1, 0)]
    wrong = np.flatnonzero((lengths < 1) | (last != eos))
    if len(wrong):
        i = int(wrong[0])
        found = f"ends in token {int(last[i])}" if lengths[i] else "is empty"
        raise DataError(f"source sentence {int(indices[i])} of {side.name} {found}, not the vocabulary's </s> "
                        f"(eos = {eos}): a decoder-only model reads a pair as `source <sep> target`, the source's "
                        "</s> replaced by <sep>; prepare the data with the model's tokenizer (its sources end in </s>)")


def mono_batch(split: Split, indices: np.ndarray, specials: Specials = DEFAULT) -> dict[str, torch.Tensor]:
    """A decoder-only model on monolingual data reads `text </s>` (the target side): tokens (<s> + text)
    and tgt_out (text </s>)."""
    seq = _padded(split.tgt, indices, IGNORE)
    return {"tokens": torch.from_numpy(_shifted(seq, split.tgt.lengths[indices], specials)),
            "tgt_out": torch.from_numpy(seq)}


def pair_mlm_batch(split: Split, indices: np.ndarray, *, seed: int, rate: float, mask: float, random: float,
                   vocab: int, specials: Specials = DEFAULT) -> dict[str, torch.Tensor]:
    """An encoder-only model with segments (`segments = N`, N >= 2) reads each pair `source </s> target </s>`
    as BERT reads two sentences (XLM's translation language modelling, Lample & Conneau 2019): src (the
    pair, corrupted as attncomp.data.masking says), segments (0 on the source, 1 on the target, 0 on
    padding) and tgt_out (the original token where chosen, IGNORE elsewhere)."""
    src_lengths, tgt_lengths = split.src.lengths[indices], split.tgt.lengths[indices]
    cols = np.arange(int((src_lengths + tgt_lengths).max(initial=0)))
    src, from_src = _place(split.src, indices, cols, np.zeros_like(src_lengths), src_lengths)
    tgt, from_tgt = _place(split.tgt, indices, cols, src_lengths, tgt_lengths)
    tokens = np.select([from_src, from_tgt], [src, tgt], specials.filler)
    inputs, target = masking.corrupt(seed, rate, mask, random, vocab, np.asarray(indices), tokens, specials)
    return {"src": torch.from_numpy(inputs), "segments": torch.from_numpy(from_tgt.astype(np.int64)),
            "tgt_out": torch.from_numpy(target)}


def mlm_batch(split: Split, indices: np.ndarray, *, seed: int, rate: float, mask: float, random: float,
              vocab: int, specials: Specials = DEFAULT) -> dict[str, torch.Tensor]:
    """An encoder-only model reads the source side `text </s>`, corrupted as attncomp.data.masking says:
    src (the corrupted text) and tgt_out (the original token where chosen, IGNORE elsewhere)."""
    tokens = _padded(split.src, indices, specials.filler)
    src, target = masking.corrupt(seed, rate, mask, random, vocab, np.asarray(indices), tokens, specials)
    return {"src": torch.from_numpy(src), "tgt_out": torch.from_numpy(target)}
