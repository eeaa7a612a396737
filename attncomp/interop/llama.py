"""Hugging Face LlamaForCausalLM -> an attncomp spec and state dict (weights only; no tokenizer).

A LLaMA model is a decoder-only attncomp model with pre-norm RMSNorm, a SwiGLU feed-forward,
rotary positions, grouped-query attention, unscaled embeddings and a final norm. Names map one to one:

    model.embed_tokens                          tgt_embed
    model.layers.N.self_attn.{q,k,v,o}_proj     decoder.layers.N.self_attn.{q,k,v,o}_proj
    model.layers.N.mlp.gate_proj / up_proj      decoder.layers.N.ffn.gate / ffn.fc1
    model.layers.N.mlp.down_proj                decoder.layers.N.ffn.fc2
    model.layers.N.input_layernorm              decoder.layers.N.self_attn_norm
    model.layers.N.post_attention_layernorm     decoder.layers.N.ffn_norm
    model.norm                                  decoder.norm
    lm_head                                     output (absent when tie_word_embeddings: tie = decoder)

Only the default rope type is expressible (no scaling of the rotary frequencies); anything else
is refused in one line. Reading the config needs no transformers import: its attributes are read.
"""

from __future__ import annotations

import torch

from attncomp.errors import UsageError

LAYER = {"self_attn.q_proj": "self_attn.q_proj", "self_attn.k_proj": "self_attn.k_proj",
         "self_attn.v_proj": "self_attn.v_proj", "self_attn.o_proj": "self_attn.o_proj",
         "mlp.gate_proj": "ffn.gate", "mlp.up_proj": "ffn.fc1", "mlp.down_proj": "ffn.fc2",
         "input_layernorm": "self_attn_norm", "post_attention_layernorm": "ffn_norm"}


def _rope_theta(config) -> float:
    rope = getattr(config, "rope_parameters", None) or {}
    kind = rope.get("rope_type", "default")
    if kind != "default":
        raise UsageError(f"attncomp cannot express Llama's rope_type {kind!r}; only the default rotary positions")
    return float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def spec_text(config, name: str = "llama") -> str:
    """The attncomp spec of a LlamaConfig (architecture only; train and decode keep their defaults)."""
    if getattr(config, "hidden_act", "silu") != "silu":
        raise UsageError(f"attncomp cannot express Llama's hidden_act {config.hidden_act!r}; only silu (SwiGLU)")
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    bias = lambda flag: "true" if flag else "false"  # noqa: E731
    return f"""model {name} {{
  d_model = {config.hidden_size}
  heads = {heads}
  kv_heads = {config.num_key_value_heads or heads}
  d_k = {head_dim}
  d_v = {head_dim}
  d_ff = {config.intermediate_size}
  vocab = shared({config.vocab_size})
  tie = {"decoder" if config.tie_word_embeddings else "none"}
  positions = rope(base = {_rope_theta(config)!r})
  scale_embeddings = false
  bias {{ attention = {bias(config.attention_bias)}  ffn = {bias(getattr(config, "mlp_bias", False))} }}
  norm_eps = {float(config.rms_norm_eps)!r}
  decoder {{ layers = {config.num_hidden_layers}  norm = pre  normalization = rmsnorm  activation = swiglu }}
  dropout {{ residual = 0.0  embedding = 0.0  attention = {float(config.attention_dropout)!r} }}
}}
"""


def _name(hf: str) -> str | None:
    """The attncomp name of one HF parameter, or None for a buffer attncomp does not keep."""
    if hf.startswith("model.layers."):
        index, rest = hf.removeprefix("model.layers.").split(".", 1)
        module, _, leaf = rest.rpartition(".")
        return f"decoder.layers.{index}.{LAYER[module]}.{leaf}" if module in LAYER else None
    fixed = {"model.embed_tokens.weight": "tgt_embed.weight", "model.norm.weight": "decoder.norm.weight",
             "lm_head.weight": "output.weight"}
    return fixed.get(hf)


def state_dict(hf_state: dict[str, torch.Tensor], tied: bool = False) -> dict[str, torch.Tensor]:
    """HF LlamaForCausalLM's state dict with attncomp's names (lm_head dropped when tied)."""
    out = {}
    for key, value in hf_state.items():
        name = _name(key)
        if name is None or (tied and name == "output.weight"):
            continue
        out[name] = value
    return out
