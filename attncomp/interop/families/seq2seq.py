"""Encoder-decoder families: Marian, BART, mBART, M2M100."""

from __future__ import annotations

from attncomp.interop.families.common import activation_of, bad_activation, rate, tied
from attncomp.interop.mapping import FamilyEntry, Key, drop, flatten, slice_rows




def _stack(side: str, norm: str) -> dict:
    return {f"{side}.layers": Key(f"{side}_layers"), f"{side}.d_model": Key("d_model"),
            f"{side}.heads": Key(f"{side}_attention_heads"), f"{side}.d_ff": Key(f"{side}_ffn_dim"),
            f"{side}.norm": norm, f"{side}.activation": activation_of("activation_function")}


def _seq2seq_layer() -> tuple[tuple[str, str], ...]:
    stack = r"model\.(encoder|decoder)\.layers\.(\d+)\."
    dec = r"model\.decoder\.layers\.(\d+)\."
    return (
        (stack + r"self_attn\.out_proj\.(weight|bias)", r"\1.layers.\2.self_attn.o_proj.\3"),
        (stack + r"self_attn\.([qkv])_proj\.(weight|bias)", r"\1.layers.\2.self_attn.\3_proj.\4"),
        (dec + r"encoder_attn\.out_proj\.(weight|bias)", r"decoder.layers.\1.cross_attn.o_proj.\2"),
        (dec + r"encoder_attn\.([qkv])_proj\.(weight|bias)", r"decoder.layers.\1.cross_attn.\2_proj.\3"),
        (stack + r"self_attn_layer_norm\.(weight|bias)", r"\1.layers.\2.self_attn_norm.\3"),
        (dec + r"encoder_attn_layer_norm\.(weight|bias)", r"decoder.layers.\1.cross_attn_norm.\2"),
        (stack + r"(fc1|fc2)\.(weight|bias)", r"\1.layers.\2.ffn.\3.\4"),
        (stack + r"final_layer_norm\.(weight|bias)", r"\1.layers.\2.ffn_norm.\3"),
        (r"final_logits_bias", "output_bias"),
        (r"model\.(encoder|decoder)\.embed_positions\.weight", r"\1.pos.weight"),
        (r"model\.(encoder|decoder)\.layernorm_embedding\.(weight|bias)", r"\1.embed_norm.\2"),
        (r"model\.(encoder|decoder)\.layer_norm\.(weight|bias)", r"\1.norm.\2"),
    )


def _marian_shared(config) -> bool:
    return bool(getattr(config, "share_encoder_decoder_embeddings", True))


def _seq2seq_embeddings(config) -> dict[str, tuple[str, ...]]:
    enc, dec, head = "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"
    if not _marian_shared(config):  # Marian with separate vocabularies
        if tied(config):
            return {"src_embed.weight": (enc,), "tgt_embed.weight": (dec, head)}
        return {"src_embed.weight": (enc,), "tgt_embed.weight": (dec,), "output.weight": (head,)}
    if tied(config):
        return {"embed.weight": ("model.shared.weight", enc, dec, head)}
    return {"src_embed.weight": ("model.shared.weight", enc), "tgt_embed.weight": ("model.shared.weight", dec),
            "output.weight": (head,)}


def _seq2seq_tie(config) -> str:
    if not tied(config):
        return "none"
    return "all" if _marian_shared(config) else "decoder"


def _seq2seq(norm: str, **changes) -> dict:
    spec = {
        "vocab": lambda c: f"shared({c.vocab_size})", "tie": _seq2seq_tie,
        "positions": lambda c: f"learned(max_len = {c.max_position_embeddings})",
        "scale_embeddings": lambda c: bool(c.scale_embedding), "embedding_norm": True,
        "bias.attention": True, "bias.ffn": True, "bias.output": True, "norm_eps": 1e-5,
        **_stack("encoder", norm), **_stack("decoder", norm),
        "dropout.residual": rate("dropout"), "dropout.embedding": rate("dropout"),
        "dropout.attention": rate("attention_dropout"), "dropout.activation": rate("activation_dropout"),
    }
    spec.update(changes)
    return spec


_BART_OFFSET = 2  # BartLearnedPositionalEmbedding: position p reads row p + 2

BART = FamilyEntry(
    "bart", "BartConfig", "BartForConditionalGeneration", _seq2seq("post"), _seq2seq_layer(), _seq2seq_embeddings,
    (), (slice_rows("encoder.pos.weight", lambda c: _BART_OFFSET),
         slice_rows("decoder.pos.weight", lambda c: _BART_OFFSET),
         flatten("output_bias")),
    refuse=(bad_activation("activation_function"),), pad_first=True, prefix="model",
    folded="position tables start at row 2 (BART's offset)")
MBART = FamilyEntry(
    "mbart", "MBartConfig", "MBartForConditionalGeneration", _seq2seq("pre"), _seq2seq_layer(), _seq2seq_embeddings,
    (), BART.transforms, refuse=BART.refuse, pad_first=True, folded=BART.folded, prefix="model")
def _halves(config):
    """Marian's sinusoid table (all sines, then all cosines), as transformers stores it: float32."""
    from attncomp.lower import ops
    import torch

    table = ops.sinusoidal_halves(torch.arange(config.max_position_embeddings), config.d_model, torch.float64)
    return table.float()


MARIAN = FamilyEntry(
    "marian", "MarianConfig", "MarianMTModel",
    _seq2seq("post", **{"vocab": lambda c: f"shared({c.vocab_size})" if _marian_shared(c)
                        else f"separate({c.vocab_size}, {c.decoder_vocab_size or c.vocab_size})",
                        "positions": "sinusoidal(layout = halves)", "embedding_norm": None}),
    _seq2seq_layer(), _seq2seq_embeddings, (),
    (flatten("output_bias"), drop("encoder.pos.weight", lambda c: True, lambda c: _halves(c)),
     drop("decoder.pos.weight", lambda c: True, lambda c: _halves(c))),
    refuse=(bad_activation("activation_function"),),
    folded="sinusoid tables computed, not copied; vocabulary rows renumbered with the tokenizers")


def _fairseq_offset(config) -> int:
    """M2M100's positions start at padding_idx + 1 (fairseq's make_positions)."""
    return config.pad_token_id + 1


M2M100 = FamilyEntry(
    "m2m_100", "M2M100Config", "M2M100ForConditionalGeneration",
    _seq2seq("pre", **{"positions": lambda c: "sinusoidal(layout = halves, timescales = tensor2tensor, "
                                              f"offset = {_fairseq_offset(c)})",
                       "embedding_norm": None, "bias.output": None}),
    _seq2seq_layer(), _seq2seq_embeddings, (r"model\.(encoder|decoder)\.embed_positions\.weights",), (),
    refuse=(bad_activation("activation_function"),
            (lambda c: not isinstance(c.pad_token_id, int), "no pad_token_id (fairseq's positions start after it)")),
    pad_first=True, prefix="model", folded="sinusoid tables computed (fairseq's frequencies, from padding_idx + 1)")
