"""What a run prints without a terminal (a cluster log), and the warning for a finite divergence."""

from __future__ import annotations

import io
import re
from pathlib import Path

import torch

from attncomp.progress import Progress
from attncomp.train.monitor import DIVERGENCE_FACTOR, Monitor, far_above


def _monitor(tmp_path, interval: float) -> tuple[Monitor, io.StringIO]:
    stream = io.StringIO()  # not a terminal, like a batch job's log file
    return Monitor(tmp_path, total_steps=100, enabled=True, cuda=False, interval=interval, stream=stream), stream


def _train(monitor: Monitor, steps: range, log_every: int = 5) -> None:
    for step in steps:
        stats = torch.tensor([2.0 * 50, 1.5 * 50, 50.0, 0.7])  # loss sum, nll sum, tokens, grad norm
        monitor.update(step, stats, lr=3e-4, log_every=log_every)


def test_without_a_terminal_training_prints_timed_lines(tmp_path):
    monitor, stream = _monitor(tmp_path, interval=0.0)
    _train(monitor, range(1, 21))
    monitor.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and len(lines) == 4  # steps 5, 10, 15, 20: one per sync point
    pattern = (r"step 5/100 \| loss 2\.0000 \| lr 3\.00e-04 \| [\d,]+ tok/s \| "
               r"\d+:\d\d:\d\d elapsed \| ETA \d+:\d\d:\d\d")
    assert re.fullmatch(pattern, lines[0]), lines[0]
    assert lines[-1].startswith("step 20/100 |")


def test_the_interval_bounds_how_often_lines_come(tmp_path):
    monitor, stream = _monitor(tmp_path, interval=3600.0)
    _train(monitor, range(41, 81))  # a resumed run: counts from its own start
    monitor.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("step 45/100 |")  # the first sync point, then none for an hour


def _evaluate(monitor: Monitor, step: int, loss: float) -> None:
    monitor.evaluation(step, {"loss": loss, "ppl": 2.0}, Path(f"checkpoint_{step:08d}.pt"))


def test_a_finite_divergence_is_warned_about(tmp_path):
    monitor, stream = _monitor(tmp_path, interval=60.0)
    for step, loss in [(100, 6.0), (200, 4.4), (300, 4.9), (400, 235.0), (500, float("nan"))]:
        _evaluate(monitor, step, loss)
    monitor.close()
    warnings = [line for line in stream.getvalue().splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: validation loss 235 at step 400 is far above its best, 4.4 at step 200 "
                        "(checkpoint_00000200.pt): training may be diverging (a learning rate too high?)"]


def test_what_far_means():
    assert far_above(235.0, 4.4) and far_above(6.7, 4.4)
    assert not far_above(6.5, 4.4)  # 1.48x: noise or overfitting, not a divergence
    assert not far_above(1.4, 0.5)  # 2.8x but less than a nat above
    assert far_above(4.4 * DIVERGENCE_FACTOR + 0.01, 4.4)


def test_progress_without_a_terminal():
    stream = io.StringIO()
    with Progress(10, "translate", "sent", interval=0.0, stream=stream) as bar:
        for _ in range(5):
            bar.update(2)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 6 and re.fullmatch(r"translate: 4/10 sent \([\d,.]+ sent/s, ETA \d+:\d\d:\d\d\)", lines[1])
    assert re.fullmatch(r"translate: 10 sent in [\d.]+s \([\d,.]+ sent/s\)", lines[-1])


def test_an_evaluation_between_sync_points_shows_the_loss_since_the_last(tmp_path):
    """A 5-step run with --log-every 10 (the default) printed `step 5 | saved checkpoint_00000005.pt`, no loss."""
    monitor, stream = _monitor(tmp_path, interval=3600.0)
    _train(monitor, range(1, 6), log_every=10)
    monitor.evaluation(5, {}, Path("checkpoint_00000005.pt"))
    monitor.close()
    assert re.fullmatch(r"step 5 \| train loss 2\.0000 \| [\d,]+ tok/s \| saved checkpoint_00000005\.pt",
                        stream.getvalue().strip()), stream.getvalue()
