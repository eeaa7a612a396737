"""Learning-rate schedules of the spec language, as functions of the update number (from 1)."""

from __future__ import annotations

import math
from typing import Callable

from attncomp.ir import canonical, nodes


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


def warmup_outlasts_run(schedule: nodes.Noam | nodes.InverseSqrt | nodes.Constant | nodes.Cosine,
                        steps: int) -> str | None:
    """A warning when the run ends inside its schedule's warm-up, or None. The default noam(warmup = 4000) in a
    run of a few hundred updates keeps the learning rate at a few percent of its peak and the loss barely moves,
    with nothing to say why (a cosine warm-up that long is refused by the spec's checks)."""
    warmup = getattr(schedule, "warmup", 0)
    if isinstance(schedule, nodes.Cosine) or warmup <= steps:
        return None
    lr = learning_rate(schedule, 1, steps)  # a ratio of two rates: d_model's factor cancels
    kept = [f"{key} = {canonical._value(value)}" for key, value in schedule.written()  # a peak, lr or scale written
            if key != "warmup" and value != type(schedule).model_fields[key].default]
    shorter = f"{schedule.kind}({', '.join([*kept, f'warmup = {max(1, steps // 10)}'])})"
    return (f"the run's {steps:,} updates end inside its schedule's warm-up of {warmup:,}: the learning rate rises "
            f"to {100 * lr(steps) / lr(warmup):.2g}% of the peak it reaches at update {warmup:,}; for a short run, "
            f"shorten the warm-up (--set \"train.schedule={shorter}\")")
