"""Hugging Face MarianMTModel (OPUS-MT) -> attncomp: the spec its config describes, and its weights
under attncomp's canonical state-dict names.

Marian is the paper's post-norm Transformer with biases on every projection, embeddings scaled by
sqrt(d_model) (`scale_embedding`), one embedding shared by source, target and output, and sinusoids
in halves (`MarianSinusoidalPositionalEmbedding`: all sines, then all cosines, at the paper's
frequencies), which is `positions = sinusoidal(layout = halves)`. The sinusoid tables are computed,
not copied. `final_logits_bias`, added to Marian's logits, is the output bias (`bias { output =
true }`, `output_bias`); Marian's `swish` activation (OPUS-MT's) is `silu`. What attncomp cannot
express is refused in one line: separate source and target embeddings, activations other than relu,
gelu and swish/silu.

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
    (r"final_logits_bias", "output_bias"),  # (1, V) in Marian, (V,) in attncomp
)
# tied copies of model.shared, and the computed sinusoid tables
DROPPED = (r"model\.(encoder|decoder)\.embed_tokens\.weight", r"lm_head\.weight",
           r"model\.(encoder|decoder)\.embed_positions\.weight")
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}  # Marian's name -> attncomp's


def check_supported(config) -> None:
    """One line naming what attncomp cannot express of this Marian config."""
    problems = []
    if not getattr(config, "share_encoder_decoder_embeddings", True):
        problems.append("separate source and target embeddings")
    if config.activation_function not in ACTIVATIONS:
        problems.append(f"activation {config.activation_function!r} (attncomp has {', '.join(ACTIVATIONS)})")
    if problems:
        raise UsageError("attncomp cannot express this Marian model: " + "; ".join(problems))


def spec_text(config, name: str = "marian") -> str:
    """The attncomp spec of a MarianConfig (the model block; train and decode take their defaults)."""
    check_supported(config)

    def stack(layers: int, heads: int, d_ff: int) -> str:
        return (f"layers = {layers}  d_model = {config.d_model}  heads = {heads}  d_ff = {d_ff}  "
                f"norm = post  activation = {ACTIVATIONS[config.activation_function]}")

    return "\n".join([
        f"model {name} {{",
        f"  vocab = shared({config.vocab_size})",
        "  tie = all",
        "  positions = sinusoidal(layout = halves)",
        f"  scale_embeddings = {str(bool(config.scale_embedding)).lower()}",
        "  bias { attention = true  ffn = true  output = true }",
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
    out = {}
    for key, tensor in marian.items():
        if any(re.fullmatch(pattern, key) for pattern in DROPPED):
            continue
        for pattern, replacement in RENAMES:
            renamed, hits = re.subn(f"^{pattern}", replacement, key)
            if hits:
                out[renamed] = tensor.reshape(-1) if renamed == "output_bias" else tensor
                break
        else:
            raise UsageError(f"attncomp does not know Marian's tensor {key}")
    return out
