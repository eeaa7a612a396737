"""A layer written sub-layer by sub-layer: `block = sequential(ffn(scale = 0.5), attention(norm = sandwich), ...)`.

The written-out form and its shorthand are one spec (IR, canonical text, hash); bad lists are located
errors; the lowering follows the list (checked against a layer computed by hand from the compiled
modules); explicit == fused, cached decoding == forward and generated == compiled in float64; FLOPs from
the IR equal the counter's."""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.errors import SpecError
from attncomp.lower.flops import counted_on_meta, training_flops
from attncomp.ir import nodes
from tests.conftest import SPECS, spec_id
from tests.helpers import assert_fused_explicit_decoding_generated

MODEL = """model m {
  d_model = 32  heads = 4  d_ff = 48  vocab = shared(64)  positions = rope  %s
  dropout { residual = 0.0  embedding = 0.0 }
}
"""
LM = "tie = decoder  encoder = none\n  decoder { layers = 3  %s }"
SEQ2SEQ = "encoder { layers = 2  %s }\n  decoder { layers = 2  %s }"


def _load(text: str, *overrides: str):
    return ir.load_flat(text, "<sublayers>", list(overrides))


def _lm(keys: str):
    return _load(MODEL % (LM % keys))


@pytest.mark.parametrize("short, written", [
    ("norm = pre", "block = sequential(attention(norm = pre), ffn(norm = pre))"),
    ("norm = pre", "norm = pre  block = sequential(attention, ffn(scale = 1))"),
    ("norm = sandwich", "norm = post  block = sequential(attention(norm = sandwich), ffn(norm = sandwich))"),
    ("norm = pre  block = parallel(norms = 2)", "norm = pre  block = parallel(attention, ffn, norms = 2)"),
    ("norm = sandwich  block = parallel", "block = parallel(attention(norm = sandwich), ffn(norm = sandwich))"),
    ("norm = pre  layer odd { every = 2  start = 1  norm = output  block = sequential }",
     "norm = pre  layer odd { every = 2  start = 1  block = sequential(attention(norm = output), ffn(norm = output)) }"),
])
def test_a_shorthand_and_its_written_out_form_are_one_spec(short, written):
    a, b = _lm(short), _lm(written)
    assert a == b and ir.to_text(a) == ir.to_text(b) and ir.spec_hash(a) == ir.spec_hash(b)
    assert "sublayers" not in ir.to_text(a) and "sequential(" not in ir.to_text(a)


def test_the_papers_encoder_decoder_layer_written_out_is_the_paper():
    paper = _load(MODEL % (SEQ2SEQ % ("", "")))
    written = _load(MODEL % (SEQ2SEQ % ("block = sequential(attention(norm = post), ffn(norm = post))",
                                        "block = sequential(attention, cross_attention, ffn)")))
    assert paper == written and ir.spec_hash(paper) == ir.spec_hash(written)


def test_a_new_structure_round_trips_through_its_canonical_text():
    spec = _lm("norm = pre  block = sequential(ffn(scale = 0.5), attention(norm = sandwich), ffn(scale = 0.5))")
    text = ir.to_text(spec)
    assert "    block = sequential(ffn(scale = 0.5), attention(norm = sandwich), ffn(scale = 0.5))\n" in text
    assert _load(text) == spec and ir.to_text(_load(text)) == text
    assert [(s.kind, s.norm, s.scale) for s in spec.model.decoder.sublayers(False)] == [
        ("ffn", "pre", 0.5), ("attention", "sandwich", 1.0), ("ffn", "pre", 0.5)]


def test_a_kinds_norm_is_the_norm_of_the_sublayers_it_inherits():
    spec = _lm("norm = pre  block = sequential(attention(norm = none), ffn, ffn(scale = 0.5))  "
               "layer last { start = 2  norm = output }")
    plan = spec.model.decoder.layer_plan()
    assert [s.norm for s in plan[0][1].sublayers(False)] == ["none", "pre", "pre"]
    assert [s.norm for s in plan[2][1].sublayers(False)] == ["output", "output", "output"]


def test_folding_the_stacks_list_keeps_a_kinds_own_list_on_the_stacks_written_norm():
    """The stack's list says `output` everywhere, so it folds to norm = output; a kind's own list with unset
    norms meant the stack's written norm (pre), and keeps it."""
    spec = _lm("norm = pre  block = sequential(attention(norm = output), ffn(norm = output))  "
               "layer first { count = 1  block = sequential(attention(norm = none), ffn) }")
    plan = spec.model.decoder.layer_plan()
    assert spec.model.decoder.norm == "output" and not spec.model.decoder.block.sublayers
    assert [s.norm for s in plan[0][1].sublayers(False)] == ["none", "pre"]
    assert [s.norm for s in plan[1][1].sublayers(False)] == ["output", "output"]
    assert _load(ir.to_text(spec)) == spec


