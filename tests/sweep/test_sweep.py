"""`attncomp sweep` on two variants of the tiny spec and the sample corpus: the table, HParams, and a
sweep stopped mid-way (one row finished, one stopped at a checkpoint) that resumes to the same table."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from attncomp import train
from attncomp.cli.main import run
from attncomp.sweep.paper import TABLE3
from attncomp.sweep.run import ChildTrainer, plan, run_sweep
from attncomp.sweep.state import Options, SweepState
from tests.conftest import ROOT

SMALL_BATCH = "train.batch=tokens(500)"  # a quarter of tiny's batch: the rows' steps cost a quarter as much
STEPS = ["--steps", "8", "--set", "train.checkpoint.every=4", "--set", SMALL_BATCH, "--bleu-sentences", "20"]


def _specs(directory):
    """Two tiny variants named after Table 3 rows: base (4 heads) and A1 (one head)."""
    tiny = ROOT / "specs/examples/tiny.attn"
    (directory / "base.attn").write_text(f'extends "{tiny}"\n')
    (directory / "A1.attn").write_text(f'extends "{tiny}"\nmodel {{ heads = 1 }}\n')
    return [str(directory / "base.attn"), str(directory / "A1.attn")]


def _rows(out):
    rows = json.loads((out / "results.json").read_text())["rows"]
    timings = ("train_minutes", "decode_sentences_per_s")
    return {r["row"]: {k: v for k, v in r.items() if k not in timings} for r in rows}


@pytest.fixture(scope="module")
def swept(sample_data, tmp_path_factory):
    directory = tmp_path_factory.mktemp("sweep")
    specs = _specs(directory)
    out = directory / "out"
    assert run(["sweep", *specs, "--data", str(sample_data), "--out", str(out), *STEPS]) == 0
    return specs, out


def test_table_has_the_rows_columns_and_paper_figures(swept):
    _, out = swept
    rows = _rows(out)
    assert list(rows) == ["base", "A1"]
    assert rows["A1"]["h"] == 1 and rows["A1"]["d_k"] == 64 and rows["base"]["h"] == 4
    for row in rows.values():
        assert row["steps"] == 8 and 1 < row["ppl"] < 256 and row["bleu_sentences"] == 20
        assert 0 <= row["bleu"] <= 100
    assert rows["A1"]["paper_ppl"] == TABLE3["A1"].ppl and rows["base"]["paper_bleu"] == TABLE3["base"].bleu
    lines = (out / "results.md").read_text().splitlines()
    header = next(line for line in lines if line.startswith("| row"))
    for title in ("N", "d_model", "h", "d_k", "P_drop", "eps_ls", "PPL (valid)", "BLEU (valid)", "paper PPL"):
        assert f" {title} |" in header
    assert any(line.startswith("| A1 |") and " 5.29 |" in line for line in lines)
    with open(out / "results.csv") as f:
        assert [r["row"] for r in csv.DictReader(f)] == ["base", "A1"]


def test_hparams_summaries_exist(swept):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, out = swept
    for row in ("base", "A1"):
        events = EventAccumulator(str(out / "tb" / row))
        events.Reload()
        assert "_hparams_/experiment" in events.summary_metadata
        assert "valid/ppl" in events.Tags()["scalars"]


def test_chart_beside_the_table_with_the_papers_figures(swept, tmp_path):
    from tests.draw.svg import elements, with_prefix
    from tests.draw.test_page import check_page

    _, out = swept
    ids = elements(out / "results.svg")
    for quantity in ("ppl", "bleu", "params_m"):
        assert with_prefix(ids, f"bar:{quantity}:measured:") == [f"bar:{quantity}:measured:{r}" for r in ("A1", "base")]
        assert with_prefix(ids, f"bar:{quantity}:paper:") == [f"bar:{quantity}:paper:{r}" for r in ("A1", "base")]
    assert run(["plot", str(out), "-o", str(tmp_path / "sweep.svg")]) == 0  # the sweep's rows overlaid
    curves = with_prefix(elements(tmp_path / "sweep.svg"), "curve:loss:")
    assert "curve:loss:0:valid/loss" in curves and "curve:loss:1:valid/loss" in curves
    assert run(["page", str(out / "rows" / "A1"), "-o", str(tmp_path / "A1.html"), "--sentences", "2"]) == 0
    check_page(tmp_path / "A1.html", 2)


def test_without_matplotlib_the_chart_is_skipped_in_one_line(swept, sample_data, tmp_path, monkeypatch, capsys):
    from attncomp.plot import figures

    specs, clean = swept
    out = tmp_path / "out"
    shutil.copytree(clean, out)
    (out / "results.svg").unlink()
    monkeypatch.setattr(figures, "available", lambda: False)
    assert run(["sweep", *specs, "--data", str(sample_data), "--out", str(out), *STEPS]) == 0  # all rows finished
    err = capsys.readouterr().err
    assert "sweep: chart skipped: matplotlib is not installed (pip install 'attncomp[plot]')" in err.splitlines()
    assert not (out / "results.svg").exists() and (out / "results.md").exists()


def test_stopped_sweep_resumes_without_redoing_finished_rows(swept, sample_data, tmp_path, capfd):
    specs, clean = swept
    out = tmp_path / "out"
    shutil.copytree(clean, out)
    state = json.loads((out / "sweep.json").read_text())
    state["rows"]["A1"].update(result=None, trained=False)  # as if A1 had not started
    (out / "sweep.json").write_text(json.dumps(state))
    shutil.rmtree(out / "rows" / "A1")
    finished = (out / "rows" / "base" / "checkpoint_avg.pt").stat().st_mtime_ns

    def stopped(job, log):  # A1 stops at step 4 with a checkpoint, then the sweep is interrupted
        train.run(job.model_copy(update={"checkpointing": job.checkpointing.model_copy(update={"stop_at": 4})}))
        return 130

    options = Options(str(sample_data.resolve()), 8, None, ("train.checkpoint.every=4", SMALL_BATCH), 20)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(SweepState.open(out, options), plan(specs, options), stopped)
    assert (out / "rows" / "A1" / "checkpoint_00000004.pt").exists()
    capfd.readouterr()
    assert run(["sweep", *specs, "--data", str(sample_data), "--out", str(out), *STEPS]) == 0
    err = capfd.readouterr().err  # the worker process writes to the same file descriptors
    assert "1 of 2 row(s) already finished" in err and "resumed from" in err and "training base" not in err
    assert (out / "rows" / "base" / "checkpoint_avg.pt").stat().st_mtime_ns == finished
    assert _rows(out) == _rows(clean)


@pytest.mark.parametrize("extra, message", [
    (["--steps", "5", "--set", "model.heads=2"], "holds a sweep with other options"),
])
def test_a_sweep_directory_keeps_its_options(swept, sample_data, extra, message, capsys):
    specs, out = swept
    assert run(["sweep", *specs, "--data", str(sample_data), "--out", str(out), *extra]) != 0
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("case, message", [
    ("no_match", "no spec files match"),
    ("bad_spec", "bad.attn:2:"),
    ("no_data", "no data directory"),
    ("no_budget", "--steps N or --minutes M"),
    ("same_name", "two specs are both named base"),
    ("wrong_vocab", "vocabulary of 256 tokens but the spec's model expects 4000"),
])
def test_bad_input_is_one_clear_line(case, message, sample_data, tmp_path, capsys):
    specs = _specs(tmp_path)
    (tmp_path / "bad.attn").write_text('extends "base.attn"\nmodel { heads = three }\n')
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "base.attn").write_text(f'extends "{specs[0]}"\n')
    args = {"no_match": [str(tmp_path / "nothing*.attn")], "bad_spec": [str(tmp_path / "bad.attn")],
            "no_data": [specs[0], "--data", str(tmp_path / "missing")], "no_budget": [specs[0]],
            "same_name": [specs[0], str(tmp_path / "other" / "base.attn")],
            "wrong_vocab": [str(ROOT / "specs/table3-small/base.attn")]}[case]
    if "--data" not in args:
        args += ["--data", str(sample_data)]
    if case != "no_budget":
        args += ["--steps", "1"]
    assert run(["sweep", *args, "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 3  # a spec error: the message, its line and a caret
    assert not (tmp_path / "out" / "rows").exists()


def test_parallel_rows_train_in_child_processes_with_their_own_logs(sample_data, tmp_path):
    specs = _specs(tmp_path)
    out = tmp_path / "out"
    assert run(["sweep", *specs, "--data", str(sample_data), "--out", str(out), "--steps", "2",
                "--set", "train.checkpoint.every=2", "--set", SMALL_BATCH, "--bleu-sentences", "0",
                "--parallel", "2"]) == 0
    for row in ("base", "A1"):
        log = (out / "rows" / row / "train.log").read_text()
        assert "1 CPU worker(s)" in log and "done: " in log, log
    assert set(_rows(out)) == {"base", "A1"}


def test_a_row_failing_in_its_child_process_is_an_exit_code_and_its_log(tmp_path):
    job = train.Job(spec=str(ROOT / "specs/examples/tiny.attn"), data=train.DataOptions(path=str(tmp_path / "none")))
    log = tmp_path / "row" / "train.log"
    assert ChildTrainer(1)(job, log) == 2
    assert log.read_text().startswith("error: ") and "Traceback" not in log.read_text()
