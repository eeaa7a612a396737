"""Multi-head latent attention (DeepSeek-V2), `attention = latent(kv_rank, rope_dims, q_rank)`: located errors for
what it cannot be combined with, the canonical text, fused == explicit and decode_step == forward in float64 over
its compressed cache, the generated module == the compiled one, and FLOPs from the IR == the counter. Equality
with transformers' DeepseekV3ForCausalLM: tests/interop/test_hf_latent.py."""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.errors import SpecError
from attncomp.lower.flops import counted_on_meta, training_flops
from attncomp.passes.fuse_attention import count_flex, count_fused
from tests.helpers import assert_decode_steps, assert_generated_equals_compiled, batch, first_cache, pair

BASE = """model mla {{
  vocab = shared(61)  d_model = 16  heads = 2  d_k = 12  d_v = 4  d_ff = 32  bias = false
  positions = rope  norm = pre  normalization = rmsnorm
  dropout {{ residual = 0  attention = 0 }}
  {model}
}}
"""
VARIANTS = {
    "lm": "decoder { layers = 2  attention = latent(kv_rank = 6, rope_dims = 4) }",
    # query compression, an encoder of latent attention too, and a local window in no layer
    "q_rank": "encoder { layers = 1  attention = latent(kv_rank = 6, rope_dims = 4, q_rank = 5) }\n"
              "decoder { layers = 2  attention = latent(kv_rank = 6, rope_dims = 4, q_rank = 5, scale = 0.25) }",
    # the dot-product parts every kind embeds (nodes.DotProduct): soft-capping and sinks (FlexAttention), a gate
    "parts": "decoder { layers = 2  attention = latent(kv_rank = 6, rope_dims = 4, softcap = 5, sinks = true, "
             "gate = true) }",
}


def spec_of(name: str):
    return ir.load_flat(BASE.format(model=VARIANTS[name]), f"{name}.attn")


@pytest.mark.parametrize("text, message", [
    ("decoder { attention = latent(kv_rank = 6) }", "rope_dims"),
    ("decoder { attention = latent(kv_rank = 6, rope_dims = 3) }", "must be even"),
    ("decoder { attention = latent(kv_rank = 6, rope_dims = 12) }", "below d_k"),
    ("decoder { kv_heads = 1  attention = latent(kv_rank = 6, rope_dims = 4) }", "no kv_heads"),
    ("decoder { qk_norm = head  attention = latent(kv_rank = 6, rope_dims = 4) }", "no qk_norm"),
    ("decoder { attention = latent(kv_rank = 6, rope_dims = 4, clip_qkv = 2) }", "no clip_qkv"),
    ("encoder { }\ndecoder { cross_attention = latent(kv_rank = 6, rope_dims = 4) }", "cross-attention cannot be"),
    ("decoder { layers = 2  attention = latent(kv_rank = 6, rope_dims = 4)\n"
     "          layer plain { start = 1  attention = scaled_dot } }", "one rotary table"),
])
def test_bad_combinations_are_located_errors(text, message):
    with pytest.raises(SpecError) as err:
        ir.load_flat(BASE.format(model=text), "bad.attn")
    assert message in str(err.value) and "bad.attn:" in str(err.value)


def test_latent_needs_rotary_positions_at_its_line():
    text = BASE.format(model="decoder { attention = latent(kv_rank = 6, rope_dims = 4) }").replace(
        "positions = rope", "positions = alibi")
    with pytest.raises(SpecError, match=r"bad.attn:3:.*needs positions = rope"):
        ir.load_flat(text, "bad.attn")


def test_canonical_text_round_trips():
    spec = spec_of("q_rank")
    text = ir.to_text(spec)
    assert "attention = latent(kv_rank = 6, rope_dims = 4, q_rank = 5)" in text
    assert ir.load_flat(text, "again.attn") == spec


def _compressed(t: int, cache) -> None:
    """The cache after decode step t holds the latent c^KV (kv_rank 6) and the shared rotary key k^R (rope_dims 4)."""
    assert cache.layers[0].self_attn.k.shape == (2, 1, t + 1, 6)  # c^KV
    assert cache.layers[0].self_attn.v.shape == (2, 1, t + 1, 4)  # k^R


@pytest.mark.parametrize("name", list(VARIANTS))
def test_fused_equals_explicit_and_decode_step_equals_forward(name):
    spec = spec_of(name)
    plain, fused = pair(spec)
    plain.eval(), fused.eval()
    src, tgt = batch(spec, b=2, s=7, t=8)
    tgt[:] = tgt[:1]
    both = spec.model.encoder is not None
    with torch.no_grad():
        full = plain(src, tgt) if both else plain(tgt)
        assert ((fused(src, tgt) if both else fused(tgt)) - full).abs().max() < 1e-9
        graph = fused.flat("forward").graph  # SDPA (FlexAttention for the soft cap): d_k = 12 for q . k, d_v = 4
        assert (count_flex(graph) if name == "parts" else count_fused(graph)) > 0
        assert_decode_steps(fused, first_cache(fused, src, tgt, both), tgt, full, 1e-9, each=_compressed)


@pytest.mark.slow  # rendering and importing the module: over 5 s on a loaded 2-core machine
@pytest.mark.parametrize("name", ["q_rank"])  # both compressions, an encoder and a decoder
def test_generated_module_equals_the_compiled_model(name, tmp_path):
    from tests.codegen.test_generated import rendered_module

    spec = spec_of(name)
    compiled = attncomp.compile(spec, dtype=torch.float64).eval()
    generated = rendered_module(spec, tmp_path, name, model=compiled).Model().double().eval()
    generated.load_state_dict(compiled.state_dict())
    assert_generated_equals_compiled(generated, compiled, spec, *batch(spec))


@pytest.mark.parametrize("name", list(VARIANTS))
def test_flops_from_the_graphs_equal_the_counter(name):
    model = compile_spec(spec_of(name), device="meta")
    assert training_flops(model) == counted_on_meta(model)
