"""Encoder-decoder families: Marian, BART, mBART, M2M100, T5 (v1.0, v1.1/Flan) and mT5."""

from __future__ import annotations

from attncomp.interop.families.common import activation_of, bad_activation, rate, tied
from attncomp.errors import UsageError
from attncomp.interop.mapping import FamilyEntry, Key, drop, flatten, output_of, slice_rows, special_ids




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


def _encoder_decoder(model, *positions: str) -> None:
    if model.encoder is None or model.decoder is None or getattr(model.positions, "kind", None) not in positions:
        raise UsageError(f"not an encoder-decoder model with {' or '.join(positions)} positions")


def _seq2seq_config(model) -> dict:
    """BART, mBART and M2M100's config values that the table's keys do not give (mapping.config_values):
    the vocabulary, its special ids (the decoder's start too), the tying, the embedding scale, the length of
    learned positions (M2M100's sinusoids start after its pad id: the spec's offset must be pad + 1)."""
    _encoder_decoder(model, "learned", "sinusoidal")
    values = dict(vocab_size=model.tgt_vocab, tie_word_embeddings=model.tie == "all",
                  scale_embedding=model.scale_embeddings, **special_ids(model, "decoder_start_token_id"))
    if model.positions.kind == "learned":
        values["max_position_embeddings"] = model.positions.max_len
    return values


_BART_OFFSET = 2  # BartLearnedPositionalEmbedding: position p reads row p + 2

BART = FamilyEntry(
    "bart", "BartConfig", "BartForConditionalGeneration", _seq2seq("post"), _seq2seq_layer(), _seq2seq_embeddings,
    (), (slice_rows("encoder.pos.weight", lambda c: _BART_OFFSET),
         slice_rows("decoder.pos.weight", lambda c: _BART_OFFSET),
         flatten("output_bias")),
    refuse=(bad_activation("activation_function"),), prefix="model",
    folded="position tables start at row 2 (BART's offset)", config_of=_seq2seq_config)
MBART = FamilyEntry(
    "mbart", "MBartConfig", "MBartForConditionalGeneration", _seq2seq("pre"), _seq2seq_layer(), _seq2seq_embeddings,
    (), BART.transforms, refuse=BART.refuse, folded=BART.folded, prefix="model", shift="rotate",
    config_of=_seq2seq_config)
def _halves(config):
    """Marian's sinusoid table (all sines, then all cosines), as transformers stores it: float32."""
    from attncomp.lower import ops
    import torch

    table = ops.sinusoidal_halves(torch.arange(config.max_position_embeddings), config.d_model, torch.float64)
    return table.float()


def _marian_config(model) -> dict:
    """Marian's config values of a spec written by hand: BART's (the special ids are the spec's: its rows are
    attncomp's ids, export writes vocab.json in that numbering), the vocabularies shared (`tie = all`) or
    separate (decoder_vocab_size, `tie = decoder`)."""
    _encoder_decoder(model, "sinusoidal")
    values = _seq2seq_config(model)
    shared = model.src_vocab == model.tgt_vocab and model.vocab.kind == "shared"
    values.update(vocab_size=model.src_vocab, decoder_vocab_size=model.tgt_vocab,
                  share_encoder_decoder_embeddings=shared,
                  tie_word_embeddings=model.tie == ("all" if shared else "decoder"))
    return values


MARIAN = FamilyEntry(
    "marian", "MarianConfig", "MarianMTModel",
    _seq2seq("post", **{"vocab": lambda c: f"shared({c.vocab_size})" if _marian_shared(c)
                        else f"separate({c.vocab_size}, {c.decoder_vocab_size or c.vocab_size})",
                        "positions": "sinusoidal(layout = halves)", "embedding_norm": None}),
    _seq2seq_layer(), _seq2seq_embeddings, (),
    (flatten("output_bias"), drop("encoder.pos.weight", lambda c: True, lambda c: _halves(c)),
     drop("decoder.pos.weight", lambda c: True, lambda c: _halves(c))),
    refuse=(bad_activation("activation_function"),),
    folded="sinusoid tables computed, not copied; vocabulary rows renumbered with the tokenizers",
    config_of=_marian_config)


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
    prefix="model", folded="sinusoid tables computed (fairseq's frequencies, from padding_idx + 1)",
    slow_tokenizer="M2M100Tokenizer", config_of=_seq2seq_config)  # facebook/m2m100_*: sentencepiece.bpe.model and vocab.json, no tokenizer.json


