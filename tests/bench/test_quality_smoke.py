"""bench/quality.py keeps working: both pipelines, a few seconds each, on the sample corpus."""

from __future__ import annotations

import json

import pytest

from bench import quality
from tests.conftest import ROOT


@pytest.mark.slow
def test_quality_benchmark_runs_side_by_side_and_one_side_at_a_time(sample_data, tmp_path):
    """Both sides in one run; then `--only reference --compile` (torch.compile over the reference's model and
    loss, as on a GPU) trains the reference again, and results.json keeps attncomp's figures beside it."""
    for side in ("src", "tgt"):  # 5 of the 200 test lines: an untrained model decodes each to the length limit
        lines = (sample_data / f"text/test.{side}").read_text(encoding="utf-8").splitlines(keepends=True)[:5]
        (tmp_path / f"test.{side}").write_text("".join(lines), encoding="utf-8")
    common = ["--prepared", str(sample_data), "--src", str(tmp_path / "test.src"), "--ref", str(tmp_path / "test.tgt"),
              "--spec", str(ROOT / "specs/examples/tiny.attn"), "--out", str(tmp_path / "out"),
              "--set", "model.layers=1"]  # one layer a side: half the work to train, decode and compile
    results = quality.main([*common, "--minutes", "0.05"])
    for name in ("attncomp", "reference"):
        assert results[name]["steps"] > 0 and results[name]["sentences"] == 5
        assert 0.0 <= results[name]["bleu"] <= 100.0 and results[name]["sentences_per_s"] > 0
        assert results[name]["compile"] is False and results[name]["device"] == "cpu"
    assert (tmp_path / "out/results.json").exists() and (tmp_path / "out/reference.hyp").exists()
    sets = ["model.layers=1", "train.checkpoint.average_last=2"]
    again = quality.main([*common, "--minutes", "0.02", "--only", "reference", "--compile",
                          "--set", sets[1]])
    assert again["attncomp"] == results["attncomp"] and again["reference"]["compile"] is True
    assert again["reference"]["set"] == sets
    assert again["reference"]["steps"] > 0 and again["reference"]["sentences"] == 5
    assert json.loads((tmp_path / "out/results.json").read_text()) == again
