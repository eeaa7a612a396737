"""Biases: attention and feed-forward have their own keys; parameter counts with and without them."""

from __future__ import annotations

from functools import cache

import pytest

import attncomp
from attncomp import ir
from attncomp.errors import SpecError
from attncomp.report import count_params
from tests.conftest import ROOT

BASE = ROOT / "specs/base.attn"


def _paper_count(d: int, d_ff: int, layers: int, vocab: int, attention_bias: bool, ffn_bias: bool) -> int:
    """The base model's parameters by hand: per attention W^Q, W^K, W^V, W^O (h * d_k = d_model)."""
    attention = 4 * d * d + (4 * d if attention_bias else 0)
    ffn = 2 * d * d_ff + (d_ff + d if ffn_bias else 0)
    norm = 2 * d
    encoder = layers * (attention + ffn + 2 * norm)
    decoder = layers * (2 * attention + ffn + 3 * norm)
    return vocab * d + encoder + decoder  # one shared embedding = pre-softmax weight


def _count(overrides: list[str]) -> int:
    return _count_of(tuple(overrides))


@cache
def _count_of(overrides: tuple[str, ...]) -> int:
    """The build report's count (each tied tensor once), of a model on the meta device."""
    return count_params(attncomp.compile(ir.load(BASE, list(overrides)), device="meta", passes=()))[0]


@pytest.mark.parametrize("overrides, attention, ffn", [
    ([], False, True),  # the paper's form, as specs/base.attn writes it
    (["model.bias=true"], True, True),  # what `bias = true` always meant: torch.nn.Transformer's form
    (["model.bias=false"], False, False),
    (["model.bias.attention=true", "model.bias.ffn=false"], True, False),
])
def test_base_parameter_count_with_and_without_attention_biases(overrides, attention, ffn):
    spec = ir.load(BASE, overrides)
    assert (spec.model.bias.attention, spec.model.bias.ffn) == (attention, ffn)
    assert _count(overrides) == _paper_count(512, 2048, 6, 37000, attention, ffn)


def test_the_paper_form_drops_exactly_the_attention_biases():
    # 18 attentions (6 encoder self, 6 decoder self, 6 cross) x 4 projections x 512
    assert _count(["model.bias=true"]) - _count([]) == 18 * 4 * 512
    assert _count([]) == 63_045_632


def test_a_spec_that_never_named_biases_keeps_both():
    spec = ir.load("model m { d_model = 64  heads = 4  d_ff = 128  vocab = shared(100)  encoder { } decoder { } }")
    assert (spec.model.bias.attention, spec.model.bias.ffn) == (True, True)


def test_old_scalar_bias_in_a_stored_spec_means_both():
    text = ir.to_text(ir.load(BASE)).replace("  bias {\n    attention = false\n    ffn = true\n  }\n",
                                             "  bias = false\n")
    assert "bias = false" in text
    spec = ir.load_flat(text, "checkpoint.pt")  # how a checkpoint's stored spec is read
    assert (spec.model.bias.attention, spec.model.bias.ffn) == (False, False)


def test_a_bias_that_is_not_true_or_false_is_located():
    with pytest.raises(SpecError) as err:
        ir.load('extends "base.attn"\nmodel { bias = 3 }', directory=str(ROOT / "specs"))
    assert "bias must be true, false or a block" in str(err.value)
    assert err.value.span.line == 2
