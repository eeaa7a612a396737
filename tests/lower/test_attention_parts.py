"""Attention as parts (issue 26): the score scale, soft-capping, sinks, the gate, q/k/v clipping and T5's
bucketed bias; the kernel
each composition gets (SDPA, FlexAttention, explicit), each checked against the explicit graph in float64."""

from __future__ import annotations

import math

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.errors import SpecError
from attncomp.ir import nodes
from attncomp.lower import ops
from attncomp.passes.fuse_attention import count_flex, count_fused
from attncomp.report import attention_report
from tests.helpers import (assert_decode_steps, assert_generated_equals_compiled, batch, first_cache, pair,
                           real_positions, run_forward)

BASE = """model parts {{
  vocab = shared(61)  d_model = 16  heads = 4  d_ff = 32  layers = 2  bias = false
  dropout {{ residual = 0  attention = 0 }}
  {model}
}}
"""
VARIANTS = {
    # T5: unscaled dot products everywhere, bucketed bias on self-attention -> SDPA with a float mask
    "t5": "positions = buckets(count = 8, max_distance = 16)  norm = pre  normalization = rmsnorm\n"
          "encoder { attention = scaled_dot(scale = none) }\n"
          "decoder { attention = scaled_dot(scale = none)  cross_attention = scaled_dot(scale = none) }",
    # Gemma 2's attention: a constant scale and soft-capped scores -> FlexAttention
    "softcap_lm": "positions = rope  norm = pre\n"
                  "decoder { attention = scaled_dot(scale = 0.0625, softcap = 2) }",
    # every part at once: buckets and soft-capping (FlexAttention with a bias and masks), local windows
    "buckets_softcap": "positions = buckets(count = 8, max_distance = 16)\n"
                       "encoder { attention = scaled_dot(scale = none, softcap = 3) }\n"
                       "decoder { attention = local(window = 2, softcap = 3)  "
                       "cross_attention = scaled_dot(softcap = 5) }",
    # sinks: an extra softmax column; FlexAttention with a log-sum-exp correction
    "sinks_local_lm": "positions = alibi\n"
                      "decoder { attention = local(window = 2, sinks = true) }",
    # gated attention (Qwen3-Next): sigmoid(W^G x) on the heads' output, self- and cross-attention -> SDPA
    "gated": "positions = rope\n"
             "encoder { attention = scaled_dot(gate = true) }\n"
             "decoder { attention = scaled_dot(gate = true)  cross_attention = scaled_dot(gate = true) }",
    # q, k and v clipped (OLMo's clip_qkv), with grouped-query heads and a local window -> SDPA
    "clipped": "positions = rope  kv_heads = 2\n"
               "encoder { attention = scaled_dot(clip_qkv = 0.5) }\n"
               "decoder { attention = local(window = 2, clip_qkv = 0.3)\n"
               "          cross_attention = scaled_dot(clip_qkv = 0.4) }",
    # an encoder-only model with soft-capping and a layer kind of its own
    "softcap_encoder": "positions = buckets(count = 8, max_distance = 16)\n"
                       "encoder { attention = scaled_dot(softcap = 4)\n"
                       "          layer plain { every = 2  attention = scaled_dot } }",
}


def spec_of(name: str) -> nodes.Spec:
    return ir.load_flat(BASE.format(model=VARIANTS[name]), f"{name}.attn")