# --- T5: T5's bucketed relative bias, unscaled attention, RMSNorm, no biases ------------------------------

# (is_gated_act, dense_act_fn) -> attncomp's activation ("gated-gelu" is gelu_new, the tanh form)
_T5_ACTIVATIONS = {(False, "relu"): "relu", (False, "gelu"): "gelu", (False, "gelu_new"): "gelu_tanh",
                   (False, "silu"): "silu", (True, "gelu"): "geglu", (True, "gelu_new"): "geglu_tanh",
                   (True, "gelu_pytorch_tanh"): "geglu_tanh", (True, "silu"): "swiglu"}


def _t5_activation(config) -> str | None:
    return _T5_ACTIVATIONS.get((bool(config.is_gated_act), config.dense_act_fn))


def _t5_tied(config) -> bool:
    """transformers 5 ties T5's lm_head to the shared embedding whatever the config says (an lm_head that
    differs in the file is kept apart) and rescales the decoder's output by d_model^-0.5 unless
    tie_word_embeddings is false (`scale_decoder_outputs`): v1.0 is tied and rescaled, v1.1 and Flan neither.
    MT5Config has no such attribute: mT5 never rescales."""
    return bool(getattr(config, "scale_decoder_outputs", False))


# attncomp's activation -> feed_forward_proj (T5Config reads "gated-gelu" as gelu_new, the tanh form)
_T5_PROJECTIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu",
                   "geglu_tanh": "gated-gelu", "swiglu": "gated-silu"}


def _t5_config(model) -> dict:
    """T5's config values that the table's keys do not give (mapping.config_values): the buckets, the
    feed-forward's projection, the vocabulary and its ids (T5 starts its decoder with the spec's start), the
    tying (v1.0: tied, its output rescaled; v1.1: an output projection of its own)."""
    _encoder_decoder(model, "buckets")
    activation = model.decoder.activation
    if activation not in _T5_PROJECTIONS:
        raise UsageError(f"activation {activation} (T5's feed_forward_proj has {', '.join(_T5_PROJECTIONS)})")
    ids = special_ids(model, "decoder_start_token_id")
    return dict(vocab_size=model.tgt_vocab, relative_attention_num_buckets=model.positions.count,
                relative_attention_max_distance=model.positions.max_distance,
                feed_forward_proj=_T5_PROJECTIONS[activation], tie_word_embeddings=model.tie == "all",
                **{k: v for k, v in ids.items() if k != "bos_token_id"})


_T5_STACK = "scaled_dot(scale = none)"  # T5's W^Q initialisation carries 1/sqrt(d_k)


def _t5_stack(side: str, layers: str) -> dict:
    return {f"{side}.layers": Key(layers), f"{side}.norm": "pre", f"{side}.normalization": "rmsnorm",
            f"{side}.attention": _T5_STACK}


