"""bench/quality.py keeps working: both pipelines, a few seconds each, on the sample corpus."""

from __future__ import annotations

from bench import quality
from tests.conftest import ROOT


def test_quality_benchmark_runs_side_by_side(sample_data, tmp_path):
    for side in ("src", "tgt"):  # 20 of the 200 test lines: an untrained model decodes each to the length limit
        lines = (sample_data / f"text/test.{side}").read_text(encoding="utf-8").splitlines(keepends=True)[:20]
        (tmp_path / f"test.{side}").write_text("".join(lines), encoding="utf-8")
    results = quality.main(["--prepared", str(sample_data), "--src", str(tmp_path / "test.src"),
                            "--ref", str(tmp_path / "test.tgt"), "--minutes", "0.05",
                            "--spec", str(ROOT / "specs/examples/tiny.attn"), "--out", str(tmp_path / "out")])
    for name in ("attncomp", "reference"):
        assert results[name]["steps"] > 0 and results[name]["sentences"] == 20
        assert 0.0 <= results[name]["bleu"] <= 100.0 and results[name]["sentences_per_s"] > 0
    assert (tmp_path / "out/results.json").exists() and (tmp_path / "out/reference.hyp").exists()