def _randomised(model: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial sinks and bias tables (both start at 0 or near it)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("sinks") or "relative_bias" in name:
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def _pair(name):
    spec = spec_of(name)
    plain, fused = pair(spec)
    _randomised(plain)
    fused.load_state_dict(plain.state_dict())
    return spec, plain.eval(), fused.eval()


def test_canonical_text_writes_the_parts_only_away_from_their_defaults():
    spec = spec_of("buckets_softcap")
    text = ir.to_text(spec)
    assert "attention = scaled_dot(scale = none, softcap = 3.0)" in text
    assert "attention = local(window = 2, softcap = 3.0)" in text
    assert "positions = buckets(count = 8, max_distance = 16)" in text
    assert ir.load_flat(text, "again.attn") == spec
    plain = ir.load_flat(BASE.format(model="encoder { attention = scaled_dot(scale = rsqrt_d_k, sinks = false) }"),
                         "p.attn")
    assert "attention = scaled_dot\n" in ir.to_text(plain)
    assert spec_of("softcap_lm").model.decoder.attention.scale == nodes.ScaleBy(value=0.0625)


@pytest.mark.parametrize("text, message", [
    ("encoder { attention = scaled_dot(softcap = -1) }", "softcap"),
    ("encoder { attention = scaled_dot(scale = huge) }", "scale"),
    ("encoder { attention = scaled_dot(scale = 0) }", "greater than 0"),
    ("positions = buckets(count = 2)  encoder { }", "count"),
    ("encoder { attention = scaled_dot(clip_qkv = -1) }", "clip_qkv"),
    ("encoder { attention = additive(clip_qkv = 1) }", "clip_qkv"),
])
def test_bad_parts_are_located_errors(text, message):
    with pytest.raises(SpecError) as err:
        ir.load_flat(BASE.format(model=text), "bad.attn")
    assert message in str(err.value) and "bad.attn:" in str(err.value)


def test_buckets_are_transformers_t5_buckets():
    from transformers.models.t5.modeling_t5 import T5Attention

    for bidirectional in (True, False):
        for q_len, k_len in ((40, 40), (1, 200), (3, 9)):
            keys = torch.arange(k_len)
            distance = keys.unsqueeze(0) - keys[k_len - q_len:].unsqueeze(1)
            expected = T5Attention._relative_position_bucket(distance, bidirectional, 32, 128)
            got = ops.bucket_index(q_len, k_len, 32, 128, bidirectional, torch.device("cpu"))
            assert torch.equal(got, expected)


ENC, DEC, CROSS = "encoder self-attention", "decoder self-attention", "encoder-decoder attention"


@pytest.mark.parametrize("name, kernels", [
    ("t5", [(ENC, "sdpa"), (DEC, "sdpa"), (CROSS, "sdpa")]),
    ("softcap_lm", [(DEC, "flex")]),
    ("buckets_softcap", [(ENC, "flex"), (DEC, "flex"), (CROSS, "flex")]),
    ("sinks_local_lm", [(DEC, "flex")]),
    ("gated", [(ENC, "sdpa"), (DEC, "sdpa"), (CROSS, "sdpa")]),
    ("clipped", [(ENC, "sdpa"), (DEC, "sdpa"), (CROSS, "sdpa")]),  # the clamps come before the kernel
    ("softcap_encoder", [(ENC, "flex"), (ENC, "sdpa")]),  # the layer kind `plain` has no soft-capping
])
def test_the_report_names_each_attentions_kernel(name, kernels):
    rows = attention_report(attncomp.compile(spec_of(name), device="meta"))
    assert sorted((r.site, r.kernel.split(":")[0]) for r in rows) == sorted(kernels)
    assert all(r.kernel.split(": ", 1)[1] for r in rows)  # and why


@pytest.mark.parametrize("name", list(VARIANTS))
def test_fused_forward_equals_the_explicit_graph(name):
    """No gradient wanted: FlexAttention itself runs (eagerly) on the CPU."""
    spec, plain, fused = _pair(name)
    src, tgt = batch(spec)
    with torch.no_grad():
        a, b = run_forward(plain, spec, src, tgt), run_forward(fused, spec, src, tgt)
    keep = real_positions(spec, src, tgt)
    assert (a - b)[keep].abs().max() < 1e-9
    graph = fused.flat("forward").graph
    assert count_fused(graph) + count_flex(graph) > 0


@pytest.mark.parametrize("name", ["buckets_softcap", "softcap_lm", "sinks_local_lm"])
def test_cpu_training_takes_the_explicit_form_with_equal_gradients(name):
    """FlexAttention has no CPU backward: where a gradient is wanted on the CPU, flex_attend computes the
    explicit form, and the gradients are the explicit graph's."""
    spec, plain, fused = _pair(name)
    src, tgt = batch(spec)
    q = torch.randn(2, 4, 5, 4, dtype=torch.float64, requires_grad=True)
    assert not ops.flex_runs(q) and ops.flex_runs(q.detach())
    with torch.no_grad():
        assert ops.flex_runs(q)
    keep = real_positions(spec, src, tgt)
    for model in (plain, fused):
        run_forward(model, spec, src, tgt)[keep].sum().backward()
    grads = dict(plain.named_parameters())
    for n, p in fused.named_parameters():
        assert torch.allclose(p.grad, grads[n].grad, atol=1e-9), n


def test_flex_attend_is_the_explicit_form_uncompiled_and_for_narrow_heads():
    """FlexAttention only under torch.compile and for heads at least 16 wide (Inductor's kernel)."""
    wide = [torch.randn(1, 2, 3, 16, dtype=torch.float64) for _ in range(3)]
    narrow = [t[..., :8] for t in wide]
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes)
        return gm.forward

    with torch.no_grad():
        assert torch.equal(ops.flex_attend(*wide, 0.5, 2.0, causal=True),
                           ops.explicit_attend(*wide, 0.5, 2.0, causal=True))
        torch.compiler.reset()
        torch.compile(ops.flex_attend, backend=backend, fullgraph=True)(*narrow, 0.5, 2.0, causal=True)
    assert seen and not any("flex_attention" in target for target in seen)


