"""What `train.validation { }` adds to each evaluation: BLEU on the first validation sentences, the best
checkpoint (checkpoint_best.pt) and early stopping after `patience` evaluations without a better one.

Rank 0 decodes and every worker receives its BLEU; the loss and perplexity are already the same on
every worker (attncomp.train.evaluation), so every worker takes the same decision. The judgement's
state (the best value, its step, the evaluations since) travels in each checkpoint's metrics, so a
resumed run keeps its patience count.
"""

from __future__ import annotations

import math

import torch

from attncomp.ir import nodes
from attncomp.train.batches import RunData
from attncomp.train.cluster import agree

BEST, BEST_STEP, STALE = "best", "best_step", "stale"  # the judgement's state, in the checkpoint's metrics


def better(metric: str, value: float, best: float | None) -> bool:
    """Lower perplexity, higher BLEU; a first value is always the best so far."""
    if not math.isfinite(value):
        return False
    return best is None or (value < best if metric == "ppl" else value > best)


class Validator:
    def __init__(self, validation: nodes.Validation | None, model: torch.nn.Module, data: RunData, rank: int):
        self.v, self.model, self.data, self.rank = validation, model, data, rank
        self.best: float | None = None
        self.best_step = self.stale = 0
        self.improved = False

    @property
    def metric(self) -> str:
        return "none" if self.v is None else self.v.best

    def bleu(self) -> dict[str, float]:
        """{"bleu": B} on the first `bleu` validation sentences ({} when off): rank 0 decodes, all receive it."""
        if self.v is None or self.v.bleu == 0 or self.data.valid_split is None:
            return {}
        value = 0.0
        if self.rank == 0:
            from attncomp.decode.bleu import bleu

            was_training = self.model.training
            value, _ = bleu(self.model, self.data.data, self.data.valid_split, self.v.bleu, self.data.device)
            self.model.train(was_training)
        return {"bleu": agree([value], self.data.device)[0]}  # BLEU >= 0: the maximum is rank 0's

    def judge(self, step: int, metrics: dict[str, float]) -> dict[str, float]:
        """Note this evaluation; the state to store beside its metrics ({} without a best metric)."""
        self.improved = False
        if self.metric == "none" or self.metric not in metrics:
            return {}
        if better(self.metric, metrics[self.metric], self.best):
            self.best, self.best_step, self.stale, self.improved = metrics[self.metric], step, 0, True
        else:
            self.stale += 1
        return self.state()

    def state(self) -> dict[str, float]:
        return {BEST: self.best, BEST_STEP: self.best_step, STALE: self.stale} if self.best is not None else {}

    def restore(self, metrics: dict[str, float]) -> None:
        """Continue the judgement stored in a resumed checkpoint's metrics."""
        if BEST in metrics:
            self.best, self.best_step, self.stale = float(metrics[BEST]), int(metrics[BEST_STEP]), int(metrics[STALE])

    @property
    def exhausted(self) -> bool:
        """Early stopping: `patience` evaluations in a row without a better best metric."""
        return self.v is not None and self.v.patience > 0 and self.stale >= self.v.patience

    def stop_message(self, step: int) -> str:
        return (f"early stopping at step {step}: {self.metric} has not improved for {self.stale} evaluation(s) "
                f"(patience {self.v.patience}); the best, {self.best:.4g} at step {self.best_step}, is "
                "checkpoint_best.pt")
