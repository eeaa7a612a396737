"""Multi-head latent attention (`attention = latent(...)`) equal to transformers' DeepseekV3ForCausalLM (DeepSeek-V2's
MLA, with dense feed-forwards: every layer before first_k_dense_replace) in float64, with and without query
compression: the full forward, fused and unfused, and cached decoding over the compressed cache. HF's rotary
pairs are set to halves (rope_interleave = false, attncomp's rotate_half layout); HF's float32 steps in RMSNorm
and the rotary angles are kept in float64. The spec is written by hand, the weights renamed here."""

from __future__ import annotations

import pytest
import torch

from attncomp import ir
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
pytest.importorskip("transformers.models.deepseek_v3.modeling_deepseek_v3")

CONFIG = dict(vocab_size=64, hidden_size=32, num_attention_heads=4, num_key_value_heads=4, intermediate_size=48,
              moe_intermediate_size=16, num_hidden_layers=2, first_k_dense_replace=2, n_routed_experts=4,
              num_experts_per_tok=2, n_group=1, topk_group=1, kv_lora_rank=12, qk_rope_head_dim=8,
              qk_nope_head_dim=16, v_head_dim=8, rope_interleave=False, rms_norm_eps=1e-6, attention_bias=False,
              tie_word_embeddings=False, max_position_embeddings=64, bos_token_id=None, eos_token_id=None,
              pad_token_id=None)
NAMES = {"self_attn.q_proj": "self_attn.q_proj", "self_attn.q_a_proj": "self_attn.q_down_proj",
         "self_attn.q_a_layernorm": "self_attn.q_latent_norm", "self_attn.q_b_proj": "self_attn.q_up_proj",
         "self_attn.kv_a_proj_with_mqa": "self_attn.kv_down_proj",
         "self_attn.kv_a_layernorm": "self_attn.kv_latent_norm",
         "self_attn.kv_b_proj": "self_attn.kv_up_proj", "self_attn.o_proj": "self_attn.o_proj",
         "mlp.gate_proj": "ffn.gate", "mlp.up_proj": "ffn.fc1", "mlp.down_proj": "ffn.fc2",
         "input_layernorm": "self_attn_norm", "post_attention_layernorm": "ffn_norm"}


def _spec(q_rank: int) -> str:
    latent = f"latent(kv_rank = 12, rope_dims = 8{f', q_rank = {q_rank}' if q_rank else ''})"
    return f"""model mla {{
  d_model = 32  heads = 4  d_k = 24  d_v = 8  d_ff = 48
  vocab = shared(64)  tie = none  positions = rope(base = 10000.0)  scale_embeddings = false
  bias = false  norm_eps = 1e-06
  encoder = none
  decoder {{ layers = 2  norm = pre  normalization = rmsnorm  activation = swiglu  attention = {latent} }}
  dropout {{ residual = 0.0  embedding = 0.0 }}
}}
"""


pytestmark = pytest.mark.usefixtures("one_thread")


def _float64_hf(q_rank: int, monkeypatch):
    config = transformers.DeepseekV3Config(**CONFIG, q_lora_rank=q_rank or None)
    config._attn_implementation = "sdpa"  # eager takes the softmax in float32
    torch.manual_seed(0)
    hf = transformers.DeepseekV3ForCausalLM(config).double().eval()
    with torch.no_grad():  # norms start at one: make every weight count
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.3 * torch.randn(p.shape, dtype=p.dtype))
    hf_models.float64_exact(monkeypatch, hf)  # DeepseekV3RMSNorm and DeepseekV3RotaryEmbedding
    return hf


def _ours(q_rank: int, hf) -> torch.nn.Module:
    return hf_models.compiled(ir.load_flat(_spec(q_rank), "<mla>"), hf_models.llama_like_state(hf, NAMES))


@pytest.mark.parametrize("q_rank", [0, 10])
def test_latent_attention_equals_deepseek_v3_in_float64(q_rank, monkeypatch):
    hf = _float64_hf(q_rank, monkeypatch)
    ours = _ours(q_rank, hf)
    tokens = torch.randint(5, 64, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(tokens).logits
    cache = hf_models.assert_same_logits(ours, expected, tokens, atol=1e-9, unfused=True)
    # the compressed cache: the latent (B, 1, T, kv_rank) and the shared rotary key (B, 1, T, rope_dims)
    assert {tuple(layer.self_attn.k.shape) + tuple(layer.self_attn.v.shape) for layer in cache.layers} == {
        (2, 1, 9, 12, 2, 1, 9, 8)}
