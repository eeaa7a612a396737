"""bench/throughput.py keeps working on CPU with tiny dimensions (the GPU run is the real one)."""

from __future__ import annotations

import json

from bench import throughput


def test_every_eager_configuration_runs(tmp_path):
    out = tmp_path / "t.json"
    results = throughput.main(["--device", "cpu", "--tiny", "--no-compile", "--spec", "base", "--sentences", "4",
                               "--length", "8", "--steps", "1", "--warmup", "1", "--json", str(out)])
    names = {r.config for r in results}
    assert names == {c for c in throughput.CONFIGS if "compile" not in c}
    assert all(r.tokens_per_s > 0 and r.mfu > 0 for r in results)
    rows = json.loads(out.read_text())
    assert rows[0]["spec"] == "base" and all(row["device"] == "cpu" and row["tokens_per_s"] > 0 for row in rows)


def test_real_batches_report_padding(sample_data):
    results = throughput.main(["--device", "cpu", "--spec", str(throughput.ROOT / "specs/examples/tiny.attn"),
                               "--configs", "attncomp", "--sentences", "4", "--length", "8", "--steps", "1",
                               "--warmup", "0", "--data", str(sample_data)])
    real = [r for r in results if r.config == "attncomp, real batches"]
    assert len(real) == 1 and 0.0 < real[0].padding < 0.5


def test_compile_updates_times_each_update_and_checks_training(sample_data):
    from bench import compile_updates

    result = compile_updates.main(["--device", "cpu", "--spec", str(throughput.ROOT / "specs/examples/tiny.attn"),
                                   "--data", str(sample_data), "--updates", "3", "--backend", "aot_eager"])
    assert len(result["seconds"]) == 8 and result["graphs"] >= 1
    assert result["moved"] == result["parameters"]  # the compiled step trained every parameter
