"""Issue 43's pictures category (bench/hostile_pictures.py) found: `attncomp plot` and `page` handed a run whose
TensorBoard event file is not a regular file to tensorboard, which opened a FIFO and waited for a writer forever
(and would read /dev/zero without end). Each event file is now checked first: one line, exit 2, nothing written."""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest

from attncomp.cli.main import run
from tests.plot.test_plot import _fake_run


def _unblock(fifo, seconds: float = 3.0) -> threading.Thread:
    """Open the FIFO's write end once a reader waits on it (and close it: the reader sees an empty file), so that
    the code before the fix, which blocked on it, ends with the wrong message instead of hanging the test."""

    def writer() -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                return
            except OSError as err:
                if err.errno != errno.ENXIO:  # ENXIO: no reader yet
                    return
                time.sleep(0.05)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("kind", ["fifo", "directory", "a link to nothing"])
@pytest.mark.parametrize("command", ["plot", "page"])
def test_an_event_file_that_is_not_a_file_is_one_line_and_exit_2(tmp_path, capsys, kind, command):
    run_dir = _fake_run(tmp_path / "run")
    events = next((run_dir / "tb").glob("events.out.tfevents.*"))
    bad = run_dir / "tb" / "events.out.tfevents.0.bad"
    if kind == "fifo":
        os.mkfifo(bad)
        _unblock(bad)
    elif kind == "directory":
        bad.mkdir()
    else:
        bad.symlink_to(tmp_path / "nowhere")
    out = tmp_path / ("out.svg" if command == "plot" else "out.html")
    assert run([command, str(run_dir), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: ") and "events.out.tfevents.0.bad" in err, err
    assert not out.exists() and events.exists()


@pytest.fixture(scope="module")
def one_step_run(sample_data, tmp_path_factory):
    """specs/examples/tiny.attn trained one update (a run directory with run.json, tb/ and checkpoints)."""
    from tests.conftest import ROOT

    out = tmp_path_factory.mktemp("pictures") / "run"
    assert run(["train", str(ROOT / "specs/examples/tiny.attn"), "--data", str(sample_data), "--out", str(out),
                "--procs", "1", "--set", "train.steps=1", "--set", "train.checkpoint.every=1"]) == 0
    return out


@pytest.mark.parametrize("data", [1.5, 7, ["a"], {"path": "x"}, None])
def test_a_page_of_a_run_whose_run_json_data_is_not_a_path(one_step_run, tmp_path, capsys, data):
    """Found by the category: `data` a number in run.json was exit 70 (TypeError in Path); now the page says the
    run's data is not recorded, as for a run.json without it."""
    import json
    import shutil

    damaged = tmp_path / "run"
    shutil.copytree(one_step_run, damaged)
    (damaged / "run.json").write_text(json.dumps({**json.loads((one_step_run / "run.json").read_text()), "data": data}))
    page = tmp_path / "page.html"
    assert run(["page", str(damaged), "-o", str(page), "--sentences", "1", "--seconds", "5"]) == 0, capsys.readouterr()
    assert "not recorded in run.json" in page.read_text()


def test_page_to_stdout_writes_no_file_named_dash(one_step_run, tmp_path, monkeypatch, capsys):
    """Found by the category: `page -o -` (`-` is stdout to cli.args.output_file) wrote a file named `-`."""
    monkeypatch.chdir(tmp_path)
    assert run(["page", str(one_step_run), "-o", "-", "--sentences", "0"]) == 0
    out = capsys.readouterr().out
    assert out.lstrip().lower().startswith("<!doctype html") and "</html>" in out
    assert list(tmp_path.iterdir()) == []
