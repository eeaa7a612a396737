"""fairseq's sinusoids as a spec choice: M2M100ForConditionalGeneration (pre-norm encoder-decoder with final
norms, embeddings scaled by sqrt(d_model), sines then cosines at frequencies 10000^(-i/(d/2 - 1)) from
position padding_idx + 1 = 2) is `positions = sinusoidal(layout = halves, timescales = tensor2tensor,
offset = 2)` with `norm = pre`; equal to transformers' model in float64, forward fused and unfused and
cached decoding step by step. The spec is written by hand, the weights renamed here."""

from __future__ import annotations

import re

import pytest
import torch

from attncomp import ir
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding  # noqa: E402

SPEC = """model m2m100 {
  d_model = 32  heads = 4  d_ff = 48  vocab = shared(64)  tie = all
  positions = sinusoidal(layout = halves, timescales = tensor2tensor, offset = 2)
  scale_embeddings = true  norm = pre  final_norm = true
  encoder { layers = 2 }
  decoder { layers = 2 }
  dropout { residual = 0.0  embedding = 0.0 }
}
"""
RENAMES = (
    (r"model\.shared\.weight", "embed.weight"),
    (r"model\.(encoder|decoder)\.layers\.(\d+)\.self_attn\.out_proj\.", r"\1.layers.\2.self_attn.o_proj."),
    (r"model\.(encoder|decoder)\.layers\.(\d+)\.self_attn\.([qkv])_proj\.", r"\1.layers.\2.self_attn.\3_proj."),
    (r"model\.decoder\.layers\.(\d+)\.encoder_attn\.out_proj\.", r"decoder.layers.\1.cross_attn.o_proj."),
    (r"model\.decoder\.layers\.(\d+)\.encoder_attn\.([qkv])_proj\.", r"decoder.layers.\1.cross_attn.\2_proj."),
    (r"model\.(encoder|decoder)\.layers\.(\d+)\.self_attn_layer_norm\.", r"\1.layers.\2.self_attn_norm."),
    (r"model\.decoder\.layers\.(\d+)\.encoder_attn_layer_norm\.", r"decoder.layers.\1.cross_attn_norm."),
    (r"model\.(encoder|decoder)\.layers\.(\d+)\.(fc1|fc2)\.", r"\1.layers.\2.ffn.\3."),
    (r"model\.(encoder|decoder)\.layers\.(\d+)\.final_layer_norm\.", r"\1.layers.\2.ffn_norm."),
    (r"model\.(encoder|decoder)\.layer_norm\.", r"\1.norm."),
)
TIED = (r"model\.(encoder|decoder)\.embed_tokens\.weight", r"lm_head\.weight")


def _renamed(state: dict) -> dict:
    out = {}
    for key, tensor in state.items():
        if any(re.fullmatch(pattern, key) for pattern in TIED):
            assert torch.equal(tensor, state["model.shared.weight"])
            continue
        for pattern, replacement in RENAMES:
            renamed, hits = re.subn(f"^{pattern}", replacement, key)
            if hits:
                out[renamed] = tensor
                break
        else:
            raise AssertionError(f"unmapped {key}")
    return out


pytestmark = pytest.mark.usefixtures("one_thread")


def test_m2m100_forward_and_cached_decoding_equal_hf_in_float64():
    config = transformers.M2M100Config(
        vocab_size=64, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=64,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    hf = transformers.M2M100ForConditionalGeneration(config).double().eval()
    with torch.no_grad():
        for module in hf.modules():  # fairseq's table, computed in float32 by HF: again in float64
            if isinstance(module, M2M100SinusoidalPositionalEmbedding):
                module.weights = hf_models.fairseq_sinusoids(*module.weights.shape, module.padding_idx)
        for name, p in hf.named_parameters():
            one = 1.0 if "norm" in name and name.endswith("weight") else 0.0
            p.copy_(one + 0.3 * torch.randn(p.shape, dtype=p.dtype))
    ours = hf_models.compiled(ir.load_flat(SPEC, "<m2m100>"), _renamed(hf.state_dict()))
    g = torch.Generator().manual_seed(1)
    src, tgt = torch.randint(5, 64, (2, 7), generator=g), torch.randint(5, 64, (2, 6), generator=g)
    with torch.no_grad():
        expected = hf(input_ids=src, decoder_input_ids=tgt).logits
    hf_models.assert_same_logits(ours, expected, src, tgt, rtol=1e-12, unfused=True)


def test_the_new_sinusoid_keys_stay_out_of_the_canonical_text_at_their_defaults():
    plain = ir.load_flat(SPEC.replace(", timescales = tensor2tensor, offset = 2", ""), "<a>")
    assert "positions = sinusoidal(layout = halves)\n" in ir.to_text(plain)
    assert "timescales = tensor2tensor, offset = 2" in ir.to_text(ir.load_flat(SPEC, "<b>"))
