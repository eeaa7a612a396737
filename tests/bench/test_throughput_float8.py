"""bench/throughput.py's float8 rows on a CPU, through torchao's emulation: what the GPU run will do (convert,
train, compare with bf16), at tiny size; their speed is the GPU's to measure."""

from __future__ import annotations

import json

import pytest

from attncomp.train import float8
from bench import throughput

pytest.importorskip("torchao.float8")
TINY = ["--device", "cpu", "--tiny", "--spec", "base", "--sentences", "4", "--length", "8", "--steps", "2",
        "--warmup", "1"]


@pytest.fixture
def one_thread():
    """Tiny products: on a busy 2-core machine two threads are slower than one (tests/train/test_float8.py)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_float8_rows_convert_train_and_follow_their_bf16_rows(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv(float8.EMULATE, "1")
    out = tmp_path / "t.json"
    results = throughput.main([*TINY, "--configs", "attncomp + float8,nn.Transformer + float8", "--json", str(out)])
    # each float8 row runs after its bf16 counterpart, which the run added
    assert [r.config for r in results] == ["attncomp", "attncomp + float8", "nn.Transformer",
                                           "nn.Transformer + float8"]
    ours, _, peer = results[1], results[2], results[3]
    assert ours.float8 == "float8 (emulated): 32 of 32 linear layers converted"  # 2 + 2 layers of 6 and 10
    # nn.Transformer's linear1 and linear2 convert; out_proj is read by nn.MultiheadAttention, and its fused
    # in-projection is a parameter
    assert peer.float8.startswith("float8 (emulated): 8 of 14 linear layers converted; skipped: "
                                  "transformer.encoder.layers.*.self_attn.out_proj (x2)")
    assert peer.float8.endswith("; 6 nn.MultiheadAttention in-projection(s) not converted (a parameter, not a "
                                "linear layer)")
    for row in (ours, peer):
        assert not row.error and row.trained is not None and row.mfu > 0 and len(row.losses) == 3
        assert 0 < row.loss_gap_bf16 < throughput.FLOAT8_LOSS_TOLERANCE and row.loss_within_tolerance
    rows = json.loads(out.read_text())
    assert rows[1]["float8"] == ours.float8 and rows[1]["loss_gap_bf16"] == ours.loss_gap_bf16


def test_a_float8_configuration_is_refused_on_a_cpu_without_emulation(monkeypatch):
    """(_measure turns the refusal into the row's error, and the run goes on with the next configuration.)"""
    import torch

    from attncomp import ir
    from attncomp.errors import UsageError

    monkeypatch.delenv(float8.EMULATE, raising=False)
    spec = ir.load(throughput.ROOT / "specs/base.attn", throughput.TINY)
    batch = throughput.make_batch(2, 4, 300, torch.device("cpu"))
    with pytest.raises(UsageError, match="compute capability 8.9"):
        throughput.build("attncomp + float8", spec, batch, torch.device("cpu"))


def test_counterparts_come_first_once():
    assert throughput.with_bf16_counterparts(
        ["attncomp + compile + float8", "nn.Transformer + loss compiled", "nn.Transformer + loss compiled + float8",
         "attncomp + compile"]) == ["attncomp + compile", "attncomp + compile + float8",
                                    "nn.Transformer + loss compiled", "nn.Transformer + loss compiled + float8"]


def test_the_loss_comparison_takes_the_largest_step_difference():
    row = lambda losses: throughput.Result("base", "c", 1.0, 1.0, 0.1, 0.0, losses=losses)  # noqa: E731
    float8_row = row([10.0, 9.5, 9.0])
    throughput.compare_float8(float8_row, row([10.0, 9.45, 9.02]))
    assert float8_row.loss_gap_bf16 == pytest.approx(0.05) and float8_row.loss_within_tolerance
    throughput.compare_float8(float8_row, row([10.0, 9.9, 9.8]))  # a float8 run that fell much faster: not within
    assert float8_row.loss_gap_bf16 == pytest.approx(0.8) and not float8_row.loss_within_tolerance


def test_no_float8_rate_where_float8_products_do_not_run():
    import torch

    assert throughput.float8_matmul_rate(torch.device("cpu"), 64) is None
