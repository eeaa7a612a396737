"""Learning-rate schedules of the spec language, as functions of the update number (from 1)."""

from __future__ import annotations

import math
from typing import Callable

from attncomp.ir import nodes


def learning_rate(schedule: nodes.Noam | nodes.InverseSqrt | nodes.Constant | nodes.Cosine, d_model: int,
                  total_steps: int) -> Callable[[int], float]:
    """lr(step) for step >= 1."""
    if isinstance(schedule, nodes.Noam):
        w, scale = schedule.warmup, schedule.scale
        return lambda step: scale * d_model**-0.5 * min(step**-0.5, step * w**-1.5)
    if isinstance(schedule, nodes.InverseSqrt):
        peak, w = schedule.peak, schedule.warmup
        return lambda step: peak * step / w if step < w else peak * math.sqrt(w / step)
    if isinstance(schedule, nodes.Constant):
        lr, w = schedule.lr, schedule.warmup
        return lambda step: lr * min(1.0, step / w) if w else lr
    peak, w, final = schedule.peak, schedule.warmup, schedule.final

    def cosine(step: int) -> float:
        if step < w:
            return peak * step / w
        progress = min(1.0, (step - w) / max(1, total_steps - w))
        return final + (peak - final) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return cosine
