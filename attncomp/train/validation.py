"""What `train.validation { }` adds to each evaluation: BLEU on the first validation sentences, the best
checkpoint (checkpoint_best.pt) and early stopping after `patience` evaluations without a better one.

Rank 0 decodes and every worker receives its BLEU; the loss and perplexity are already the same on
every worker (attncomp.train.evaluation), so every worker takes the same decision. Under FSDP no
worker holds the whole model: every worker joins in gathering its weights, and rank 0 decodes with
an unsharded copy made for that evaluation and freed after it. The judgement's
state (the best value, its step, the evaluations since) travels in each checkpoint's metrics, so a
resumed run keeps its patience count.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from attncomp.checkpoint.schema import BEST, BEST_STEP, STALE  # the judgement's state, in the checkpoint's metrics
from attncomp.decode.bleu import bleu
from attncomp.ir import nodes
from attncomp.train.batches import RunData
from attncomp.train.cluster import agree



def better(metric: str, value: float, best: float | None) -> bool:
    """Lower perplexity, higher BLEU; a first value is always the best so far."""
    if not math.isfinite(value):
        return False
    return best is None or (value < best if metric == "ppl" else value > best)


class Validator:
    """`replica` (FSDP): makes an unsharded model like `model` on this worker's device, for rank 0 to decode."""

    def __init__(self, validation: nodes.Validation | None, model: torch.nn.Module, data: RunData, rank: int,
                 replica: Callable[[], torch.nn.Module] | None = None):
        self.v, self.model, self.data, self.rank, self.replica = validation, model, data, rank, replica
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
        model = self.model if self.replica is None else self._unsharded()
        if self.rank == 0:
            was_training = model.training
            value, _ = bleu(model, self.data.data, self.data.valid_split, self.v.bleu, self.data.device,
                            self.data.spec)
            model.train(was_training)
        del model  # an unsharded copy lives for this evaluation only
        return {"bleu": agree([value], self.data.device)[0]}  # BLEU >= 0: the maximum is rank 0's

    def _unsharded(self) -> torch.nn.Module | None:
        """Every worker sends its shards; rank 0 gets the whole weights (through the CPU) in a new model."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        state = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if self.rank != 0:
            return None
        model = self.replica()
        model.load_state_dict(state)
        return model

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
