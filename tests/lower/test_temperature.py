"""A per-head learned temperature on the scores, `temperature = true` (a part of every dot-product kind:
nodes.DotProduct): a vector of `heads` values multiplying q . k, 1 at initialisation. In float64: fused ==
explicit, decode_step == forward, FlexAttention where the other parts choose it, and the temperature equals
the scale it multiplies (every head at t, scale s: as scale = s * t)."""

from __future__ import annotations

import pytest
import torch

from attncomp import ir
from attncomp.passes.fuse_attention import count_flex, count_fused
from tests.helpers import assert_decode_steps, batch, first_cache, pair

BASE = """model tempered {{
  vocab = shared(61)  d_model = 16  heads = 2  d_ff = 32
  {positions}
  dropout {{ residual = 0  attention = 0 }}
  {model}
}}
"""
VARIANTS = {
    # encoder, decoder and cross-attention, SDPA; grouped k/v heads in the decoder
    "sdpa": ("", "encoder { layers = 1  attention = scaled_dot(temperature = true) }\n"
                 "decoder { layers = 2  kv_heads = 1  attention = scaled_dot(scale = 0.5, temperature = true)\n"
                 "          cross_attention = scaled_dot(temperature = true) }"),
    # a soft-capped window and sinks: FlexAttention; ALiBi's bias on the scores beside the temperature
    "flex": ("positions = alibi", "decoder { layers = 2  attention = local(window = 3, softcap = 20, "
                                  "temperature = true)\n"
                                  "          layer full { every = 2  start = 1  attention = scaled_dot(sinks = true, "
                                  "temperature = true) } }"),
    "latent": ("positions = rope  d_k = 12  d_v = 4",
               "decoder { layers = 2  attention = latent(kv_rank = 6, rope_dims = 4, temperature = true) }"),
}


def spec_of(name: str):
    positions, model = VARIANTS[name]
    return ir.load_flat(BASE.format(positions=positions, model=model), f"{name}.attn")


def _without(spec, parts: dict[str, str], weights: dict):
    """The model of `spec`'s canonical text with each of `parts` replaced (the temperature taken out), holding
    `weights` but the temperatures."""
    text = ir.to_text(spec)
    for old, new in parts.items():
        text = text.replace(old, new)
    assert "temperature" not in text
    model, _ = pair(ir.load_flat(text, "without.attn"))
    model.load_state_dict({k: v for k, v in weights.items() if not k.endswith("temperature")})
    return model.eval()


UNTEMPERED = {", temperature = true": "", "(temperature = true)": ""}


def _tempered(model, seed: int = 1) -> None:
    """Every temperature away from 1 (each head its own)."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if name.endswith("temperature"):
            p.data.copy_(torch.rand(p.shape, generator=g, dtype=p.dtype) * 2 - 0.5)


def _run(model, spec, src, tgt):
    return model(src, tgt) if spec.model.encoder is not None else model(tgt)


def test_canonical_text_writes_it_only_where_set():
    spec = spec_of("sdpa")
    text = ir.to_text(spec)
    assert "attention = scaled_dot(scale = 0.5, temperature = true)" in text
    assert ir.load_flat(text, "again.attn") == spec
    assert "temperature" not in ir.to_text(ir.load_flat(BASE.format(positions="", model="decoder { }"), "p.attn"))


@pytest.mark.parametrize("name", list(VARIANTS))
def test_one_value_per_head_and_one_at_initialisation(name):
    spec = spec_of(name)
    plain, _ = pair(spec)
    found = {n: p for n, p in plain.named_parameters() if n.endswith("temperature")}
    assert found and all(p.shape == (2,) for p in found.values())
    src, tgt = batch(spec)
    with torch.no_grad():
        off = _without(spec, UNTEMPERED, plain.state_dict())
        assert (_run(plain.eval(), spec, src, tgt) - _run(off, spec, src, tgt)).abs().max() < 1e-12


@pytest.mark.parametrize("name", list(VARIANTS))
def test_fused_equals_explicit_and_decode_step_equals_forward(name):
    spec = spec_of(name)
    plain, fused = pair(spec)
    _tempered(plain)
    fused.load_state_dict(plain.state_dict())
    plain.eval(), fused.eval()
    src, tgt = batch(spec, b=2, s=7, t=8)
    tgt[:] = tgt[:1]
    both = spec.model.encoder is not None
    graph = fused.flat("forward").graph
    assert (count_flex(graph) > 0) == (name == "flex") and count_fused(graph) + count_flex(graph) > 0
    with torch.no_grad():
        full = _run(plain, spec, src, tgt)
        assert (_run(fused, spec, src, tgt) - full).abs().max() < 1e-9
        off = _without(spec, UNTEMPERED, plain.state_dict())
        assert (full - _run(off, spec, src, tgt)).abs().max() > 1e-6  # the temperatures act
        assert_decode_steps(fused, first_cache(fused, src, tgt, both), tgt, full, 1e-9)


@pytest.mark.parametrize("name", ["sdpa", "flex"])
def test_a_temperature_equal_on_every_head_is_a_scale(name):
    """Every head at t = 2 on scale 0.5 (sdpa's decoder) or 1/sqrt(8) (the others): as the scale times 2, the
    soft cap applied after both."""
    spec = spec_of(name)
    plain, _ = pair(spec)
    for n, p in plain.named_parameters():
        if n.endswith("temperature"):
            p.data.fill_(1.0)  # the temperature is 1 + w: 2
    doubled = repr(2 / 8 ** 0.5)  # d_k = 8
    scaled = _without(spec, {"scale = 0.5, temperature = true": "scale = 1.0", ", temperature = true":
                             f", scale = {doubled}", "(temperature = true)": f"(scale = {doubled})"},
                      plain.state_dict())
    src, tgt = batch(spec)
    with torch.no_grad():
        assert (_run(plain.eval(), spec, src, tgt) - _run(scaled, spec, src, tgt)).abs().max() < 1e-12