@pytest.mark.slow  # 18 FlexAttention calls traced by dynamo: about 30 s
def test_flex_attend_equals_its_explicit_form_for_every_argument():
    """Every argument set in one traced function (one fullgraph trace, not one per set): each call is one
    FlexAttention node in the graph (the explicit form has none), and each output equals its explicit form."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 16, dtype=torch.float64, generator=g) for _ in range(3))  # d_k >= 16: flex
    bias = torch.randn(3, 5, 5, dtype=torch.float64, generator=g)
    pad = torch.zeros(2, 1, 1, 5, dtype=torch.bool)
    pad[1, ..., 3:] = True
    pad[0] = True  # a sentence of padding only: its rows are zeros
    sinks = torch.randn(3, dtype=torch.float64, generator=g)
    cases = [((q, k, v, 0.3, cap), kwargs, 1e-12)
             for kwargs in ({}, {"bias": bias}, {"mask": pad, "rows": True}, {"causal": True}, {"window": 1},
                            {"window": 2, "causal": True, "bias": bias},
                            {"bias": bias, "mask": ops.band_mask(5, 1, False, q.device)})
             for cap in (0.0, 2.0)]
    cases += [((q, k, v, 0.3, 0.0), kwargs, 1e-7)  # compiled, FlexAttention's lse is float32
              for kwargs in ({"sinks": sinks}, {"sinks": sinks, "causal": True, "bias": bias},
                             {"sinks": sinks, "mask": pad, "rows": True})]
    cases.append(((q[:, :, -1:], k, v, 0.5, 2.0), {"causal": True}, 1e-12))  # a decode step: the last query sees all
    flex_nodes = []

    def backend(gm, example_inputs):
        flex_nodes.append(sum("flex_attention" in str(n.target) for n in gm.graph.nodes))
        return gm.forward

    def every_case():
        return tuple(ops.flex_attend(*args, **kwargs) for args, kwargs, _ in cases)

    torch.compiler.reset()
    outputs = torch.compile(every_case, backend=backend, fullgraph=True)()
    assert flex_nodes == [len(cases)], flex_nodes
    for out, (args, kwargs, tolerance) in zip(outputs, cases, strict=True):
        assert (out - ops.explicit_attend(*args, **kwargs)).abs().max() < tolerance, kwargs


def test_sinks_take_weight_from_the_keys():
    s = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    sinks = torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64)
    w = ops.sink_softmax(s, sinks)
    expected = torch.exp(s) / (torch.exp(s).sum(-1, keepdim=True) + torch.exp(sinks).view(1, 3, 1, 1))
    assert torch.allclose(w, expected, atol=1e-14) and (w.sum(-1) < 1).all()


def test_local_windows_are_flex_block_masks():
    """A local window reaches FlexAttention as its block mask (window and causality), not a mask tensor."""
    model = attncomp.compile(spec_of("buckets_softcap"), device="meta")
    layer = model.program.members["decoder"].members["layers"].units[0]
    (call,) = [n for n in layer.members["self_attn"].methods["forward"].graph.nodes if n.target is ops.flex_attend]
    assert call.kwargs["window"] == 2 and call.kwargs["causal"] is True and "mask" not in call.kwargs


def test_softcap_and_scale_are_the_formulas():
    spec = spec_of("softcap_lm")
    model = attncomp.compile(spec, passes=(), dtype=torch.float64)
    text = str(model.program.members["decoder"].members["layers"].units[0].members["self_attn"]
               .methods["forward"].graph)
    assert "0.0625" in text and "softcap" in text
    s = torch.linspace(-10, 10, 21, dtype=torch.float64)
    assert torch.allclose(ops.softcap(s, 2.0), 2.0 * torch.tanh(s / 2.0))
    assert ops.softcap(s, 2.0).abs().max() < 2.0


SLOW_FLEX = pytest.param("buckets_softcap", marks=pytest.mark.slow)  # FlexAttention traces each new length


@pytest.mark.parametrize("name", ["t5", "softcap_lm", SLOW_FLEX, "sinks_local_lm", "gated", "clipped"])
def test_decode_step_equals_forward(name):
    spec, _, fused = _pair(name)
    src, tgt = batch(spec, b=2, s=9, t=7)
    tgt[:] = tgt[:1]  # no target padding: every position's logits are compared
    both = spec.model.encoder is not None
    with torch.no_grad():
        full = fused(src, tgt) if both else fused(tgt)
        assert_decode_steps(fused, first_cache(fused, src, tgt, both), tgt, full, 1e-9)


@pytest.mark.parametrize("name", ["t5", SLOW_FLEX, "sinks_local_lm", "gated", "clipped"])
def test_generated_module_equals_the_compiled_model(name, tmp_path):
    from tests.codegen.test_generated import rendered_module

    spec = spec_of(name)
    compiled = _randomised(attncomp.compile(spec, dtype=torch.float64).eval())
    generated = rendered_module(spec, tmp_path, name, model=compiled).Model().double().eval()
    generated.load_state_dict(compiled.state_dict())
    assert_generated_equals_compiled(generated, compiled, spec, *batch(spec))


def test_the_gate_is_a_sigmoid_on_the_heads_output():
    names = [n for n, _ in attncomp.compile(spec_of("gated"), device="meta").named_parameters()]
    assert {n for n in names if "gate_proj" in n} == {
        f"{side}.layers.{i}.{role}.gate_proj.weight" for i in range(2)
        for side, role in (("encoder", "self_attn"), ("decoder", "self_attn"), ("decoder", "cross_attn"))}
    text = str(attncomp.compile(spec_of("gated"), passes=(), device="meta").program.members["encoder"]
               .members["layers"].units[0].members["self_attn"].methods["forward"].graph)
    assert "torch.sigmoid" in text


@pytest.mark.parametrize("name", ["t5", "gated", "softcap_lm", "sinks_local_lm", "clipped"])
def test_flops_from_the_graphs_equal_the_counter(name):
    from attncomp.lower.flops import counted_on_meta, training_flops

    model = attncomp.compile(spec_of(name), device="meta")
    assert training_flops(model) == counted_on_meta(model)


def test_one_bucket_table_per_stack():
    names = [n for n, _ in attncomp.compile(spec_of("t5"), device="meta").named_parameters()]
    assert [n for n in names if "relative_bias" in n] == ["encoder.relative_bias.weight",
                                                           "decoder.relative_bias.weight"]
    assert math.prod(dict(attncomp.compile(spec_of("t5"), device="meta").named_parameters())
                     ["encoder.relative_bias.weight"].shape) == 8 * 4


def test_clip_qkv_clamps_each_projection_and_binds():
    """clip_qkv = c: torch.clamp(x, -c, c) right after q_proj, k_proj and v_proj (OLMo), cached keys and
    values stored clipped; with the small c of the test it changes the logits."""
    spec = spec_of("clipped")
    text = ir.to_text(spec)
    assert "attention = local(window = 2, clip_qkv = 0.3)" in text and "scaled_dot(clip_qkv = 0.4)" in text
    assert ir.load_flat(text, "again.attn") == spec
    model = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    layer = model.program.members["decoder"].members["layers"].units[0]
    for role, method, c, count in (("self_attn", "forward", 0.3, 3), ("self_attn", "step", 0.3, 3),
                                   ("cross_attn", "forward", 0.4, 3), ("cross_attn", "kv", 0.4, 2),
                                   ("cross_attn", "step", 0.4, 1)):  # a step's cross k, v come from `kv`
        clamps = [n for n in layer.members[role].methods[method].graph.nodes if n.target is torch.clamp]
        assert [n.args[1:] for n in clamps] == [(-c, c)] * count, (role, method)
    unclipped = ir.load_flat(text.replace("clip_qkv = 0.3", "clip_qkv = 0.0").replace("scaled_dot(clip_qkv = 0.4)",
                                                                                   "scaled_dot"), "u.attn")
    other = attncomp.compile(unclipped, passes=(), dtype=torch.float64).eval()
    other.load_state_dict(model.state_dict())
    src, tgt = batch(spec)
    with torch.no_grad():
        assert (model(src, tgt) - other(src, tgt)).abs().max() > 1e-3


PART_EXAMPLES = ["softcap", "t5", "t5_v11", "sinks", "composed"]  # specs/examples/ made of attention parts


def _example(name: str):
    """A shipped example in float64, unfused and fused, with random sinks and bias tables."""
    from tests.conftest import ROOT

    spec = ir.load(ROOT / f"specs/examples/{name}.attn")
    plain, fused = pair(spec)
    _randomised(plain)
    fused.load_state_dict(plain.state_dict())
    return spec, plain.eval(), fused.eval()


@pytest.mark.parametrize("name", PART_EXAMPLES)
def test_examples_fused_equal_explicit_and_decode_step_equals_forward(name):
    """Sequences longer than the examples' windows (16 and 8), so the cache would outgrow them: a windowed
    layer's cache keeps its window's keys."""
    spec, plain, fused = _example(name)
    src, tgt = batch(spec, b=2, s=11, t=21)
    tgt[:] = tgt[:1]  # no target padding: every position's logits are compared
    with torch.no_grad():
        a, b = run_forward(plain, spec, src, tgt), run_forward(fused, spec, src, tgt)
        assert (a - b).abs().max() < 1e-9
        graph = fused.flat("forward").graph
        assert count_fused(graph) + count_flex(graph) > 0
        both = spec.model.encoder is not None
        cache = assert_decode_steps(fused, first_cache(fused, src, tgt, both), tgt, b, 1e-9)
    for layer, (_, seen) in zip(cache.layers, spec.model.decoder.layer_plan()):  # a window's cache is bounded
        window = seen.attention.window if isinstance(seen.attention, nodes.Local) else None
        assert layer.self_attn.k.shape[2] == (tgt.shape[1] if window is None else min(window, tgt.shape[1]))


@pytest.mark.parametrize("name", PART_EXAMPLES)
def test_examples_generated_modules_equal_the_compiled_model(name, tmp_path):
    """The checked-in generated/examples module, imported as it is, against the compiled model:
    forward and cached decoding past the window."""
    from tests.codegen.test_generated import load_module
    from tests.conftest import ROOT

    spec, _, compiled = _example(name)
    module = load_module(ROOT / "generated" / "examples" / f"{name}.py", f"generated_{name}")
    generated = module.Model().double().eval()
    generated.load_state_dict(compiled.state_dict())
    assert_generated_equals_compiled(generated, compiled, spec, *batch(spec, b=2, s=11, t=21), steps=20)
