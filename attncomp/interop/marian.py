"""Hugging Face MarianMTModel (OPUS-MT) -> attncomp: the spec its config describes, and its weights
under attncomp's canonical state-dict names.

Marian is the paper's post-norm Transformer with biases on every projection, embeddings scaled by
sqrt(d_model) (`scale_embedding`), one embedding shared by source, target and output, and sinusoids
in halves (`MarianSinusoidalPositionalEmbedding`: all sines, then all cosines, at the paper's
frequencies), which is `positions = sinusoidal(layout = halves)`. The sinusoid tables are computed,
not copied. What attncomp cannot express yet is refused in one line:

- `final_logits_bias` is added to Marian's logits; it is zero in a fresh model (and dropped here),
  while a non-zero one (trained OPUS-MT models may have one) needs the output bias on the
  pre-softmax projection, a key of the `bias { }` block that the spec language does not have yet:
  until it does, a non-zero final_logits_bias is refused;
- separate source and target embeddings, activations other than relu and gelu.

Marian's special ids (pad, eos, unk: its own vocabulary's) differ from attncomp's (<pad> 0, <unk> 1,
<s> 2, </s> 3, <sep> 4): the weights do not depend on them, but an imported model must be fed ids
of Marian's vocabulary, with attncomp's padding id where it pads.
"""

from __future__ import annotations

import re

import torch

from attncomp import ir
from attncomp.errors import UsageError
from attncomp.ir import nodes

# (Marian's name, attncomp's), as regular expressions over state-dict keys; unlisted keys are dropped
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
)
# tied copies of model.shared, and the computed sinusoid tables
DROPPED = (r"model\.(encoder|decoder)\.embed_tokens\.weight", r"lm_head\.weight",
           r"model\.(encoder|decoder)\.embed_positions\.weight", r"final_logits_bias")


def check_supported(config) -> None:
    """One line naming what attncomp cannot express of this Marian config."""
    problems = []
    if not getattr(config, "share_encoder_decoder_embeddings", True):
        problems.append("separate source and target embeddings")
    if config.activation_function not in ("relu", "gelu"):
        problems.append(f"activation {config.activation_function!r} (attncomp has relu and gelu)")
    if problems:
        raise UsageError("attncomp cannot express this Marian model: " + "; ".join(problems))


def spec_text(config, name: str = "marian") -> str:
    """The attncomp spec of a MarianConfig (the model block; train and decode take their defaults)."""
    check_supported(config)

    def stack(layers: int, heads: int, d_ff: int) -> str:
        return (f"layers = {layers}  d_model = {config.d_model}  heads = {heads}  d_ff = {d_ff}  "
                f"norm = post  activation = {config.activation_function}")

    return "\n".join([
        f"model {name} {{",
        f"  vocab = shared({config.vocab_size})",
        "  tie = all",
        "  positions = sinusoidal(layout = halves)",
        f"  scale_embeddings = {str(bool(config.scale_embedding)).lower()}",
        "  bias = true",
        "  norm_eps = 1e-5",
        f"  encoder {{ {stack(config.encoder_layers, config.encoder_attention_heads, config.encoder_ffn_dim)} }}",
        f"  decoder {{ {stack(config.decoder_layers, config.decoder_attention_heads, config.decoder_ffn_dim)} }}",
        f"  dropout {{ residual = {float(config.dropout)!r}  embedding = {float(config.dropout)!r}  "
        f"attention = {float(config.attention_dropout)!r}  activation = {float(config.activation_dropout)!r} }}",
        "}",
    ]) + "\n"


def spec(config, name: str = "marian") -> nodes.Spec:
    return ir.load(spec_text(config, name))


def state_dict(marian: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Marian's state dict -> attncomp's canonical names (tied and computed tensors dropped)."""
    bias = marian.get("final_logits_bias")
    if bias is not None and bool(bias.ne(0).any()):
        raise UsageError("Marian's final_logits_bias is not zero, and attncomp has no output bias to carry it yet")
    out = {}
    for key, tensor in marian.items():
        if any(re.fullmatch(pattern, key) for pattern in DROPPED):
            continue
        for pattern, replacement in RENAMES:
            renamed, hits = re.subn(f"^{pattern}", replacement, key)
            if hits:
                out[renamed] = tensor
                break
        else:
            raise UsageError(f"attncomp does not know Marian's tensor {key}")
    return out
