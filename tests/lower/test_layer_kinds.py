"""Layers that differ within a stack: `layer NAME { every, start, count, keys }` in a stack block.

The spec's text, its canonical form and errors; one unit per layer kind in the lowered program, listed
per layer; explicit == fused and cached decoding == forward in float64; FLOPs from the IR equal the
counter's; the build report and the generated module name the kinds."""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.compiler import DEFAULT_PASSES, compile_spec
from attncomp.errors import SpecError
from attncomp.lower.flops import counted_on_meta, training_flops
from attncomp.report import build_report, format_report
from tests.conftest import ROOT

SPEC = """model kinds {
  d_model = 32  heads = 4  d_ff = 48  vocab = shared(64)  tie = decoder  positions = rope
  encoder = none
  decoder {
    layers = 5  norm = pre  attention = local(window = 2)
    layer global { every = 2  start = 1  attention = scaled_dot  d_ff = 80 }
    layer first { count = 1  block = parallel  activation = relu2 }
  }
  dropout { residual = 0.0  embedding = 0.0 }
}
"""


def _load(text: str = SPEC, *overrides: str):
    return ir.load_flat(text, "<kinds>", list(overrides))


def test_each_layer_gets_its_kinds_keys_and_the_stack_keeps_its_own():
    plan = _load().model.decoder.layer_plan()
    assert [kind for kind, _ in plan] == ["first", "global", "", "global", ""]
    first, glob, own = plan[0][1], plan[1][1], plan[2][1]
    assert first.block.kind == "parallel" and first.activation == "relu2" and first.d_ff == 48
    assert glob.attention.kind == "scaled_dot" and glob.d_ff == 80 and glob.block.kind == "sequential"
    assert own.attention.kind == "local" and own.d_ff == 48 and not own.layer


def test_canonical_text_round_trips_and_omits_kinds_when_there_are_none():
    spec = _load()
    text = ir.to_text(spec)
    assert "    layer global {\n      every = 2\n      start = 1\n      attention = scaled_dot\n      d_ff = 80\n" in text
    assert ir.load_flat(text, "<again>") == spec
    assert "layer " not in ir.to_text(ir.load(ROOT / "specs/base.attn"))


def test_overrides_reach_a_kind_by_name():
    spec = _load(SPEC, "model.decoder.layer.global.every=3", "model.decoder.layer.late.start=2",
                 "model.decoder.layer.late.count=1", "model.decoder.layer.late.d_ff=16")
    plan = spec.model.decoder.layer_plan()
    assert [kind for kind, _ in plan] == ["first", "global", "late", "", "global"] and plan[2][1].d_ff == 16


@pytest.mark.parametrize("change, message", [
    ('layer global { every = 2  start = 1', "layer global { every = 2  start = 7"),
    ("layer first { count = 1", "layer first { start = 1  count = 1"),
])
def test_bad_placements_are_located_errors(change, message):
    text = SPEC.replace(change, message)
    with pytest.raises(SpecError) as err:
        _load(text)
    text_err = str(err.value)
    assert ("starts at index 7" in text_err or "is both global and first" in text_err), text_err
    assert err.value.span is not None and err.value.span.line in (6, 7)


@pytest.mark.parametrize("text, needle", [
    (SPEC.replace("layer global {", "layer Global {"), "is not a layer kind name"),
    (SPEC.replace("layer global {", "layer {"), "needs a name"),
    (SPEC.replace("layer first { count = 1  block = parallel", "layer first { count = 1  block = parallel  norm = post"),
     "parallel block"),
    (SPEC.replace("d_ff = 80", "d_model = 80"), 'unknown key "d_model"'),
    (SPEC.replace("  encoder = none\n", "  encoder = none\n  layer x { start = 9 }\n"), "starts at index 9"),
])
def test_bad_kinds_are_located_errors(text, needle):
    with pytest.raises(SpecError) as err:
        _load(text)
    assert needle in str(err.value) and err.value.span is not None


