"""`attncomp plot`: a run's curves (several runs overlaid, one colour each) against updates or time: loss and
perplexity (training solid, validation dashed with its points), learning rate, tokens per second, and
validation BLEU where a run measured it.

SVG ids: `panel:P` (P one of PANELS' names) and `curve:P:R:TAG` (run R, from 0, the TensorBoard tag drawn).
"""

from __future__ import annotations

import math

from attncomp.plot.figures import new_figure
from attncomp.plot.runs import Run, Series

FOR_WHAT = "attncomp plot"
PANELS = [  # (name, title, tags, log scale)
    ("loss", "loss per target token", ("train/loss", "valid/loss"), False),
    ("ppl", "perplexity", ("train/ppl", "valid/ppl"), True),
    ("lr", "learning rate", ("train/lr",), False),
    ("tokens", "target tokens / s", ("train/tokens_per_s",), False),
    ("bleu", "validation BLEU", ("valid/bleu",), False),
]
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]
X_AXES = ("updates", "time")


def _x(series: Series, axis: str) -> list[float]:
    if axis == "updates":
        return [float(s) for s in series.steps]
    return [t / 60 for t in series.seconds]  # minutes; a checkpoint's metric has no time (nan: not drawn)


def panels_of(runs: list[Run]) -> list[tuple]:
    """The panels some run has a curve for."""
    return [p for p in PANELS if any(tag in run.scalars for run in runs for tag in p[2])]


def _draw_panel(ax, panel: tuple, runs: list[Run], axis: str) -> None:
    name, title, tags, log = panel
    ax.set_gid(f"panel:{name}")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("updates" if axis == "updates" else "minutes", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    for r, run in enumerate(runs):
        for tag in tags:
            series = run.scalars.get(tag)
            if series is None or not series.values:
                continue
            xs = _x(series, axis)
            keep = [i for i, x in enumerate(xs) if not math.isnan(x)]
            valid = tag.startswith("valid/")
            label = f"{run.name} ({'valid' if valid else 'train'})" if len(tags) > 1 else run.name
            (line,) = ax.plot([xs[i] for i in keep], [series.values[i] for i in keep], color=COLOURS[r % len(COLOURS)],
                              linestyle="--" if valid else "-", marker="o" if valid else None, markersize=3,
                              linewidth=1.2, label=label)
            line.set_gid(f"curve:{name}:{r}:{tag}")
    if log and ax.lines and all(v > 0 for line in ax.lines for v in line.get_ydata()):
        ax.set_yscale("log")
    if ax.lines:
        ax.legend(fontsize=6, loc="best")


def curves_figure(runs: list[Run], axis: str = "updates"):
    """The figure of the runs' curves: one panel per quantity that some run has."""
    panels = panels_of(runs)
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure = new_figure(FOR_WHAT, 4.2 * columns, 3.2 * rows)
    for i, panel in enumerate(panels):
        _draw_panel(figure.add_subplot(rows, columns, i + 1), panel, runs, axis)
    figure.suptitle(", ".join(run.name for run in runs)[:160], fontsize=10)
    figure.tight_layout()
    return figure
