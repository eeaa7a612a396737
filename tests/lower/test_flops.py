"""lower.flops counts the matrix products of the compiled graphs from their nodes' shapes: what
FlopCounterMode counts on meta tensors, and what the IR's hand model (attncomp/ir/flops.py, removed)
gave for every shipped spec (tests/fixtures/flops_before.json, written by that code before it went)."""

from __future__ import annotations

import json

import pytest
import torch

from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.lower.flops import UncountedError, counted_on_meta, forward_flops, training_flops
from attncomp.lower.units import Builder, Unit
from tests.conftest import ROOT, SPECS, spec_id
from tests.helpers import small
from tests.passes.test_fuse_numerics import EXTRA

BEFORE = json.loads((ROOT / "tests/fixtures/flops_before.json").read_text())

# every architecture the shipped specs have (the other Table 3 rows change only sizes), and the variants
SHAPES = ("base", "big", "table3/A1", "table3/B1", "table3/E", "examples/lm", "examples/local", "examples/tiny",
          "examples/bert", "examples/novel", "examples/t5", "examples/diff_shared", "examples/diff_cla",
          "examples/prefix_sigmoid")  # (MoE routing, data-dependent, runs on no meta tensor)
CASES = [(spec_id(p), ir.load(p)) for p in SPECS if spec_id(p) in SHAPES] + [
    (name, ir.load(ROOT / "specs/base.attn", o)) for name, o in EXTRA.items()]


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_every_shipped_spec_counts_what_the_ir_model_did(path):
    spec = ir.load(path)
    assert training_flops(compile_spec(spec, device="meta")) == BEFORE["specs"][spec_id(path)]
    assert training_flops(compile_spec(small(spec), device="meta")) == BEFORE["small"][spec_id(path)]


@pytest.mark.parametrize("name", list(EXTRA))
def test_every_variant_counts_what_the_ir_model_did(name):
    spec = ir.load(ROOT / "specs/base.attn", EXTRA[name])
    assert training_flops(compile_spec(spec, device="meta")) == BEFORE["variants"][name]


@pytest.mark.parametrize("name, spec", CASES, ids=[c[0] for c in CASES])
def test_equals_the_counter_on_meta(name, spec):
    model = compile_spec(small(spec), device="meta")  # shallow and narrow: every term kept, cheap on meta
    assert training_flops(model) == counted_on_meta(model)


@pytest.mark.parametrize("name", ["base", "examples/lm", "examples/bert", "examples/t5"])
def test_source_and_target_lengths_apart(name):
    model = compile_spec(small(ir.load(ROOT / f"specs/{name}.attn")), device="meta")
    assert training_flops(model, 3, 24, 40) == counted_on_meta(model, 3, 24, 40)
    assert training_flops(model, 3, 24, 40) != training_flops(model, 3, 40, 24) or \
        model.spec.model.encoder is None or model.spec.model.decoder is None


def test_unfused_graph_counts_the_same():
    spec = small(ir.load(ROOT / "specs/base.attn", EXTRA["local_decoder"]))
    assert training_flops(compile_spec(spec, passes=(), device="meta")) == \
        training_flops(compile_spec(spec, device="meta"))


def test_base_figure():
    """The base model's 0.385 GFLOP per target token of the build report (docs/compiler.md)."""
    assert round(training_flops(compile_spec(ir.load(ROOT / "specs/base.attn"), device="meta")) / 1e9, 3) == 0.385


def test_a_product_without_shapes_is_refused():
    unit = Unit("Bare", "a matmul whose operands' shapes were not recorded")
    b = Builder(unit, "forward")
    x, y = b.input("x"), b.input("y")
    b.output(b.call(torch.matmul, x, y, name="out"))
    with pytest.raises(UncountedError, match="matmul"):
        forward_flops(unit, 1, 1, 1)


def test_a_product_is_counted_from_its_shapes():
    unit = Unit("Product", "(batch, tgt_len, 4) @ (4, 3)")
    b = Builder(unit, "forward")
    x, w = b.input("x", ("batch", "tgt_len", 4)), b.input("w", (4, 3))
    b.output(b.call(torch.matmul, x, w, name="out"))
    assert forward_flops(unit, 5, 1, 7) == 2 * 5 * 7 * 4 * 3
