"""A sweep row's figures: validation perplexity and BLEU of its final checkpoint.

Perplexity is exp(NLL per target token, </s> included) over the whole validation split, as the
runner reports it. BLEU (sacreBLEU) translates the first `sentences` validation pairs with the
spec's beam, length penalty and maximum length; sources and references are the prepared token ids
turned back into text by the data's sentencepiece model.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attncomp.data.dataset import PreparedData, Split
from attncomp.data.objective import objective_of
from attncomp.decode.bleu import bleu
from attncomp.errors import DataError
from attncomp.train.step import TrainStep

EVAL_TOKENS = 8192  # padded tokens per validation batch


@torch.no_grad()
def perplexity(model: torch.nn.Module, data: PreparedData, split: Split) -> float:
    """exp of the validation NLL per target token, under the model's objective on this data
    (attncomp.data.objective: the runner's batches), over the sentences its positions can hold."""
    arch = model.spec.model
    step = TrainStep(model, smoothing=0.0)
    objective = objective_of(arch, data.monolingual)
    collate = objective.batcher_collate(model.spec, lambda: data.tokenizer("tgt"), data.path)
    indices = np.flatnonzero(objective.fits(split, arch))
    lengths = split.src.lengths + split.tgt.lengths
    indices = indices[np.argsort(lengths[indices], kind="stable")]
    totals = torch.zeros(3, dtype=torch.float64)
    start = 0
    while start < len(indices):
        end = start + 1
        while end < len(indices) and (end - start + 1) * int(lengths[indices[end]]) <= EVAL_TOKENS:
            end += 1
        batch = collate(split, indices[start:end])
        totals += step(batch).double()
        start = end
    _, nll, tokens = totals.tolist()
    return math.exp(min(nll / max(tokens, 1.0), 50.0))


def evaluate(model: torch.nn.Module, data: PreparedData, sentences: int) -> dict:
    """{"ppl", "bleu", "bleu_sentences", "decode_sentences_per_s"} on the validation split."""
    if not data.has_split("valid"):
        raise DataError(f"{data.path} has no valid split; a sweep scores every row on it "
                        "(prepare the data with --valid)")
    model.eval()
    split = data.split("valid")
    result = {"ppl": round(perplexity(model, data, split), 3)}
    if sentences > 0:
        value, speed = bleu(model, data, split, sentences)
        result.update(bleu=value, bleu_sentences=min(sentences, len(split)), decode_sentences_per_s=round(speed, 1))
    return result
