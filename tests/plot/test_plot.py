"""`attncomp plot`: curves read from what runs write (TensorBoard scalars under RUN/tb, checkpoints'
validation figures), several runs and a sweep's rows overlaid; the errors; and `attncomp.plot` imports no
compiler (it reads runs only)."""

from __future__ import annotations

import json

import pytest

from attncomp.cli.main import run
from attncomp.plot.runs import read_run
from tests.draw.svg import elements, with_prefix
from tests.test_import_layers import MODULES, imports

TAGS = {"train/loss": [5.0, 4.0, 3.5], "train/ppl": [90.0, 40.0, 30.0], "train/lr": [1e-4, 2e-4, 3e-4],
        "train/tokens_per_s": [1000.0, 1100.0, 1050.0]}


def _fake_run(directory, valid: dict | None = None, bleu: bool = False):
    """A run directory as attncomp.train.monitor writes it: scalars at steps 10, 20, 30."""
    from torch.utils.tensorboard import SummaryWriter

    directory.mkdir(parents=True)
    (directory / "run.json").write_text(json.dumps({"data": "nowhere"}))
    with SummaryWriter(str(directory / "tb")) as writer:
        for tag, values in TAGS.items():
            for step, value in zip((10, 20, 30), values):
                writer.add_scalar(tag, value, step)
        for step, loss in (valid or {}).items():
            writer.add_scalar("valid/loss", loss, step)
            if bleu:
                writer.add_scalar("valid/bleu", 10.0 + step, step)
    return directory


def test_reads_every_scalar_as_written(tmp_path):
    found = read_run(_fake_run(tmp_path / "a", {20: 4.2, 30: 3.9}))
    assert found.scalars["train/loss"].steps == [10, 20, 30]
    assert found.scalars["train/loss"].values == pytest.approx(TAGS["train/loss"])
    assert found.scalars["valid/loss"].values == pytest.approx([4.2, 3.9]) and found.record == {"data": "nowhere"}


def test_runs_overlaid_one_curve_per_run_and_tag(tmp_path):
    a = _fake_run(tmp_path / "a", {20: 4.2, 30: 3.9}, bleu=True)
    b = _fake_run(tmp_path / "b", {30: 4.5})
    out = tmp_path / "curves.svg"
    assert run(["plot", str(a), str(b), "-o", str(out)]) == 0
    ids = elements(out)
    assert {f"panel:{p}" for p in ("loss", "ppl", "lr", "tokens", "bleu")} <= set(ids)
    assert with_prefix(ids, "curve:loss:") == ["curve:loss:0:train/loss", "curve:loss:0:valid/loss",
                                               "curve:loss:1:train/loss", "curve:loss:1:valid/loss"]
    assert with_prefix(ids, "curve:bleu:") == ["curve:bleu:0:valid/bleu"]  # b measured no BLEU
    assert run(["plot", str(a), "--x", "time", "-o", str(tmp_path / "curves.png")]) == 0
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_a_sweep_directory_plots_its_rows(tmp_path):
    sweep = tmp_path / "sweep"
    _fake_run(sweep / "rows" / "base", {30: 4.0})
    _fake_run(sweep / "rows" / "A1", {30: 4.4})
    (sweep / "rows" / "C1").mkdir()  # a row not started yet: no metrics, left out
    (sweep / "sweep.json").write_text("{}")
    out = tmp_path / "sweep.svg"
    assert run(["plot", str(sweep), "-o", str(out)]) == 0
    assert with_prefix(elements(out), "curve:lr:") == ["curve:lr:0:train/lr", "curve:lr:1:train/lr"]
    empty = tmp_path / "empty"
    (empty / "rows" / "C1").mkdir(parents=True)
    (empty / "sweep.json").write_text("{}")
    assert run(["plot", str(empty), "-o", str(out)]) == 2


def test_missing_run_or_no_metrics_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "x.svg"
    assert run(["plot", str(tmp_path / "nothing"), "-o", str(out)]) == 2
    assert capsys.readouterr().err.strip().startswith("error: no run directory")
    (tmp_path / "fresh" / "tb").mkdir(parents=True)
    assert run(["plot", str(tmp_path / "fresh"), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no metrics yet" in err and "\n" not in err
    assert run(["page", str(tmp_path / "fresh"), "-o", str(tmp_path / "x.html")]) == 2
    assert "has no metrics yet" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "x.html").exists()


def _reached(start: list[str]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += [target for target, _, _ in imports(module)]
    return seen


def test_plot_imports_no_compiler():
    """attncomp.plot reads runs: it imports no compiler stage, nor training, beyond what reading a checkpoint's
    header (attncomp.checkpoint, the runtime's reader) already imports."""
    compiler = ("attncomp.lower", "attncomp.passes", "attncomp.codegen", "attncomp.compiler", "attncomp.report",
                "attncomp.loading", "attncomp.train", "attncomp.decode", "attncomp.draw")
    reached = _reached([m for m in MODULES if m.startswith("attncomp.plot")]) - _reached(["attncomp.checkpoint"])
    assert not [m for m in reached if m.startswith(compiler)]
    assert "attncomp.compiler" not in _reached(["attncomp.checkpoint"])