@pytest.mark.parametrize("keys, needle, line", [
    ("block = sequential(ffn, ffn)", "has one attention sub-layer, but its block lists 0", 3),
    ("block = sequential(attention, ffn, attention)", "lists 2", 3),
    ("block = sequential(attention, cross_attention, ffn)", "reads no encoder, so its layers have no cross_attention", 3),
    ("norm = pre  block = parallel(ffn, attention)", "parallel block's sub-layers are attention and ffn", 3),
    ("norm = pre  block = parallel(attention, ffn, ffn)", "parallel block's sub-layers are attention and ffn", 3),
    ("norm = pre  block = parallel(attention, ffn(norm = post))", "needs its norms before the sub-layers", 3),
    ("block = sequential(attention, mlp)", 'unknown sublayer "mlp"', 3),
    ("block = sequential(attention(norm = both), ffn)", "norm", 3),
    ("block = sequential(attention, ffn(scale = 0))", "scale must be greater than 0", 3),
    ("block = sequential(sublayers = attention)", "lists its sublayers as arguments", 3),
    ("block = sequential(" + ", ".join(["ffn"] * 9) + ", attention)", "lists at most 8 sublayers", 3),
    ("norm = pre  layer first { count = 1  block = sequential(ffn) }", "has one attention sub-layer", 3),
])
def test_bad_sublayer_lists_are_located_errors(keys, needle, line):
    with pytest.raises(SpecError) as err:
        _lm(keys)
    assert needle in str(err.value), str(err.value)
    assert err.value.span is not None and err.value.span.line == line


def test_the_lowering_follows_the_list():
    """x + 0.5 * ffn(norm(x)), then x + out_norm(attn(x)) (no input norm), then x + 0.5 * ffn_2(norm_2(x))."""
    spec = _load(MODEL % (LM % "norm = pre  block = sequential(ffn(scale = 0.5), attention(norm = output), "
                                "ffn(scale = 0.5))"), "model.decoder.layers=1", "model.positions=sinusoidal")
    model = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    layer = model.decoder.layers[0]
    assert sorted(name for name, _ in layer.named_children()) == ["ffn", "ffn_2", "ffn_2_norm", "ffn_norm",
                                                                  "self_attn", "self_attn_norm"]
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    with torch.no_grad():
        h = x + 0.5 * layer.ffn(layer.ffn_norm(x))
        h = h + layer.self_attn_norm(layer.self_attn(h))
        h = h + 0.5 * layer.ffn_2(layer.ffn_2_norm(h))
        got = layer(x)
    assert (got - h).abs().max() < 1e-12


def test_a_parallel_block_follows_each_sublayers_norm_and_scale():
    """norms = 1: x + attn_out_norm(attn(norm(x))) + 0.5 * ffn(x) (sandwich attention, an unnormed half
    feed-forward); norms = 2: x + attn(x) + 2 * ffn_out_norm(ffn(ffn_norm(x)))."""
    one = _load(MODEL % (LM % "norm = pre  block = parallel(attention(norm = sandwich), ffn(norm = none, "
                              "scale = 0.5))"), "model.decoder.layers=1", "model.positions=sinusoidal")
    two = _load(MODEL % (LM % "norm = pre  block = parallel(attention(norm = none), ffn(norm = sandwich, scale = 2), "
                              "norms = 2)"), "model.decoder.layers=1", "model.positions=sinusoidal")
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    for spec, members in ((one, ["ffn", "norm", "self_attn", "self_attn_output_norm"]),
                          (two, ["ffn", "ffn_norm", "ffn_output_norm", "self_attn"])):
        model = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
        layer = model.decoder.layers[0]
        assert sorted(name for name, _ in layer.named_children()) == members
        with torch.no_grad():
            for p in layer.parameters():  # gains and biases away from 1 and 0, so each norm counts
                p.add_(0.3 * torch.randn_like(p))
            if spec is one:
                want = x + layer.self_attn_output_norm(layer.self_attn(layer.norm(x))) + 0.5 * layer.ffn(x)
            else:
                want = x + layer.self_attn(x) + 2 * layer.ffn_output_norm(layer.ffn(layer.ffn_norm(x)))
            assert (layer(x) - want).abs().max() < 1e-12
        assert _load(ir.to_text(spec)) == spec and "parallel(" in ir.to_text(spec)


@pytest.mark.parametrize("text", [
    MODEL % (LM % "norm = pre  block = sequential(ffn(scale = 0.5), attention(norm = sandwich), ffn(scale = 0.5, "
                  "norm = none))  layer first { count = 1  block = sequential(attention(norm = none), ffn) }"),
    MODEL % (LM % "norm = pre  block = parallel(attention(norm = sandwich), ffn(norm = output, scale = 0.5))  "
                  "layer odd { every = 2  start = 1  block = parallel(attention(norm = none), ffn, norms = 2) }"),
    MODEL % (SEQ2SEQ % ("norm = pre  block = sequential(ffn(scale = 0.5), attention, ffn(scale = 0.5))",
                        "block = sequential(ffn(norm = pre, scale = 0.5), attention, cross_attention(norm = output), "
                        "ffn(scale = 0.5))")),
], ids=["lm", "parallel_lm", "seq2seq"])
def test_explicit_equals_fused_decoding_equals_forward_generated_equals_compiled(text, tmp_path):
    spec = _load(text)
    assert_fused_explicit_decoding_generated(spec, tmp_path, "sublayers")
    model = compile_spec(spec, device="meta")
    assert training_flops(model) == counted_on_meta(model)


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_every_shipped_spec_written_out_is_the_same_spec(path):
    """Each stack's block written out, sub-layer by sub-layer with the stack's norm: same canonical text and hash."""
    spec = ir.load(path)
    overrides = []
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is None or stack.block.sublayers:
            continue
        cross = name == "decoder" and spec.model.encoder is not None
        if isinstance(stack.block, nodes.Parallel):
            written = f"parallel(attention, ffn, norms = {stack.block.norms})"
        else:
            parts = ", ".join(f"{p.kind}(norm = {stack.norm})" for p in nodes.paper_sublayers(cross))
            written = f"sequential({parts})"
        overrides.append(f"model.{name}.block={written}")
    again = ir.load(path, overrides)
    assert again == spec and ir.to_text(again) == ir.to_text(spec) and ir.spec_hash(again) == ir.spec_hash(spec)
