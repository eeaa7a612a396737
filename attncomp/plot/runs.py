"""What a run has written, read back for its curves: the TensorBoard scalars under RUN/tb (attncomp.train.monitor
writes them: train/loss, train/ppl, train/lr, train/tokens_per_s, valid/loss, valid/ppl, valid/bleu), run.json,
and where the events hold no validation figures, those each checkpoint's header keeps (its `metrics`).

A sweep directory (one with sweep.json and rows/) stands for its rows' runs, each named after its row.
A missing run, or one with nothing to plot yet, is one UsageError line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from attncomp import checkpoint as ckpt
from attncomp import files
from attncomp.errors import UsageError

TB = "tb"
RUN_RECORD = "run.json"  # attncomp.train.cluster.RUN_RECORD (the runtime's; read here without importing it)
SWEEP_STATE = "sweep.json"
VALID_KEYS = {"loss": "valid/loss", "ppl": "valid/ppl", "bleu": "valid/bleu"}  # a checkpoint's metrics


@dataclass
class Series:
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # since the run's first scalar (None: unknown -> nan)


@dataclass
class Run:
    name: str
    path: Path
    scalars: dict[str, Series]
    record: dict  # run.json ({} when there is none)


def _events(tb: Path) -> dict[str, Series]:
    """Every scalar of the event files in `tb` (all of them: no reservoir sampling), by tag."""
    if not tb.is_dir() or not any(tb.glob("events.out.tfevents.*")):
        return {}
    for path in tb.glob("events.out.tfevents.*"):  # tensorboard would block on a FIFO, read /dev/zero forever
        files.check_regular(path, what="TensorBoard event file")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    events.Reload()
    found: dict[str, Series] = {}
    for tag in events.Tags().get("scalars", []):
        scalars = events.Scalars(tag)
        found[tag] = Series([e.step for e in scalars], [e.value for e in scalars], [e.wall_time for e in scalars])
    start = min((s.seconds[0] for s in found.values() if s.seconds), default=0.0)
    for series in found.values():
        series.seconds = [t - start for t in series.seconds]
    return found


def _checkpoint_metrics(run: Path) -> dict[str, Series]:
    """Validation figures from the headers of the run's checkpoints (their weights left unread)."""
    found: dict[str, Series] = {}
    for step, path in ckpt.listed(run):
        try:
            metrics = ckpt.load(path, model=False).header.metrics
        except ckpt.CheckpointError:
            continue
        for key, tag in VALID_KEYS.items():
            if isinstance(metrics.get(key), (int, float)):
                series = found.setdefault(tag, Series())
                series.steps.append(step)
                series.values.append(float(metrics[key]))
                series.seconds.append(float("nan"))
    return found


def read_run(path: str | os.PathLike, name: str | None = None) -> Run:
    """The scalars of the run directory `path`, or one UsageError line: no such run, or no metrics yet."""
    run = Path(path)
    shown = files.shown_path(run)
    if not run.is_dir():
        raise UsageError(f"no run directory {shown}" if not run.exists() else f"{shown} is not a run directory")
    scalars = _events(run / TB)
    if not any(tag.startswith("valid/") for tag in scalars):
        scalars.update(_checkpoint_metrics(run))
    if not scalars:
        raise UsageError(f"{shown} has no metrics yet (no TensorBoard scalars under {TB}/, no checkpoint with "
                         "validation figures): plot it once it has trained to its first log line or checkpoint")
    record = files.read_json(run / RUN_RECORD, what="run record") if files.present(run / RUN_RECORD) else {}
    return Run(name or run.name, run, scalars, record if isinstance(record, dict) else {})


def is_sweep(path: Path) -> bool:
    return (path / SWEEP_STATE).is_file() and (path / "rows").is_dir()


def sweep_runs(path: Path) -> list[Path]:
    """A sweep's row directories that hold a run, in name order."""
    return sorted(p for p in (path / "rows").iterdir() if p.is_dir())


def read_runs(paths: list[str]) -> list[Run]:
    """Every run named: run directories, and each sweep directory's rows (named SWEEP/ROW)."""
    runs = []
    for text in paths:
        path = Path(text)
        if path.is_dir() and is_sweep(path):
            runs += _sweep_rows(path)
        else:
            runs.append(read_run(path))
    return runs


def _sweep_rows(path: Path) -> list[Run]:
    """The runs of a sweep's rows that have metrics (a row not started yet has none)."""
    found = []
    for row in sweep_runs(path):
        try:
            found.append(read_run(row, f"{path.name}/{row.name}"))
        except UsageError:
            continue
    if not found:
        raise UsageError(f"the sweep {files.shown_path(path)} has no row with metrics yet")
    return found
