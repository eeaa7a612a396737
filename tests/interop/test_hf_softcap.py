"""Final-logit soft-capping equals transformers' Gemma2ForCausalLM in float64: a spec with
`logit_softcap`, sandwich norms with Gemma's (1 + w) RMSNorm, the tanh GeGLU and alternating local and
global layers, its weights mapped here by hand. The model is made with attn_logit_softcapping = None and
query_pre_attn_scalar = head_dim (the default score scale), so this spec isolates the final cap;
tests/interop/test_hf_gemma2.py imports a Gemma 2 with both caps and its own score scale through the
family table."""

from __future__ import annotations

import re

import pytest
import torch

from attncomp import ir
from attncomp.passes import DEFAULT_PASSES
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
TOLERANCE = 1e-12
CAP = 2.0  # small enough that random weights' logits are capped hard

SPEC = f"""
model gemma2 {{
  d_model = 32  heads = 4  kv_heads = 2  d_k = 16  d_v = 16  d_ff = 48
  vocab = shared(64)  tie = decoder  positions = rope(base = 10000.0)  bias = false  norm_eps = 1e-6
  logit_softcap = {CAP}
  decoder {{
    layers = 4  norm = sandwich  normalization = rmsnorm(offset = 1)  activation = geglu_tanh
    attention = local(window = 3)
    layer global {{ start = 1  every = 2  attention = scaled_dot }}
  }}
  dropout {{ residual = 0.0 }}
}}
"""
RENAMES = ((r"model\.embed_tokens\.", "tgt_embed."), (r"model\.norm\.", "decoder.norm."),
           (r"model\.layers\.", "decoder.layers."), (r"\.mlp\.gate_proj\.", ".ffn.gate."),
           (r"\.mlp\.up_proj\.", ".ffn.fc1."), (r"\.mlp\.down_proj\.", ".ffn.fc2."),
           (r"\.input_layernorm\.", ".self_attn_norm."), (r"\.post_attention_layernorm\.", ".self_attn_output_norm."),
           (r"\.pre_feedforward_layernorm\.", ".ffn_norm."), (r"\.post_feedforward_layernorm\.", ".ffn_output_norm."))


def _ours(state: dict) -> dict:
    out = {}
    for key, tensor in state.items():
        if key == "lm_head.weight":  # tied to the embedding
            continue
        for pattern, replacement in RENAMES:
            key = re.sub(pattern, replacement, key)
        out[key] = tensor
    return out


@pytest.mark.parametrize("passes", ["fused", "unfused"])
def test_final_logit_softcapping_equals_gemma2(passes, monkeypatch):
    config = transformers.Gemma2Config(
        vocab_size=64, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=48, num_hidden_layers=4, max_position_embeddings=64, query_pre_attn_scalar=16,
        attn_logit_softcapping=None, final_logit_softcapping=CAP, sliding_window=4, rms_norm_eps=1e-6,
        hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, pad_token_id=None, bos_token_id=None,
        eos_token_id=None)
    config._attn_implementation = "eager"  # Gemma 2 has no other
    # attn_logit_softcapping=None: no soft-cap reaches it
    monkeypatch.setattr(transformers.models.gemma2.modeling_gemma2, "eager_attention_forward",
                        hf_models.eager_attention_float64)
    assert config.layer_types == ["sliding_attention", "full_attention"] * 2
    torch.manual_seed(0)
    hf = transformers.Gemma2ForCausalLM(config).to(torch.float64).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.add_(torch.randn_like(p) * (0.3 if "norm" in name else 0.1))
    hf_models.float64_exact(monkeypatch, hf)
    ours = hf_models.compiled(ir.load(SPEC), _ours(hf.state_dict()), DEFAULT_PASSES if passes == "fused" else ())
    tokens = torch.randint(3, 64, (2, 9), generator=torch.Generator().manual_seed(1))  # past the window of 4
    with torch.no_grad():
        expected = hf(tokens).logits
        raw = ours.hidden(tokens) @ ours.tgt_embed.weight.T
        assert (raw - expected).abs().max() > 0.5  # the cap bites: without it the logits differ
    hf_models.assert_same_logits(ours, expected, tokens, atol=TOLERANCE)
