"""What a model learns from its data: one table entry per training objective. The model family names
its objective (attncomp.ir.family.Family.objective); the data and the spec narrow it:

    objective       family, data                                 a sentence is read as        the loss predicts
    translation     encoder-decoder, pairs                       source | <s> target          target </s>
    language_model  decoder-only, pairs                          <s> source <sep> target      source <sep> target </s>
    prefix_lm       decoder-only with mask = prefix, pairs       <s> source | <sep> target    target </s>
                    (`<s> source`, the prefix, seen both ways: prefix holds its length per row)
    text            decoder-only, monolingual                    <s> text                     text </s>
    masked_lm       encoder-only (one segment, or monolingual)   source, corrupted            the chosen tokens
    masked_pairs    encoder-only with segments >= 2, pairs       source </s> target </s>, corrupted   the chosen tokens

Each entry says how to collate a batch (attncomp.data.batching), which tokens an update's caps count
(the batcher's source and loss lengths), how long a sentence's longest sequence is (what a learned
position table must hold), and whether a batch whose inputs have no padding may run the mask-free
graph (`hidden_dense`). The runner (attncomp.train.batches) and the sweep's evaluation read it; nothing
else asks which family a model is to batch its data.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np

from attncomp.data import masking
from attncomp.data.batching import lm_batch, mlm_batch, mono_batch, pair_mlm_batch, prefix_lm_batch, translation_batch
from attncomp.errors import DataError
from attncomp.ir import nodes
from attncomp.ir.family import ModelFacts, facts_of
from attncomp.vocab import DEFAULT, Specials, agree


@dataclass(frozen=True)
class Objective:
    name: str
    inputs: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (src, tgt) lengths -> tokens the model reads
    longest: Callable[[np.ndarray, np.ndarray], np.ndarray]  # ... -> its longest sequence (positions it needs)
    dense: bool  # a batch whose inputs have no padding may run the mask-free graph
    masked: bool  # the loss reads the chosen tokens of a corrupted input (attncomp.data.masking)
    collate: Callable  # collate(split, indices, **what it takes) -> a batch (attncomp.data.batching)
    loss: Callable  # (split, seed, rate) -> the tokens the loss reads per sentence

    def lengths(self, split, seed: int, rate: float, specials: Specials = DEFAULT) -> tuple[np.ndarray, np.ndarray]:
        """(input, loss) tokens per sentence of `split`: what an update's token caps count."""
        return self.inputs(split.src.lengths, split.tgt.lengths), self.loss(split, seed, rate, specials)

    def fits(self, split, arch: nodes.ModelSpec | ModelFacts) -> np.ndarray:
        """Which sentences of `split` the model's learned position table can hold (all, with other positions)."""
        src, tgt = split.src.lengths, split.tgt.lengths
        rows = facts_of(arch).max_positions
        if rows is None:
            return np.ones(len(src), dtype=bool)
        return self.longest(src, tgt) <= rows

    def batcher_collate(self, spec, tokenizer: Callable, path: str) -> Callable:
        """collate(split, indices) for this spec (or a Described model with its recipe), with the special ids its vocabulary declares (and the target
        language the data chose: attncomp.vocab.agree); `tokenizer()` gives the data's target tokenizer,
        refused where its ids differ; `path` names the data in errors."""
        tok = tokenizer()
        try:
            declared = agree(spec.model.specials, tok.specials, f"{path}'s tokenizer",
                             getattr(tok, "languages", {}).values())
        except ValueError as e:
            raise DataError(str(e)) from None
        if self.masked:
            if declared.mask is None:
                raise DataError("masked-LM training replaces tokens with <mask>, but the spec's vocabulary declares "
                                "no mask (nor sep): declare mask = ID in its vocab")
            mlm = spec.train.mlm
            return partial(self.collate, seed=spec.train.seed, rate=mlm.rate, mask=mlm.mask, random=mlm.random,
                           vocab=spec.model.src_vocab, specials=declared)
        if self.name in ("language_model", "prefix_lm") and declared.sep is None:
            raise DataError(f"{path} holds pairs, but this decoder-only model's vocabulary has no <sep> to join "
                            "them: prepare monolingual text (data prepare --lang)")
        return partial(self.collate, specials=declared)


def _chosen(split, seed: int, rate: float, specials: Specials) -> np.ndarray:
    return masking.chosen_counts(seed, rate, split.src, specials=specials)


def _chosen_in_pairs(split, seed: int, rate: float, specials: Specials) -> np.ndarray:
    return _chosen(split, seed, rate, specials) + masking.chosen_counts(seed, rate, split.tgt,
                                                                          after=split.src.lengths, specials=specials)


OBJECTIVES = {o.name: o for o in (
    Objective("translation", lambda src, tgt: src, np.maximum, True, False, translation_batch,
              lambda split, seed, rate, specials: split.tgt.lengths),
    Objective("language_model", lambda src, tgt: src, lambda src, tgt: src + tgt, False, False, lm_batch,
              lambda split, seed, rate, specials: split.src.lengths + split.tgt.lengths),
    Objective("prefix_lm", lambda src, tgt: src, lambda src, tgt: src + tgt, False, False, prefix_lm_batch,
              lambda split, seed, rate, specials: split.tgt.lengths),
    Objective("text", lambda src, tgt: tgt, lambda src, tgt: tgt, False, False, mono_batch,
              lambda split, seed, rate, specials: split.tgt.lengths),
    Objective("masked_lm", lambda src, tgt: src, lambda src, tgt: src, True, True, mlm_batch, _chosen),
    Objective("masked_pairs", lambda src, tgt: src + tgt, lambda src, tgt: src + tgt, True, True, pair_mlm_batch,
              _chosen_in_pairs),
)}


def objective_of(arch: nodes.ModelSpec | ModelFacts, monolingual: bool) -> Objective:
    """The objective of a model with this architecture (or these facts) on data that is monolingual or holds
    pairs."""
    facts = facts_of(arch)
    family = facts.family.objective
    if facts.prefix:
        if monolingual:
            raise DataError("decoder { mask = prefix } reads a pair's source as the prefix of its input, but this data "
                            "is monolingual: prepare pairs (source and target), or leave mask out (causal)")
        return OBJECTIVES["prefix_lm"]
    if family == "language_model" and monolingual:
        return OBJECTIVES["text"]
    if family == "masked_lm" and facts.segments >= 2 and not monolingual:
        return OBJECTIVES["masked_pairs"]
    return OBJECTIVES[family]
