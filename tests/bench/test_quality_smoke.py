"""bench/quality.py keeps working: both pipelines, a few seconds each, on the sample corpus."""

from __future__ import annotations

from bench import quality
from tests.conftest import ROOT


def test_quality_benchmark_runs_side_by_side(sample_data, tmp_path):
    results = quality.main(["--prepared", str(sample_data), "--src", str(sample_data / "text/test.src"),
                            "--ref", str(sample_data / "text/test.tgt"), "--minutes", "0.05",
                            "--spec", str(ROOT / "specs/examples/tiny.attn"), "--out", str(tmp_path)])
    for name in ("attncomp", "reference"):
        assert results[name]["steps"] > 0 and results[name]["sentences"] == 200
        assert 0.0 <= results[name]["bleu"] <= 100.0 and results[name]["sentences_per_s"] > 0
    assert (tmp_path / "results.json").exists() and (tmp_path / "reference.hyp").exists()
