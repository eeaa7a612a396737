"""Issue 45 item 4 on the CPU: bench/variant.attn goes through FlexAttention, the hand-written model of
bench/variant_reference.py (FlexAttention called directly, nothing of attncomp's lowering) computes what
attncomp's compiled model computes, in float64, logits and gradients, and bench/variant.py's rows train."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

import attncomp
from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.report import attention_report
from bench import variant
from bench.variant_reference import Config, VariantLM, cpu_backward, load_attncomp

# a window shorter than the sequence and a soft cap the scores reach, so that both act
SMALL = ["model.d_model=64", "model.heads=4", "model.d_ff=96", "model.decoder.layers=2", "model.vocab=shared(97)",
         "model.decoder.attention=local(window = 5, softcap = 2, sinks = true)"]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """FlexAttention's eager mode compiles a wrapper (backend "eager"); called again with another shape, dtype or
    soft cap, it recompiles with the cap as a dynamic float, which fails ("Pending unbacked symbols", as under
    PyTorch 2.11 on the GPU, docs/compiler.md). A run of the benchmark has one of each; each test starts afresh."""
    torch._dynamo.reset()
    yield


def test_the_variant_spec_has_base_widths_and_every_attention_runs_flex_attention():
    model = attncomp.compile(variant.SPEC, device="meta")
    stack = model.spec.model.decoder
    assert (stack.d_model, stack.heads, stack.d_k, stack.layers, stack.d_ff) == (512, 8, 64, 6, 2048)
    assert model.spec.model.encoder is None and stack.norm == "sandwich" and stack.qk_norm == "head"
    attention = stack.attention
    assert (attention.kind, attention.window, attention.softcap, attention.sinks) == ("local", 128, 50.0, True)
    (row,) = attention_report(model)
    assert row.layers == 6 and row.kernel.startswith("flex:")


def _models():
    """attncomp's compiled model (all passes) in float64 with gains, sinks and weights away from their
    initial values, and the hand-written model with its weights."""
    spec = ir.load(variant.SPEC, SMALL)
    torch.manual_seed(0)
    ours = compile_spec(spec).double()
    with torch.no_grad():
        for name, p in ours.named_parameters():
            p.add_(torch.randn_like(p) * (0.5 if "norm" in name or "sinks" in name else 0.05))
    theirs = load_attncomp(VariantLM(Config.from_spec(spec, max_len=32)).double(), ours.state_dict())
    return ours, theirs


def test_the_hand_written_model_computes_attncomps_logits_and_gradients_in_float64():
    ours, theirs = _models()
    tokens, targets = torch.randint(0, 97, (2, 24)), torch.randint(0, 97, (2, 24))
    with torch.no_grad():
        expected, got = ours(tokens), theirs(tokens)
    assert (got - expected).abs().max() < 1e-10 * expected.abs().max()
    loss = F.cross_entropy(ours(tokens).flatten(0, 1), targets.flatten())
    grads = dict(zip([n for n, _ in ours.named_parameters()], torch.autograd.grad(loss, list(ours.parameters()))))
    with cpu_backward():  # FlexAttention's eager backward, on the CPU
        their_loss = F.cross_entropy(theirs(tokens).flatten(0, 1), targets.flatten())
        their_grads = torch.autograd.grad(their_loss, list(theirs.parameters()))
    assert abs(float(their_loss.detach() - loss.detach())) < 1e-12
    mapped = load_attncomp(VariantLM(theirs.config).double(), grads)  # attncomp's gradients, in their places
    for (name, expected_grad), got_grad in zip(mapped.named_parameters(), their_grads):
        assert expected_grad.abs().max() > 0, name  # every parameter (the sinks too) gets a gradient
        assert (got_grad - expected_grad).abs().max() < 1e-10 * expected_grad.abs().max(), name


def test_the_window_the_soft_cap_and_the_sinks_each_act_at_these_sizes():
    """The equality above would also hold for two models that both ignored a part: each part changes the logits."""
    ours, theirs = _models()
    tokens = torch.randint(0, 97, (2, 24))
    state = ours.state_dict()
    with torch.no_grad():
        reference = theirs(tokens)
        for change in ({"window": 64}, {"softcap": 1e6}):
            other = load_attncomp(VariantLM(replace(theirs.config, **change)).double(), state)
            assert (other(tokens) - reference).abs().max() > 1e-3, change
        for layer in theirs.layers:
            layer.attn.sinks.fill_(-1e4)  # sinks that take no weight
        assert (theirs(tokens) - reference).abs().max() > 1e-3


def test_load_attncomp_refuses_a_parameter_it_has_no_place_for():
    ours, theirs = _models()
    state = {**ours.state_dict(), "decoder.layers.0.self_attn.gate_proj.weight": torch.zeros(1)}
    with pytest.raises(ValueError, match="gate_proj"):
        load_attncomp(VariantLM(theirs.config).double(), state)


def test_the_benchmark_runs_both_models_on_the_cpu_and_they_train(tmp_path):
    out = tmp_path / "variant.json"
    rows = variant.main(["--device", "cpu", "--tiny", "--configs", "attncomp,hand-written", "--sentences", "2",
                         "--length", "16", "--steps", "2", "--warmup", "1", "--json", str(out)])
    assert [r["config"] for r in rows] == ["attncomp", "hand-written"]
    assert all(r["error"] == "" and r["trained"] and r["tokens_per_s"] > 0 and r["mfu"] > 0 for r in rows)
    # the same weights, batch and optimiser: the same losses, step for step
    assert rows[0]["loss_first"] == pytest.approx(rows[1]["loss_first"], rel=1e-5)
    assert rows[0]["loss_last"] == pytest.approx(rows[1]["loss_last"], rel=1e-4)
    assert rows[0]["vs_hand_written"] == pytest.approx(rows[0]["tokens_per_s"] / rows[1]["tokens_per_s"])
    assert json.loads(out.read_text()) == rows


def test_the_compiled_rows_trace_and_train_on_the_cpu_through_aot_eager():
    """The GPU's compiled rows rehearsed on the CPU (--backend aot_eager): Dynamo and AOTAutograd trace the
    hand-written model's step with FlexAttention (window, sinks, soft cap) inside it, forward and backward, and
    attncomp's step (which takes the explicit form on the CPU, ops.flex_attend's rule); then the trained check runs
    both models' eager gradients (FlexAttention's eager backward on the hand-written side), as on a GPU."""
    rows = variant.main(["--device", "cpu", "--tiny", "--backend", "aot_eager", "--configs",
                         "attncomp + compile,hand-written + compile", "--sentences", "2", "--length", "16",
                         "--steps", "2", "--warmup", "1"])
    assert [r["config"] for r in rows] == ["attncomp + compile", "hand-written + compile"]
    assert all(r["error"] == "" and r["trained"] and r["grad_difference"] < 1e-5 for r in rows), rows
    assert rows[0]["losses"] == pytest.approx(rows[1]["losses"], rel=1e-5)


def test_the_benchmark_refuses_an_unknown_configuration(capsys):
    with pytest.raises(SystemExit) as exit_:
        variant.main(["--configs", "attncomp,hand-written + magic"])
    assert exit_.value.code == 2 and "hand-written + magic" in capsys.readouterr().err


def test_each_attncomp_row_is_compared_with_the_hand_written_row_of_its_compilation():
    rows = [{"config": c, "tokens_per_s": t} for c, t in (
        ("attncomp + compile", 300.0), ("hand-written + compile", 200.0), ("attncomp + compile - fused loss", 100.0),
        ("attncomp", 50.0), ("hand-written", 0.0))]  # a failed row has 0 tokens/s: no ratio against it
    variant.ratios(rows)
    assert [r.get("vs_hand_written") for r in rows] == [1.5, None, 0.5, None, None]
