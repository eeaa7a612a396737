"""ir.flops counts, from the IR alone, what the build report's FlopCounterMode counts on meta tensors."""

from __future__ import annotations

import pytest

from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.ir.flops import training_flops
from attncomp.report import count_flops
from tests.conftest import ROOT, SPECS, spec_id
from tests.helpers import small
from tests.passes.test_fuse_numerics import EXTRA

# every architecture the shipped specs have (the other Table 3 rows change only sizes), and the variants
SHAPES = ("base", "big", "table3/A1", "table3/B1", "table3/E", "examples/lm", "examples/local", "examples/tiny",
          "examples/bert")
CASES = [(spec_id(p), ir.load(p)) for p in SPECS if str(p.relative_to(ROOT / "specs"))[:-5] in SHAPES] + [
    (name, ir.load(ROOT / "specs/base.attn", o)) for name, o in EXTRA.items()]


@pytest.mark.parametrize("name, spec", CASES, ids=[c[0] for c in CASES])
def test_equals_the_counter_on_meta(name, spec):
    spec = small(spec)  # shallow and narrow: every term kept, cheap to run on meta tensors
    assert training_flops(spec) == count_flops(compile_spec(spec, device="meta"))


def test_unfused_graph_counts_the_same():
    spec = small(ir.load(ROOT / "specs/base.attn", EXTRA["local_decoder"]))
    assert training_flops(spec) == count_flops(compile_spec(spec, passes=(), device="meta"))


def test_base_figure():
    """The base model's 0.385 GFLOP per target token of the build report (docs/compiler.md)."""
    assert round(training_flops(ir.load(ROOT / "specs/base.attn")) / 1e9, 3) == 0.385