def _t5_layer(per_layer: bool = False) -> tuple[tuple[str, str], ...]:
    """T5's names; `per_layer`: umT5's relative_attention_bias in every block's self-attention (T5's: block 0's,
    the stack's one table)."""
    stack, dec = r"(encoder|decoder)\.block\.(\d+)\.layer\.", r"decoder\.block\.(\d+)\.layer\."
    ffn = r"\.DenseReluDense\."
    bias = (stack + r"0\.SelfAttention\.relative_attention_bias\.weight", r"\1.layers.\2.self_attn.relative_bias.weight") \
        if per_layer else (r"(encoder|decoder)\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.weight",
                           r"\1.relative_bias.weight")
    return (
        (stack + r"0\.SelfAttention\.([qkvo])\.weight", r"\1.layers.\2.self_attn.\3_proj.weight"),
        (stack + r"0\.layer_norm\.weight", r"\1.layers.\2.self_attn_norm.weight"),
        bias,
        (dec + r"1\.EncDecAttention\.([qkvo])\.weight", r"decoder.layers.\1.cross_attn.\2_proj.weight"),
        (dec + r"1\.layer_norm\.weight", r"decoder.layers.\1.cross_attn_norm.weight"),
        (r"encoder\.block\.(\d+)\.layer\.1" + ffn + r"(wi|wi_1)\.weight", r"encoder.layers.\1.ffn.fc1.weight"),
        (r"encoder\.block\.(\d+)\.layer\.1" + ffn + r"wi_0\.weight", r"encoder.layers.\1.ffn.gate.weight"),
        (r"encoder\.block\.(\d+)\.layer\.1" + ffn + r"wo\.weight", r"encoder.layers.\1.ffn.fc2.weight"),
        (r"encoder\.block\.(\d+)\.layer\.1\.layer_norm\.weight", r"encoder.layers.\1.ffn_norm.weight"),
        (dec + "2" + ffn + r"(wi|wi_1)\.weight", r"decoder.layers.\1.ffn.fc1.weight"),
        (dec + "2" + ffn + r"wi_0\.weight", r"decoder.layers.\1.ffn.gate.weight"),
        (dec + "2" + ffn + r"wo\.weight", r"decoder.layers.\1.ffn.fc2.weight"),
        (dec + r"2\.layer_norm\.weight", r"decoder.layers.\1.ffn_norm.weight"),
        (r"(encoder|decoder)\.final_layer_norm\.weight", r"\1.norm.weight"),
        (r"lm_head\.weight", "output.weight"),
    )


def _t5(model_type: str, config: str, model: str, per_layer: bool = False) -> FamilyEntry:
    return FamilyEntry(
        model_type, config, model,
        {"d_model": Key("d_model"), "heads": Key("num_heads"), "d_k": Key("d_kv"), "d_v": Key("d_kv"),
         "d_ff": Key("d_ff"), "vocab": lambda c: f"shared({c.vocab_size})",
         "tie": lambda c: "all" if _t5_tied(c) else "inputs",
         "positions": lambda c: f"buckets(count = {c.relative_attention_num_buckets}, "
                                f"max_distance = {c.relative_attention_max_distance}"
                                + (", per_layer = true)" if per_layer else ")"),
         "scale_embeddings": False, "bias": False, "norm_eps": Key("layer_norm_epsilon", float),
         "logit_scale": lambda c: float(c.d_model) ** -0.5 if _t5_tied(c) else None,
         "activation": _t5_activation, **_t5_stack("encoder", "num_layers"),
         **_t5_stack("decoder", "num_decoder_layers"), "decoder.cross_attention": _T5_STACK,
         "dropout.residual": rate("dropout_rate"), "dropout.embedding": rate("dropout_rate"),
         "dropout.attention": rate("dropout_rate"), "dropout.activation": rate("dropout_rate")},
        _t5_layer(per_layer),
        lambda c: {"embed.weight": ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")},
        (r"decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias\.weight",),
        (output_of("embed.weight", _t5_tied),),
        refuse=((lambda c: _t5_activation(c) is None,
                 lambda c: f"feed_forward_proj {c.feed_forward_proj!r} (attncomp has relu, gelu, gelu_new, silu "
                           "and their gated forms but for relu)"),),
        folded="lm_head.weight is shared.weight where tied (v1.0); a file without one, untied, copies it",
        config_of=_t5_config)


T5 = _t5("t5", "T5Config", "T5ForConditionalGeneration")
MT5 = _t5("mt5", "MT5Config", "MT5ForConditionalGeneration")  # T5 v1.1's layout with a larger vocabulary
UMT5 = _t5("umt5", "UMT5Config", "UMT5ForConditionalGeneration", per_layer=True)  # a bias table per layer
