"""The bias block per projection: the resolution rule, the canonical text, and old specs unchanged."""

from __future__ import annotations

import pytest

from attncomp import ir
from tests.conftest import ROOT

BASE = ROOT / "specs/base.attn"


@pytest.mark.parametrize("sets, biased", [
    ([], {"q", "k", "v", "o", "fc1", "fc2"}),
    (["model.bias.attention=false", "model.bias.o=true"], {"o", "fc1", "fc2"}),
    (["model.bias=false", "model.bias.fc1=true"], {"fc1"}),
    (["model.bias=true", "model.bias.k=false"], {"q", "v", "o", "fc1", "fc2"}),
])
def test_a_projection_key_wins_and_an_unset_one_takes_its_group(sets, biased):
    bias = ir.load(BASE, ["model.bias=true"] + sets).model.bias
    assert {p for p in ("q", "k", "v", "o", "fc1", "fc2") if bias.of(p)} == biased
    assert bias.output is False  # `bias = true` never sets the output bias


def test_per_projection_keys_survive_the_canonical_text():
    spec = ir.load(BASE, ["model.bias.q=false", "model.bias.fc2=false", "model.bias.output=true"])
    again = ir.load_flat(ir.to_text(spec), "<canonical>")
    assert again == spec and again.model.bias.of("q") is False and again.model.bias.output


def test_specs_that_do_not_use_the_new_keys_keep_their_canonical_text():
    """A checkpoint's stored text and a sweep's recorded hash stay those of today's canonical text."""
    text = ir.to_text(ir.load(BASE))
    assert "bias {\n    attention = false\n    ffn = true\n  }" in text
    for key in ("output =", "embedding_norm", "head =", "mlm", " q =", " fc1 ="):
        assert key not in text
    assert ir.spec_hash(ir.load(BASE)) in (ROOT / "generated/base.py").read_text()
