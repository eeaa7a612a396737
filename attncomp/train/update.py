"""One update: its micro-batches through the training step (plain, DDP or FSDP), gradient clipping,
the optimiser and the schedule; a non-finite update is noted on the device without a host sync.

Every update is the same whatever the number of workers (see attncomp.data.batching); each
micro-batch's summed loss is divided by the update's target tokens.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import torch

from attncomp import checkpoint as ckpt
from attncomp.errors import TrainingError
from attncomp.train.batches import RunData
from attncomp.train.cluster import all_reduce



class Health:
    """The first bad update, noted on the device without a host sync: its loss or gradient norm was not
    finite, or it had target tokens and yet no gradient at all (nothing would ever train: a broken
    compiled step does that, pytorch/pytorch#180642)."""

    def __init__(self, device: torch.device):
        self.step = torch.zeros((), dtype=torch.long, device=device)  # 0: none yet
        self.stats = torch.zeros(4, device=device)

    def note(self, step: int, stats: torch.Tensor) -> None:
        loss, tokens, grad_norm = stats[0], stats[2], stats[3]
        good = torch.isfinite(loss) & torch.isfinite(grad_norm) & ((grad_norm > 0) | (tokens == 0))
        first = (self.step == 0) & ~good
        self.step = torch.where(first, step, self.step)
        self.stats = torch.where(first, stats, self.stats)

    def first_bad(self) -> tuple[int, list[float]] | None:
        step = int(self.step)
        return (step, self.stats.tolist()) if step else None


class Updater:
    """`ddp`: what the gradients are synchronised through (the step itself without DDP); `net`: what runs
    (it, or torch.compile of it)."""

    def __init__(self, model, ddp, net, optimizer, scheduler, data: RunData, rank: int, world: int, fsdp: bool,
                 clip_norm: float | None):
        self.model, self.ddp, self.net, self.optimizer, self.scheduler = model, ddp, net, optimizer, scheduler
        self.data, self.rank, self.world, self.fsdp, self.clip_norm = data, rank, world, fsdp, clip_norm
        self.health = Health(data.device)

    def run(self, update, step: int) -> tuple[torch.Tensor, float]:
        """Update number `step` (from 1): [loss, NLL, target tokens, gradient norm] and the learning rate."""
        parts = update.mine(self.rank, self.world)
        scale = self.world / update.target_tokens  # DDP averages over workers; this undoes it
        totals = torch.zeros(3, device=self.data.device)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if self.fsdp:
                self.model.set_requires_gradient_sync(last)
            sync = contextlib.nullcontext() if last or self.world == 1 or self.fsdp else self.ddp.no_sync()
            weight = 1.0 if len(part) else 0.0  # an empty share still joins DDP's gradient reduction
            part = part if len(part) else update.parts[0][:1]
            with sync:
                losses = self.data.losses(self.net, self.data.train_split, part)
                (losses[0] * (scale * weight)).backward()
            totals += losses.detach().float() * weight
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm or math.inf)
        if hasattr(grad_norm, "full_tensor"):  # FSDP: a DTensor over the shards
            grad_norm = grad_norm.full_tensor()
        all_reduce(totals)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        stats = torch.cat([totals, grad_norm.detach().reshape(1).to(totals)])
        self.health.note(step, stats)
        return stats, lr

    def check_health(self, step: int, out: Path) -> None:
        """Stop if an update since the last check was not finite (a host sync: every log_every updates and
        before every save, so no checkpoint ever holds a bad update)."""
        bad = self.health.first_bad()
        if bad is not None:
            bad_step, (loss, _, tokens, grad_norm) = bad
            found = ckpt.listed(out)
            last = f"The last good checkpoint is {found[-1][1]}." if found else "No checkpoint was written yet."
            if grad_norm == 0 and math.isfinite(loss):
                raise TrainingError(f"the gradients were all zero at step {bad_step} (loss "
                                    f"{loss / max(1.0, tokens):.4g}): no update would change the model (with "
                                    f"--compile, try without it); stopped at step {step} without saving. {last}")
            raise TrainingError(f"the loss became {loss / max(1.0, tokens):.4g} (gradient norm {grad_norm:.4g}) "
                                f"at step {bad_step}; stopped at step {step} without saving. {last}")