def test_one_unit_per_kind_explicit_equals_fused_and_decoding_equals_forward():
    spec = _load()
    torch.manual_seed(0)
    fused = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    layers = fused.program.members["decoder"].members["layers"].units
    assert [u.name for u in layers] == ["FirstDecoderLayer", "GlobalDecoderLayer", "DecoderLayer",
                                        "GlobalDecoderLayer", "DecoderLayer"]
    assert layers[1] is layers[3] and layers[2] is layers[4]
    explicit = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    explicit.load_state_dict(fused.state_dict())
    tokens = torch.randint(5, 64, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = explicit(tokens)
        assert (fused(tokens) - expected).abs().max() < 1e-12
        cache = fused.init_cache(tokens)
        for t in range(tokens.shape[1]):
            logits, cache = fused.decode_step(tokens[:, t : t + 1], cache)
            assert (logits - expected[:, t]).abs().max() < 1e-12, t
    assert fused.state_dict()["decoder.layers.1.ffn.fc1.weight"].shape == (80, 32)


def test_flops_and_the_report_follow_the_kinds():
    spec = _load()
    model = compile_spec(spec, device="meta")
    assert training_flops(model) == counted_on_meta(model)
    report = build_report(model)
    assert report.layer_kinds == [{"stack": "decoder", "kind": "first", "layers": 1},
                                  {"stack": "decoder", "kind": "global", "layers": 2},
                                  {"stack": "decoder", "kind": "decoder", "layers": 2}]
    assert "layer kinds     decoder: 1 x first, decoder: 2 x global, decoder: 2 x decoder" in format_report(report)


SHARED = """model shared {
  d_model = 32  heads = 4  d_ff = 48  vocab = shared(64)  attention = local(window = 2)
  layer global { every = 2  start = 1  attention = scaled_dot }
  encoder { layers = 4 }
  decoder { layers = 2  layer global { d_ff = 80 }  layer first { count = 1  norm = pre } }
  dropout { residual = 0.0  embedding = 0.0 }
}
"""


def test_a_kind_written_in_model_is_a_kind_of_every_stack_and_a_stack_sets_keys_over_it():
    spec = _load(SHARED, "model.layer.global.every=3")
    enc, dec = spec.model.encoder.layer_plan(), spec.model.decoder.layer_plan()
    assert [(k, s.attention.kind) for k, s in enc] == [("", "local"), ("global", "scaled_dot"), ("", "local"),
                                                       ("", "local")]
    assert [(k, s.attention.kind, s.d_ff) for k, s in dec] == [("first", "local", 48), ("global", "scaled_dot", 80)]
    assert ir.load_flat(ir.to_text(spec), "<again>") == spec  # the canonical text writes each stack's kinds


def test_a_shared_kind_that_misses_a_stack_is_located_at_its_line():
    with pytest.raises(SpecError) as err:
        _load(SHARED.replace("start = 1", "start = 3"))
    assert "layer global starts at index 3, but the decoder has 2 layers" in str(err.value)
    assert err.value.span.line == 3


def test_layer_kinds_come_from_another_file_through_extends(tmp_path):
    (tmp_path / "base.attn").write_text(SHARED)
    (tmp_path / "child.attn").write_text('extends "base.attn"\nmodel { decoder { layer global { d_ff = 16 } } }\n')
    spec = ir.load(tmp_path / "child.attn")
    assert [(k, s.d_ff) for k, s in spec.model.decoder.layer_plan()] == [("first", 48), ("global", 16)]
    assert [k for k, _ in spec.model.encoder.layer_plan()] == ["", "global", "", "global"]


ROPE_BASES = """model bases {
  d_model = 32  heads = 4  d_ff = 48  vocab = shared(64)  tie = decoder  positions = rope(base = 100)
  encoder = none
  decoder {
    layers = 4  norm = pre  attention = local(window = 2)
    layer global { every = 2  start = 1  attention = scaled_dot  rope_base = 5000 }
  }
  dropout { residual = 0.0  embedding = 0.0 }
}
"""


def test_a_kind_with_its_own_rope_base_reads_its_own_table(tmp_path):
    from tests.codegen.test_generated import rendered_module

    spec = _load(ROPE_BASES)
    torch.manual_seed(0)
    fused = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    explicit = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    explicit.load_state_dict(fused.state_dict())
    same_base = attncomp.compile(_load(ROPE_BASES.replace("  rope_base = 5000", "")), dtype=torch.float64).eval()
    same_base.load_state_dict(fused.state_dict())
    generated = rendered_module(spec, tmp_path, "bases", model=fused).Model().double().eval()
    generated.load_state_dict(fused.state_dict())
    tokens = torch.randint(5, 64, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = explicit(tokens)
        assert (fused(tokens) - expected).abs().max() < 1e-12
        assert (generated(tokens) - expected).abs().max() < 1e-9
        assert (same_base(tokens) - expected).abs().max() > 1e-6  # the base reaches the global layers
        cache = fused.init_cache(tokens)
        for t in range(tokens.shape[1]):
            logits, cache = fused.decode_step(tokens[:, t : t + 1], cache)
            assert (logits - expected[:, t]).abs().max() < 1e-12, t
    text = (tmp_path / "bases.py").read_text()
    assert "rope_2 = ops.rope_table(" in text and "5000" in text


def test_rope_base_needs_rotary_positions():
    with pytest.raises(SpecError) as err:
        _load(ROPE_BASES.replace("positions = rope(base = 100)", "positions = alibi"))
    assert "rope_base in the decoder needs positions = rope, not alibi" in str(err.value)
    assert err.value.span.line == 6


def test_the_plan_resolves_each_layers_rotation_once():
    """Given positions, layer_plan gives each layer its rotation: the kind's, else the stack's, else
    positions'; the lowering reads only the layer (lower.positions.rotation)."""
    from attncomp.lower.positions import rotation

    spec = _load(ROPE_BASES.replace("positions = rope(base = 100)",
                                    "positions = rope(base = 100, scaling = linear(factor = 2))"))
    decoder = spec.model.decoder
    assert [(s.rope_base, s.rope_scaling) for _, s in decoder.layer_plan()][:2] == [(None, None), (5000, None)]
    resolved = [rotation(s) for _, s in decoder.layer_plan(spec.model.positions)]
    linear = spec.model.positions.scaling
    assert linear.kind == "linear" and resolved == [(100, linear), (5000, linear)] * 2
    own = _load(ROPE_BASES.replace("layers = 4", "layers = 4  rope_base = 700"))
    assert [rotation(s)[0] for _, s in own.model.decoder.layer_plan(own.model.positions)] == [700, 5000] * 2
    with pytest.raises(ValueError, match="resolved plan"):
        rotation(decoder.layer_plan()[0][1])


def test_layer_kind_keys_are_the_stack_fields_marked_per_layer():
    """One source of truth: LayerKind's keys (and LAYER_KEYS) are made from the Stack's per_layer marks,
    each optional, accepting what the stack's key accepts."""
    from pydantic import ValidationError

    from attncomp.ir import nodes

    marked = sorted((nodes.layer_place(f), k) for k, f in nodes.Stack.model_fields.items()
                    if nodes.layer_place(f) is not None)
    assert nodes.LAYER_KEYS == tuple(k for _, k in marked)
    assert list(nodes.LayerKind.model_fields) == ["name", "every", "start", "count", *nodes.LAYER_KEYS]
    stack = nodes.DecoderSpec(rope_base=10.0, rope_scaling=nodes.LinearScaling(factor=2.0))
    for key in nodes.LAYER_KEYS:
        kind = nodes.LayerKind(name="k", **{key: getattr(stack, key)})
        assert kind.changes() == {key: getattr(kind, key)} and nodes.LayerKind(name="k").changes() == {}
    for key, bad in (("d_ff", 0), ("norm", "middle"), ("attention", {"kind": "nope"}), ("rope_base", -1.0)):
        with pytest.raises(ValidationError):
            nodes.Stack(**{key: bad})
        with pytest.raises(ValidationError):
            nodes.LayerKind(name="k", **{key: bad})
