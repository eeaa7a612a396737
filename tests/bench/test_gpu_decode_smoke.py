"""bench/gpu_decode.py keeps working (on CPU here; on a GPU it is item 6 of the GPU issue)."""

from __future__ import annotations

import json

import pytest

from attncomp import checkpoint as ckpt
from bench import gpu_decode

pytest.importorskip("ctranslate2")


@pytest.mark.slow
def test_gpu_decode_rows_for_both_engines(trained_tiny, sample_data, tmp_path):
    for side in ("src", "tgt"):
        lines = (sample_data / f"text/test.{side}").read_text(encoding="utf-8").splitlines(keepends=True)[:4]
        (tmp_path / side).write_text("".join(lines), encoding="utf-8")
    rows = gpu_decode.main([str(trained_tiny / ckpt.AVERAGE), "--src", str(tmp_path / "src"), "--ref",
                            str(tmp_path / "tgt"), "--device", "cpu", "--dtypes", "float32", "--ct2", "float32,nonsense",
                            "--json", str(tmp_path / "rows.json")])
    assert [(r["engine"], r["dtype"]) for r in rows] == [("attncomp", "float32"), ("CTranslate2", "float32"),
                                                        ("CTranslate2", "nonsense")]
    for row in rows[:2]:
        assert "error" not in row, row
        assert 0 <= row["bleu"] <= 100 and row["sentences_per_s"] > 0 and row["beam"] == 4 and row["alpha"] == 0
    assert "nonsense" in rows[2]["error"]  # a compute type CTranslate2 refuses: its row says why, the run goes on
    assert json.loads((tmp_path / "rows.json").read_text()) == rows
