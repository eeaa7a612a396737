"""q/k normalisation and the OLMo 2 norm placement as spec choices, equal to Hugging Face's models:

    Qwen3ForCausalLM   LLaMA's block with RMSNorm of q and k per head (qk_norm = head)
    Olmo2ForCausalLM   RMSNorm of the whole q and k projections (qk_norm = projection), and a norm on
                       each sub-layer's output instead of its input (norm = output)

in float64 (HF's deliberate float32 steps in RMSNorm and the rotary angles kept in float64), the
full forward and cached decoding; the specs are written by hand, the weights renamed here."""

from __future__ import annotations

import pytest
import torch

from attncomp import ir
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")

COMMON = dict(vocab_size=64, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=48,
              num_hidden_layers=2, rms_norm_eps=1e-6, attention_bias=False, tie_word_embeddings=False,
              max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None)
HEAD_DIM = 16  # Qwen3: wider than hidden_size / heads, as in the released models


def _spec(qk_norm: str, norm: str, d_k: int) -> str:
    return f"""model hf {{
  d_model = 32  heads = 4  kv_heads = 2  d_k = {d_k}  d_v = {d_k}  d_ff = 48
  vocab = shared(64)  tie = none  positions = rope(base = 10000.0)  scale_embeddings = false
  bias = false  norm_eps = 1e-06
  encoder = none
  decoder {{ layers = 2  norm = {norm}  normalization = rmsnorm  activation = swiglu  qk_norm = {qk_norm} }}
  dropout {{ residual = 0.0  embedding = 0.0 }}
}}
"""


FAMILIES = {
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM, dict(head_dim=HEAD_DIM),
              _spec("head", "pre", HEAD_DIM),
              {"input_layernorm": "self_attn_norm", "post_attention_layernorm": "ffn_norm"}),
    "olmo2": (transformers.Olmo2Config, transformers.Olmo2ForCausalLM, {}, _spec("projection", "output", 8),
              {"post_attention_layernorm": "self_attn_norm", "post_feedforward_layernorm": "ffn_norm"}),
}
LAYER = {"self_attn.q_proj": "self_attn.q_proj", "self_attn.k_proj": "self_attn.k_proj",
         "self_attn.v_proj": "self_attn.v_proj", "self_attn.o_proj": "self_attn.o_proj",
         "self_attn.q_norm": "self_attn.q_norm", "self_attn.k_norm": "self_attn.k_norm",
         "mlp.gate_proj": "ffn.gate", "mlp.up_proj": "ffn.fc1", "mlp.down_proj": "ffn.fc2"}


pytestmark = pytest.mark.usefixtures("one_thread")


def _float64_hf(family: str, monkeypatch):
    config_class, model_class, extra, _, _ = FAMILIES[family]
    config = config_class(**COMMON, **extra)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    hf = model_class(config).double().eval()
    with torch.no_grad():  # norms start at one: make every weight count
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.3 * torch.randn(p.shape, dtype=p.dtype))
    hf_models.float64_exact(monkeypatch, hf)  # the family's RMSNorm and RotaryEmbedding
    return hf


def _ours(family: str, hf) -> torch.nn.Module:
    spec_text, norms = FAMILIES[family][3], FAMILIES[family][4]
    return hf_models.compiled(ir.load_flat(spec_text, f"<{family}>"),
                              hf_models.llama_like_state(hf, {**LAYER, **norms}))


@pytest.mark.parametrize("family", FAMILIES)
def test_forward_and_cached_decoding_equal_hf_in_float64(family, monkeypatch):
    hf = _float64_hf(family, monkeypatch)
    ours = _ours(family, hf)
    tokens = torch.randint(5, 64, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(tokens).logits
    hf_models.assert_same_logits(ours, expected, tokens, atol=1e-9, unfused=True)


def test_qk_norm_is_left_out_of_the_canonical_text_at_its_default():
    """Specs without it keep their text and hash (checkpoints name the spec by hash)."""
    base = ir.load_flat(_spec("none", "pre", 8), "<a>")
    assert "qk_norm" not in ir.to_text(base)
    assert "qk_norm = head" in ir.to_text(ir.load_flat(_spec("head", "pre", 8), "<b>"))
