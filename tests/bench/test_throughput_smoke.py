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
    assert all(r.tokens_per_s > 0 and r.mfu > 0 and r.trained is not None for r in results)
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


def _linear_step(loss_of):
    """A _trainer over a linear model, its loss computed by `loss_of(model, x)`; eager loss: the plain one."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    x = torch.randn(32, 8)
    plain = lambda: ((model(x) - 1) ** 2).mean()  # noqa: E731
    return throughput._trainer(model, model.parameters(), lambda: loss_of(model, x), torch.device("cpu"), plain)


def test_check_trained_passes_a_step_that_trains():
    step = _linear_step(lambda m, x: ((m(x) - 1) ** 2).mean())
    for _ in range(6):
        step()
    row = throughput.check_trained(step, step.model.weight.device)
    assert row["trained"] and row["loss_last"] < row["loss_first"] and row["grad_difference"] < 1e-6


def test_check_trained_holds_a_float8_row_to_float8s_rounding_and_a_bf16_row_to_bf16s():
    # gradients 10% off the eager step's: float8's own rounding (a compiled scale one bit apart), not bf16's
    def ten_percent_off(m, x):
        loss = ((m(x) - 1) ** 2).mean()
        return 1.1 * loss - 0.1 * loss.detach()

    rows = {}
    for precision in ("bf16", "float8"):
        step = _linear_step(ten_percent_off)
        if precision == "float8":
            step.float8 = "a conversion"  # what throughput.build hangs on a float8 configuration's step
        for _ in range(6):
            step()
        rows[precision] = throughput.check_trained(step, step.model.weight.device)
    assert [round(rows[p]["grad_difference"], 6) for p in rows] == [0.1, 0.1]
    assert rows["float8"]["trained"] and rows["float8"]["grad_tolerance"] == throughput.GRAD_TOLERANCE["float8"]
    assert not rows["bf16"]["trained"] and rows["bf16"]["grad_tolerance"] == 5e-2


def test_check_trained_fails_a_step_whose_gradients_are_zero():
    # as pytorch/pytorch#180642 did to the compiled step: the loss's value is right, its gradient zero
    def zero_gradient(m, x):
        loss = ((m(x) - 1) ** 2).mean()
        return loss.detach() + 0 * loss

    step = _linear_step(zero_gradient)
    for _ in range(6):
        step()
    row = throughput.check_trained(step, step.model.weight.device)
    assert not row["trained"] and row["grad_difference"] == 1.0 and row["loss_last"] == row["loss_first"]
