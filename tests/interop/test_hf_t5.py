"""T5 as a spec (issue 26): unscaled dot products (`scale = none`), the bucketed relative bias
(`positions = buckets`, one table per stack), pre-norm RMSNorm (T5LayerNorm), no biases, unscaled
embeddings; equal to transformers' T5ForConditionalGeneration in float64 for random weights:

    v1.0   relu feed-forward, the embedding tied to the output: HF rescales the states by d_model^-0.5
           before the tied projection, a model-level choice the language does not have yet, so the
           comparison multiplies our logits by it
    v1.1   gated-GELU (tanh) feed-forward (`geglu_tanh`), an untied output: the logits themselves

the full forward (fused and unfused) and cached decoding step by step. Weights are renamed here (no
import family yet); HF's float32 variance in T5LayerNorm is patched to float64."""

from __future__ import annotations

import pytest
import torch

import attncomp

transformers = pytest.importorskip("transformers")
from transformers.models.t5 import modeling_t5  # noqa: E402

VOCAB, D, HEADS, D_FF, LAYERS, BUCKETS, MAX_DISTANCE = 64, 32, 4, 48, 2, 8, 20


def _spec(v11: bool) -> str:
    stack = "layers = {n}  norm = pre  normalization = rmsnorm  attention = scaled_dot(scale = none)".format(n=LAYERS)
    return f"""model t5 {{
  d_model = {D}  heads = {HEADS}  d_ff = {D_FF}  vocab = shared({VOCAB})  tie = {"none" if v11 else "all"}
  positions = buckets(count = {BUCKETS}, max_distance = {MAX_DISTANCE})
  scale_embeddings = false  bias = false  norm_eps = 1e-6
  activation = {"geglu_tanh" if v11 else "relu"}
  encoder {{ {stack} }}
  decoder {{ {stack}  cross_attention = scaled_dot(scale = none) }}
  dropout {{ residual = 0.0  embedding = 0.0 }}
}}
"""


def _rms_float64(self, x):  # T5LayerNorm without its float32 variance
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def _hf(v11: bool):
    config = modeling_t5.T5Config(
        vocab_size=VOCAB, d_model=D, d_kv=D // HEADS, d_ff=D_FF, num_layers=LAYERS, num_decoder_layers=LAYERS,
        num_heads=HEADS, relative_attention_num_buckets=BUCKETS, relative_attention_max_distance=MAX_DISTANCE,
        dropout_rate=0.0, layer_norm_epsilon=1e-6, feed_forward_proj="gated-gelu" if v11 else "relu",
        tie_word_embeddings=not v11, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = modeling_t5.T5ForConditionalGeneration(config).double().eval()
    with torch.no_grad():
        for p in model.parameters():  # random weights at a scale where every part matters
            p.copy_(torch.randn_like(p) * (0.3 if p.dim() > 1 else 1.0) + (1.0 if p.dim() == 1 else 0.0))
    return model


def _renamed(hf: torch.nn.Module, v11: bool) -> dict:
    sd, out = hf.state_dict(), {}
    if v11:
        out["src_embed.weight"] = out["tgt_embed.weight"] = sd["shared.weight"]
        out["output.weight"] = sd["lm_head.weight"]
    else:
        out["embed.weight"] = sd["shared.weight"]
    ffn = {"wi_0": "gate", "wi_1": "fc1", "wo": "fc2"} if v11 else {"wi": "fc1", "wo": "fc2"}
    for side in ("encoder", "decoder"):
        out[f"{side}.relative_bias.weight"] = sd[f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
        out[f"{side}.norm.weight"] = sd[f"{side}.final_layer_norm.weight"]
        parts = [("self_attn", "SelfAttention")] + ([("cross_attn", "EncDecAttention")] if side == "decoder" else [])
        for i in range(LAYERS):
            hf_layer, ours = f"{side}.block.{i}.layer", f"{side}.layers.{i}"
            for j, (name, hf_name) in enumerate(parts):
                for proj in "qkvo":
                    out[f"{ours}.{name}.{proj}_proj.weight"] = sd[f"{hf_layer}.{j}.{hf_name}.{proj}.weight"]
                out[f"{ours}.{name}_norm.weight"] = sd[f"{hf_layer}.{j}.layer_norm.weight"]
            j = len(parts)
            for hf_name, name in ffn.items():
                out[f"{ours}.ffn.{name}.weight"] = sd[f"{hf_layer}.{j}.DenseReluDense.{hf_name}.weight"]
            out[f"{ours}.ffn_norm.weight"] = sd[f"{hf_layer}.{j}.layer_norm.weight"]
    return out


@pytest.mark.parametrize("v11", [False, True], ids=["v1.0", "v1.1"])
@pytest.mark.parametrize("passes", [(), None], ids=["unfused", "fused"])
def test_t5_logits_equal_transformers(v11, passes, monkeypatch):
    monkeypatch.setattr(modeling_t5.T5LayerNorm, "forward", _rms_float64)
    hf = _hf(v11)
    kwargs = {} if passes is None else {"passes": passes}
    ours = attncomp.compile(_spec(v11), dtype=torch.float64, **kwargs).eval()
    ours.load_state_dict(_renamed(hf, v11))
    g = torch.Generator().manual_seed(1)
    src = torch.randint(5, VOCAB, (2, 30), generator=g)  # 30 positions: past the exact buckets, into the log ones
    tgt = torch.randint(5, VOCAB, (2, 25), generator=g)
    rescale = 1.0 if v11 else D ** -0.5  # HF v1.0's tied-output rescaling (see the module docstring)
    with torch.no_grad():
        expected = hf(input_ids=src, decoder_input_ids=tgt).logits
        got = ours(src, tgt) * rescale
        scale = expected.abs().max()
        assert (got - expected).abs().max() / scale < 1e-12
        cache = ours.init_cache(src, ours.encode(src))
        for t in range(tgt.shape[1]):
            step, cache = ours.decode_step(tgt[:, t:t + 1], cache)
            assert (step * rescale - expected[:, t]).abs().max() / scale < 1e-12, t
