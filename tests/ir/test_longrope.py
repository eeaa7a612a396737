"""`rope(scaling = longrope(...))`: lists of numbers in the language (`[1.0, 1.25]`), their canonical text and
located errors, and the lowering's short and long factors, fused against unfused (transformers' Phi-3 and Llama
in float64: tests/interop/test_hf_rope_scaling.py)."""

from __future__ import annotations

import math

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.compiler import DEFAULT_PASSES
from attncomp.errors import SpecError
from attncomp.lower import ops

SHORT = "[1.0, 1.5, 1, 2.0]"
LONG = "[2.0, 3.0, 4.5, 8.0,]"  # a trailing comma is allowed


def _spec(scaling: str, d_k: int = 8) -> str:
    return (f"model lr {{\n  d_model = 16  heads = 2  d_k = {d_k}  vocab = shared(40)  tie = decoder\n"
            f"  positions = rope(base = 500.0, scaling = {scaling})\n  decoder {{ layers = 1  norm = pre }}\n}}\n")


def _longrope(short: str = SHORT, long: str = LONG, rest: str = "original_max_len = 6, factor = 3.0") -> str:
    return f"longrope(short_factor = {short}, long_factor = {long}, {rest})"


def test_canonical_text_writes_the_lists_and_parses_back_to_the_same_spec():
    spec = ir.load_flat(_spec(_longrope()), "<test>")
    text = ir.to_text(spec)
    assert ("scaling = longrope(short_factor = [1.0, 1.5, 1.0, 2.0], long_factor = [2.0, 3.0, 4.5, 8.0], "
            "original_max_len = 6, factor = 3.0)") in text
    assert ir.load_flat(text, "<canonical>") == spec


@pytest.mark.parametrize("scaling,message,column", [
    (_longrope(long="[2.0, 3.0, 4.5]"), "long_factor has 3 factor(s), but the decoder rotates 8 dims in 4 pairs",
     None),
    (_longrope(short="[1.0, 1.5, -1, 2.0]"), "short_factor[2] must be greater than 0.0", "1, 2.0]"),
    (_longrope(short="[1.0, 1.5, x, 2.0]"), "short_factor must be a number", "x"),
    (_longrope(short="1.5"), "short_factor must be a list of numbers in brackets", "1.5"),
    (_longrope(short="[]"), "short_factor takes at least 1 item(s), got 0", None),
    (_longrope(rest="original_max_len = 6"), "longrope(...) needs factor", None),
    (_longrope(rest="original_max_len = 6, factor = 0.5"), "factor must be at least 1.0", "factor = 0.5"),
    ("linear(factor = [2.0])", "factor must be a number", "["),
])
def test_bad_factors_are_one_located_error(scaling, message, column):
    text = _spec(scaling)
    with pytest.raises(SpecError) as err:
        ir.load_flat(text, "bad.attn")
    assert message in str(err.value)
    span = err.value.span
    assert span.path == "bad.attn" and span.line == 3
    if column is not None:
        assert text.splitlines()[2][span.column - 1:].startswith(column)


def test_the_table_takes_the_long_factors_past_the_original_length():
    """ops.scaled_rope_table: short factors while the last position + 1 <= original_max_len, long ones past it,
    cos and sin times sqrt(1 + ln(factor) / ln(original_max_len))."""
    short, long = (1.0, 2.0), (4.0, 8.0)
    args = dict(scaling="longrope", factor=3.0, original_max_len=6, short_factor=short, long_factor=long)
    scale = math.sqrt(1 + math.log(3.0) / math.log(6))
    for length, factors in ((6, short), (7, long)):
        positions = torch.arange(length)
        table = ops.scaled_rope_table(positions, 4, 500.0, torch.float64, **args)
        inv_freq = 1.0 / (torch.tensor(factors, dtype=torch.float64) * 500.0 ** (torch.arange(0, 4, 2, dtype=torch.float64) / 4))
        angles = positions.to(torch.float64)[:, None] * inv_freq
        angles = torch.cat((angles, angles), dim=-1)
        assert torch.allclose(table, torch.stack((angles.cos(), angles.sin())) * scale, rtol=1e-15, atol=0)
    given = ops.scaled_rope_table(torch.arange(3), 4, 500.0, torch.float64, **{**args, "attention_factor": 1.5})
    assert torch.allclose(given[0, 0], torch.full((4,), 1.5, dtype=torch.float64))


@pytest.mark.parametrize("length", [6, 9])
def test_fused_equals_unfused_and_cached_decoding_below_and_past_the_original_length(length):
    spec = ir.load_flat(_spec(_longrope()), "<test>")
    torch.manual_seed(0)
    fused = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    unfused = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    unfused.load_state_dict(fused.state_dict())
    tokens = torch.randint(5, 40, (2, length), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = fused(tokens)
        assert (full - unfused(tokens)).abs().max() < 1e-12
        cache = fused.init_cache(tokens)
        for t in range(length):  # each step rotates its token at L = t + 1: short up to 6, long past it
            step, cache = fused.decode_step(tokens[:, t: t + 1], cache)
            if t < 6:
                assert (step.reshape(2, -1) - fused(tokens[:, : t + 1])[:, t]).abs().max() < 1e-12
