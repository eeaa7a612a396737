"""`attncomp demo` trains the same model as specs/examples/tiny.attn."""

from __future__ import annotations

from attncomp import ir
from attncomp.cli.demo_command import TINY_SPEC
from tests.conftest import ROOT


def test_demo_spec_is_the_tiny_spec():
    assert ir.load(TINY_SPEC) == ir.load(ROOT / "specs/examples/tiny.attn")
