"""ModernBertForMaskedLM written as a spec, equal to transformers' model in float64 for random weights.

ModernBERT's layer structure is spec choices: pre-norm layers whose first has no attention norm (a layer
kind `first { count = 1  block = sequential(attention(norm = none), ffn) }`), a global layer every third
among local ones (bidirectional windows of local_attention / 2 each side), GeGLU (HF's Wi: input, then
gate), LayerNorm on the embeddings, a final norm, BERT's dense prediction head and a decoder bias over
the tied embedding, and global layers with their own rotary base (`rope_base` in their layer kinds).
ModernBERT's own setting, norms without a bias (`norm_bias = false`: every LayerNorm, the prediction head's
too), is `normalization = layernorm(bias = false)` in the encoder and in `head = dense(...)`; the test runs
it and `norm_bias = true`. HF's float32 rotary steps are patched to float64; weights are renamed here."""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.compiler import DEFAULT_PASSES

transformers = pytest.importorskip("transformers")
from transformers.models.modernbert import modeling_modernbert  # noqa: E402

VOCAB, D, HEADS, FF, LAYERS, WINDOW = 64, 32, 4, 40, 5, 4  # local_attention = 4: 2 positions each side
LOCAL_THETA, GLOBAL_THETA = 100.0, 1600.0  # ModernBERT: 10000 and 160000


def _spec(norm_bias: bool) -> str:
    norms = "" if norm_bias else "normalization = layernorm(bias = false)"
    return f"""model modernbert {{
  d_model = {D}  heads = {HEADS}  d_ff = {FF}  vocab = shared({VOCAB})  tie = encoder
  positions = rope(base = {LOCAL_THETA})  scale_embeddings = false  embedding_norm = true
  head = dense(activation = gelu, bias = false{", " + norms if norms else ""})
  bias {{ attention = false  ffn = false  output = true }}
  encoder {{
    layers = {LAYERS}  norm = pre  final_norm = true  activation = geglu  attention = local(window = {WINDOW // 2})
    {norms}
    layer first {{ count = 1  attention = scaled_dot  rope_base = {GLOBAL_THETA}
                  block = sequential(attention(norm = none), ffn) }}
    layer global {{ start = 3  every = 3  attention = scaled_dot  rope_base = {GLOBAL_THETA} }}
  }}
  dropout {{ residual = 0.0  embedding = 0.0 }}
}}
"""


def _rotary_float64(self, x, position_ids, layer_type):
    inv_freq = getattr(self, f"{layer_type}_inv_freq")
    dim = inv_freq.shape[0] * 2
    theta = self.config.rope_parameters[layer_type]["rope_theta"]
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    emb = position_ids[..., None].to(torch.float64) * inv
    emb = torch.cat((emb, emb), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _apply_rotary_float64(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    rotate = modeling_modernbert.rotate_half
    return q * cos + rotate(q) * sin, k * cos + rotate(k) * sin


def _ours(state: dict) -> dict:
    """HF's names -> ours; Wqkv split into q, k, v; Wi split into its input (our fc1) and gate halves."""
    out = {"src_embed.weight": state["model.embeddings.tok_embeddings.weight"],
           "head.dense.weight": state["head.dense.weight"], "output_bias": state["decoder.bias"]}
    for hf, ours in (("model.embeddings.norm", "encoder.embed_norm"), ("model.final_norm", "encoder.norm"),
                     ("head.norm", "head.norm")):
        out[f"{ours}.weight"] = state[f"{hf}.weight"]
        if f"{hf}.bias" in state:
            out[f"{ours}.bias"] = state[f"{hf}.bias"]
    for i in range(LAYERS):
        hf, ours = f"model.layers.{i}.", f"encoder.layers.{i}."
        for name, part in zip(("q_proj", "k_proj", "v_proj"), state[hf + "attn.Wqkv.weight"].chunk(3, dim=0)):
            out[f"{ours}self_attn.{name}.weight"] = part
        out[ours + "self_attn.o_proj.weight"] = state[hf + "attn.Wo.weight"]
        up, gate = state[hf + "mlp.Wi.weight"].chunk(2, dim=0)  # HF: act(input) * gate
        out[ours + "ffn.gate.weight"], out[ours + "ffn.fc1.weight"] = up, gate
        out[ours + "ffn.fc2.weight"] = state[hf + "mlp.Wo.weight"]
        for hf_norm, our_norm in (("attn_norm", "self_attn_norm"), ("mlp_norm", "ffn_norm")):
            if hf + f"{hf_norm}.weight" in state:
                out[f"{ours}{our_norm}.weight"] = state[hf + f"{hf_norm}.weight"]
                if hf + f"{hf_norm}.bias" in state:
                    out[f"{ours}{our_norm}.bias"] = state[hf + f"{hf_norm}.bias"]
    return out


@pytest.fixture(params=[True, False], ids=["norm_bias", "no_norm_bias"])
def hf(request, monkeypatch):
    monkeypatch.setattr(modeling_modernbert.ModernBertRotaryEmbedding, "forward", _rotary_float64)
    monkeypatch.setattr(modeling_modernbert, "apply_rotary_pos_emb", _apply_rotary_float64)
    config = transformers.ModernBertConfig(
        vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, intermediate_size=FF, num_hidden_layers=LAYERS,
        local_attention=WINDOW, norm_bias=request.param, max_position_embeddings=64, pad_token_id=0, bos_token_id=None,
        eos_token_id=None, cls_token_id=None, sep_token_id=None,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": GLOBAL_THETA},
                         "sliding_attention": {"rope_type": "default", "rope_theta": LOCAL_THETA}})
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.ModernBertForMaskedLM(config).double().eval()
    with torch.no_grad():  # every weight random and away from its initial value, so each one counts
        for p in model.parameters():
            p.copy_((1.0 if p.dim() == 1 else 0.0) + 0.3 * torch.randn(p.shape, dtype=p.dtype))
    return model


def test_modernbert_masked_lm_equals_hf_in_float64(hf):
    assert [layer.attention_type for layer in hf.model.layers] == [
        "full_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]
    assert isinstance(hf.model.layers[0].attn_norm, torch.nn.Identity)
    spec = ir.load_flat(_spec(hf.config.norm_bias), "<modernbert>")
    assert [kind for kind, _ in spec.model.encoder.layer_plan()] == ["first", "", "", "global", ""]
    ours = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    ours.load_state_dict(_ours(hf.state_dict()))  # strict: no norm keeps a bias HF's lacks
    assert ("head.norm.bias" in ours.state_dict()) is hf.config.norm_bias
    tokens = torch.randint(5, VOCAB, (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(tokens).logits
        scale = expected.abs().max()
        assert (ours(tokens) - expected).abs().max() < 1e-12 * scale
        unfused = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
        unfused.load_state_dict(ours.state_dict())
        assert (unfused(tokens) - expected).abs().max() < 1e-12 * scale
