"""Hugging Face BERT (BertForMaskedLM) -> an attncomp spec and state dict.

BERT is a post-norm Transformer encoder with learned positions, GELU, LayerNorm on the embeddings,
biases on every projection, a prediction-head transform (dense, GELU, LayerNorm) and an output
projection tied to the word embeddings, with its own bias. attncomp has no token types: BERT adds
the token-type embedding of every token to its word + position embedding, so for inputs of one
segment (token type 0 everywhere, HF's default) row 0 of the token-type table is folded into every
row of the position table.

    bert.embeddings.word_embeddings                    src_embed (= the output projection, tie = encoder)
    bert.embeddings.position_embeddings + type row 0   encoder.pos
    bert.embeddings.LayerNorm                          encoder.embed_norm
    bert.encoder.layer.N.attention.self.{query,key,value}   encoder.layers.N.self_attn.{q,k,v}_proj
    bert.encoder.layer.N.attention.output.dense / LayerNorm   .self_attn.o_proj / .self_attn_norm
    bert.encoder.layer.N.intermediate.dense            .ffn.fc1
    bert.encoder.layer.N.output.dense / LayerNorm      .ffn.fc2 / .ffn_norm
    cls.predictions.transform.dense / LayerNorm        head.dense / head.norm
    cls.predictions.bias                               output_bias
"""

from __future__ import annotations

import torch

from attncomp.errors import UsageError

_LAYER = {
    "attention.self.query": "self_attn.q_proj", "attention.self.key": "self_attn.k_proj",
    "attention.self.value": "self_attn.v_proj", "attention.output.dense": "self_attn.o_proj",
    "attention.output.LayerNorm": "self_attn_norm", "intermediate.dense": "ffn.fc1",
    "output.dense": "ffn.fc2", "output.LayerNorm": "ffn_norm",
}


def spec_text(config, name: str = "bert") -> str:
    """The attncomp spec of a transformers BertConfig (dropout off: for comparisons; set it to train)."""
    if config.hidden_act != "gelu" or getattr(config, "position_embedding_type", "absolute") != "absolute":
        raise UsageError("attncomp's BERT mapping covers hidden_act = gelu and absolute positions only")
    return f"""model {name} {{
  d_model = {config.hidden_size}  heads = {config.num_attention_heads}  d_ff = {config.intermediate_size}
  vocab = shared({config.vocab_size})  tie = encoder
  positions = learned(max_len = {config.max_position_embeddings})
  scale_embeddings = false  embedding_norm = true  head = dense(activation = gelu)
  norm_eps = {config.layer_norm_eps!r}
  bias {{ attention = true  ffn = true  output = true }}
  encoder {{ layers = {config.num_hidden_layers}  norm = post  activation = gelu }}
  dropout {{ residual = 0.0  embedding = 0.0  attention = 0.0 }}
}}
"""


def state_dict(hf: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A BertForMaskedLM state dict -> attncomp's names (see the module docstring)."""
    emb = "bert.embeddings."
    out = {
        "src_embed.weight": hf[emb + "word_embeddings.weight"],
        "encoder.pos.weight": hf[emb + "position_embeddings.weight"] + hf[emb + "token_type_embeddings.weight"][0],
        "encoder.embed_norm.weight": hf[emb + "LayerNorm.weight"],
        "encoder.embed_norm.bias": hf[emb + "LayerNorm.bias"],
        "output_bias": hf["cls.predictions.bias"],
    }
    for ours, theirs in (("head.dense", "cls.predictions.transform.dense"),
                         ("head.norm", "cls.predictions.transform.LayerNorm")):
        for p in ("weight", "bias"):
            out[f"{ours}.{p}"] = hf[f"{theirs}.{p}"]
    prefix = "bert.encoder.layer."
    layers = {int(k[len(prefix):].split(".")[0]) for k in hf if k.startswith(prefix)}
    for i in sorted(layers):
        for theirs, ours in _LAYER.items():
            for p in ("weight", "bias"):
                out[f"encoder.layers.{i}.{ours}.{p}"] = hf[f"{prefix}{i}.{theirs}.{p}"]
    return out
