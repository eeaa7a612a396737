"""Encoder-only families: BERT, RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT, ModernBERT, ALBERT (masked-LM heads)."""

from __future__ import annotations

from attncomp.interop.families.common import (ACTIVATIONS, DECODER_ACTIVATIONS, PER_TYPE_ROPE_SCALING, activation_of,
                                              periodic, rate, rope_theta, tied)
from attncomp.errors import UsageError
from attncomp.ir import nodes
from attncomp.interop.mapping import FamilyEntry, Key, add_row, drop, slice_rows, special_ids, split_qkv, split_rows




def _bert_layer(prefix: str, segments: str = "token_type.weight") -> tuple[tuple[str, str], ...]:
    """BERT-style names under `prefix`; the token-type table goes to `segments` (attncomp's segment_embed,
    or a name the family's transforms fold away)."""
    layer = rf"{prefix}\.encoder\.layer\.(\d+)\."
    pairs = (("attention.self.query", "self_attn.q_proj"), ("attention.self.key", "self_attn.k_proj"),
             ("attention.self.value", "self_attn.v_proj"), ("attention.output.dense", "self_attn.o_proj"),
             ("attention.output.LayerNorm", "self_attn_norm"), ("intermediate.dense", "ffn.fc1"),
             ("output.dense", "ffn.fc2"), ("output.LayerNorm", "ffn_norm"))
    return tuple((layer + theirs.replace(".", r"\.") + r"\.(weight|bias)", rf"encoder.layers.\1.{ours}.\2")
                 for theirs, ours in pairs) + (
        (rf"{prefix}\.embeddings\.position_embeddings\.weight", "encoder.pos.weight"),
        (rf"{prefix}\.embeddings\.token_type_embeddings\.weight", segments),
        (rf"{prefix}\.embeddings\.LayerNorm\.(weight|bias)", r"encoder.embed_norm.\1"))


def _masked_lm_embeddings(word: str, decoder: str, biases: tuple[str, ...]):
    def embeddings(config) -> dict[str, tuple[str, ...]]:
        if tied(config):
            return {"src_embed.weight": (word, decoder), "output_bias": biases}
        return {"src_embed.weight": (word,), "output.weight": (decoder,), "output_bias": biases}
    return embeddings


def _type_rows(config) -> int:
    return config.type_vocab_size


def _roberta_offset(config) -> int:
    return config.pad_token_id + 1


def _encoder_only(**changes) -> dict:
    spec = {
        "d_model": Key("hidden_size"), "heads": Key("num_attention_heads"), "d_ff": Key("intermediate_size"),
        "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "encoder" if tied(c) else "none",
        "positions": lambda c: f"learned(max_len = {c.max_position_embeddings})", "scale_embeddings": False,
        "embedding_norm": True, "head": lambda c: f"dense(activation = {ACTIVATIONS[c.hidden_act]})",
        "norm_eps": Key("layer_norm_eps", float),
        "bias.attention": True, "bias.ffn": True, "bias.output": True,
        "encoder.layers": Key("num_hidden_layers"), "encoder.norm": "post",
        "encoder.activation": activation_of("hidden_act"),
        "dropout.residual": rate("hidden_dropout_prob"), "dropout.embedding": rate("hidden_dropout_prob"),
        "dropout.attention": rate("attention_probs_dropout_prob"),
    }
    spec.update(changes)
    return spec


def _encoder(model, *positions: str):
    """The stack of an encoder-only spec with one of `positions`; refused otherwise."""
    if model.decoder is not None or model.encoder is None or getattr(model.positions, "kind", None) not in positions:
        raise UsageError(f"not an encoder-only model with {' or '.join(positions)} positions")
    return model.encoder


def _masked_lm_config(model) -> dict:
    """What every encoder-only config takes from the spec: the vocabulary, its special ids, the tying."""
    return dict(vocab_size=model.src_vocab, tie_word_embeddings=model.tie == "encoder", **special_ids(model))


def _encoder_config(factorised: bool = False, segments: bool = True):
    """The config values of a BERT-like encoder spec written by hand that the table's keys do not give
    (mapping.config_values; the family's spec of them is compared with it, so anything else the spec chose
    is refused there); `factorised`: ELECTRA's embedding_size; without `segments`: RoBERTa's one token type
    and its positions after padding_idx + 1 rows."""
    def config_of(model) -> dict:
        enc = _encoder(model, "learned")
        values = dict(_masked_lm_config(model), hidden_act=enc.activation,
                      max_position_embeddings=model.positions.max_len, type_vocab_size=model.segments)
        if not segments:
            if model.vocab.pad is None:
                raise UsageError("no pad id (RoBERTa's positions start after padding_idx)")
            values.update(type_vocab_size=1, max_position_embeddings=model.positions.max_len + model.vocab.pad + 1)
        elif not model.segments:
            raise UsageError("no segments (token_type_embeddings): set segments = 1 or more")
        if factorised:
            values["embedding_size"] = model.d_embed or enc.d_model
        return values
    return config_of


def _distilbert_config(model) -> dict:
    """DistilBERT: learned positions, or its sinusoidal table (sinusoidal_pos_embds)."""
    _encoder(model, "learned", "sinusoidal")
    learned = model.positions.kind == "learned"
    return dict(_masked_lm_config(model), sinusoidal_pos_embds=not learned,
                **({"max_position_embeddings": model.positions.max_len} if learned else {}))


_HEAD_ACTIVATION = (lambda c: c.hidden_act not in ("relu", "gelu"),
                    lambda c: f"hidden_act {c.hidden_act!r} (attncomp's encoders and dense head have relu and gelu)")
_ABSOLUTE = (lambda c: getattr(c, "position_embedding_type", "absolute") != "absolute",
             lambda c: f"position_embedding_type {c.position_embedding_type!r} (Shaw/Huang relative keys)")
_BERT_DROPPED = (r".*\.position_ids", r".*\.token_type_ids", r".*\.pooler\..*")

BERT = FamilyEntry(
    "bert", "BertConfig", "BertForMaskedLM", _encoder_only(segments=_type_rows),
    _bert_layer("bert", "segment_embed.weight") + (
        (r"cls\.predictions\.transform\.dense\.(weight|bias)", r"head.dense.\1"),
        (r"cls\.predictions\.transform\.LayerNorm\.(weight|bias)", r"head.norm.\1")),
    _masked_lm_embeddings("bert.embeddings.word_embeddings.weight", "cls.predictions.decoder.weight",
                          ("cls.predictions.bias", "cls.predictions.decoder.bias")),
    _BERT_DROPPED + (r"cls\.seq_relationship\..*",), (),
    refuse=(_HEAD_ACTIVATION, _ABSOLUTE), prefix="bert", config_of=_encoder_config())


def _roberta(model_type: str, config: str, model: str) -> FamilyEntry:
    return FamilyEntry(
        model_type, config, model,
        _encoder_only(positions=lambda c: f"learned(max_len = {c.max_position_embeddings - _roberta_offset(c)})",
                      head="dense(activation = gelu)"),  # RobertaLMHead's gelu, whatever hidden_act says
        _bert_layer("roberta") + ((r"lm_head\.dense\.(weight|bias)", r"head.dense.\1"),
                                  (r"lm_head\.layer_norm\.(weight|bias)", r"head.norm.\1")),
        _masked_lm_embeddings("roberta.embeddings.word_embeddings.weight", "lm_head.decoder.weight",
                              ("lm_head.bias", "lm_head.decoder.bias")),
        _BERT_DROPPED, (add_row("encoder.pos.weight", "token_type.weight", _type_rows),
                        slice_rows("encoder.pos.weight", _roberta_offset)),
        refuse=(_HEAD_ACTIVATION, _ABSOLUTE), prefix="roberta", config_of=_encoder_config(segments=False),
        folded="token type 0's embedding added to every position's; the position table starts at padding_idx + 1")


ROBERTA = _roberta("roberta", "RobertaConfig", "RobertaForMaskedLM")
XLM_ROBERTA = _roberta("xlm-roberta", "XLMRobertaConfig", "XLMRobertaForMaskedLM")

def _distil_table(config):
    from attncomp.lower import ops
    import torch

    # float64, as transformers computes it (numpy) before storing it: export casts it to the checkpoint's dtype
    return ops.sinusoidal(torch.arange(config.max_position_embeddings), config.dim, torch.float64)


def _embedding_size(config) -> int | None:
    """ELECTRA's embedding_size where it is narrower than hidden_size (embeddings_project), else unset."""
    return config.embedding_size if config.embedding_size != config.hidden_size else None


ELECTRA = FamilyEntry(
    "electra", "ElectraConfig", "ElectraForMaskedLM",
    _encoder_only(head="dense(activation = gelu)", segments=_type_rows, d_embed=_embedding_size),  # its head: gelu
    _bert_layer("electra", "segment_embed.weight") + (
        (r"electra\.embeddings_project\.(weight|bias)", r"encoder.embed_proj.\1"),
        (r"generator_predictions\.dense\.(weight|bias)", r"head.dense.\1"),
                              (r"generator_predictions\.LayerNorm\.(weight|bias)", r"head.norm.\1")),
    _masked_lm_embeddings("electra.embeddings.word_embeddings.weight", "generator_lm_head.weight",
                          ("generator_lm_head.bias",)),
    _BERT_DROPPED, (), refuse=(_HEAD_ACTIVATION, _ABSOLUTE), prefix="electra",
    config_of=_encoder_config(factorised=True))

_DISTIL = r"distilbert\.transformer\.layer\.(\d+)\."
DISTILBERT = FamilyEntry(
    "distilbert", "DistilBertConfig", "DistilBertForMaskedLM",
    _encoder_only(**{"d_model": Key("dim"), "heads": Key("n_heads"), "d_ff": Key("hidden_dim"),
                     "positions": lambda c: "sinusoidal" if c.sinusoidal_pos_embds
                     else f"learned(max_len = {c.max_position_embeddings})",
                     "head": lambda c: f"dense(activation = {ACTIVATIONS[c.activation]})", "norm_eps": 1e-12,
                     "encoder.layers": Key("n_layers"), "encoder.activation": activation_of("activation"),
                     "dropout.residual": rate("dropout"), "dropout.embedding": rate("dropout"),
                     "dropout.attention": rate("attention_dropout")}),
    tuple((_DISTIL + theirs.replace(".", r"\.") + r"\.(weight|bias)", rf"encoder.layers.\1.{ours}.\2")
          for theirs, ours in (
        ("attention.q_lin", "self_attn.q_proj"), ("attention.k_lin", "self_attn.k_proj"),
        ("attention.v_lin", "self_attn.v_proj"), ("attention.out_lin", "self_attn.o_proj"),
        ("sa_layer_norm", "self_attn_norm"), ("ffn.lin1", "ffn.fc1"), ("ffn.lin2", "ffn.fc2"),
        ("output_layer_norm", "ffn_norm"))) + (
        (r"distilbert\.embeddings\.position_embeddings\.weight", "encoder.pos.weight"),
        (r"distilbert\.embeddings\.LayerNorm\.(weight|bias)", r"encoder.embed_norm.\1"),
        (r"vocab_transform\.(weight|bias)", r"head.dense.\1"), (r"vocab_layer_norm\.(weight|bias)", r"head.norm.\1")),
    _masked_lm_embeddings("distilbert.embeddings.word_embeddings.weight", "vocab_projector.weight",
                          ("vocab_projector.bias",)),
    _BERT_DROPPED, (drop("encoder.pos.weight", lambda c: c.sinusoidal_pos_embds, _distil_table),),
    refuse=((lambda c: c.activation not in ("relu", "gelu"), lambda c: f"activation {c.activation!r}"),),
    prefix="distilbert", config_of=_distilbert_config)
# DistilBERT's sinusoidal_pos_embds table is the paper's interleaved one, computed rather than copied


# --- ModernBERT: a global layer every third among local ones, two rotary bases, GeGLU, no biases -------------

# hidden_activation -> the gated feed-forward (ModernBERT's Wi is act(input) * gate)
_MODERNBERT_GATED = {"gelu": "geglu", "gelu_new": "geglu_tanh", "gelu_pytorch_tanh": "geglu_tanh", "silu": "swiglu"}


def _full(config) -> list[int]:
    return [i for i, kind in enumerate(config.layer_types) if kind == "full_attention"]


def _modernbert_global(config) -> tuple[int, int] | None:
    """(start, every) of the global layers after layer 0 (the `first` kind, which has no attention norm):
    every global_attn_every_n_layers from there where layer 0 is global too, as transformers makes them."""
    full, layers = _full(config), config.num_hidden_layers
    whole = periodic(full, layers)
    if whole is not None and whole[0] == 0 and len(full) > 1:
        return whole[1], whole[1]
    return periodic([i for i in full if i > 0], layers)


def _modernbert_kind(config, full: bool) -> str:
    return "scaled_dot" if full else f"local(window = {config.local_attention // 2})"  # HF: |i - j| <= window / 2


def _modernbert_first(key: str):
    """A key of the `first` kind: layer 0, whose attention reads the embeddings (already normed) unnormed."""
    def value(config):
        full = 0 in _full(config)
        return {"count": 1, "block": "sequential(attention(norm = none), ffn)",
                "attention": _modernbert_kind(config, full) if full else None,
                "rope_base": rope_theta(config, "full_attention") if full else None}[key]
    return value


def _modernbert_global_key(key: str):
    def value(config):
        found = _modernbert_global(config)
        if found is None:
            return None
        return {"start": found[0], "every": found[1], "attention": "scaled_dot",
                "rope_base": rope_theta(config, "full_attention")}[key]
    return value


def _modernbert_embeddings(config) -> dict[str, tuple[str, ...]]:
    word, out = "model.embeddings.tok_embeddings.weight", "decoder.weight"
    names = {"src_embed.weight": (word, out)} if tied(config) else {"src_embed.weight": (word,),
                                                                     "output.weight": (out,)}
    if config.decoder_bias:
        names["output_bias"] = ("decoder.bias",)
    return names


def _modernbert_layer_types(enc) -> tuple[list[str], float | None]:
    """layer_types of a ModernBERT stack (its `first` kind's layer 0 full where its attention is scaled_dot,
    its `global` kind's layers full) and the full layers' rotary base (the kinds' rope_base)."""
    kinds = {kind.name: kind for kind in enc.layer}
    if set(kinds) - {"first", "global"}:
        raise UsageError("layer kinds other than ModernBERT's `first` and `global`")
    full, bases = set(), set()
    for name, kind in kinds.items():
        if kind.attention is None or kind.attention.kind != "scaled_dot":
            continue
        indices = range(kind.start, enc.layers, kind.every)
        full.update(indices[:kind.count] if kind.count is not None else indices)
        if kind.rope_base is not None:
            bases.add(kind.rope_base)
    if len(bases) > 1:
        raise UsageError("full layers of two rotary bases (ModernBERT has one global_rope_theta)")
    types = ["full_attention" if i in full else "sliding_attention" for i in range(enc.layers)]
    return types, next(iter(bases), None)


def _modernbert_config(model) -> dict:
    """The ModernBertConfig of a spec (the family's spec of it is compared with the model): layer_types from
    the `first` and `global` kinds, local_attention twice the stack's window, the two rotary bases, the
    activations, the norms' bias (norm_bias), the head's."""
    enc = _encoder(model, "rope")
    if model.positions.scaling is not None or model.positions.fraction != 1.0:
        raise UsageError("rotary scaling or a rotary fraction (ModernBERT rotates every dimension, unscaled)")
    if getattr(enc.attention, "kind", None) != "local":
        raise UsageError("no local attention in the stack (ModernBERT's layers are local but for its global ones)")
    if model.head is None or model.head.kind != "dense":
        raise UsageError("no dense head (ModernBERT's masked-LM head)")
    types, full_base = _modernbert_layer_types(enc)
    gated = {ours: theirs for theirs, ours in _MODERNBERT_GATED.items()}
    sliding = {"rope_type": "default", "rope_theta": model.positions.base}
    vocab = model.vocab
    return dict(
        _masked_lm_config(model), cls_token_id=vocab.bos, sep_token_id=vocab.sep if vocab.sep is not None else vocab.eos,
        hidden_activation=gated.get(enc.activation, enc.activation), norm_eps=model.norm_eps,
        norm_bias=bool(getattr(enc.normalization, "bias", True)), local_attention=2 * enc.attention.window,
        layer_types=types, classifier_activation=model.head.activation, classifier_bias=bool(model.head.bias),
        rope_parameters={"sliding_attention": sliding,
                         "full_attention": {"rope_type": "default",
                                            "rope_theta": full_base if full_base is not None else sliding["rope_theta"]}})


_MB = r"model\.layers\.(\d+)\."
MODERNBERT = FamilyEntry(
    "modernbert", "ModernBertConfig", "ModernBertForMaskedLM",
    {"d_model": Key("hidden_size"), "heads": Key("num_attention_heads"), "d_ff": Key("intermediate_size"),
     "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "encoder" if tied(c) else "none",
     "positions": lambda c: f"rope(base = {rope_theta(c, 'sliding_attention')!r})", "scale_embeddings": False,
     "embedding_norm": True,
     "head": lambda c: f"dense(activation = {c.classifier_activation}, bias = {str(c.classifier_bias).lower()}"
                       + ("" if c.norm_bias else ", normalization = layernorm(bias = false)") + ")",
     "norm_eps": lambda c: float(c.norm_eps), "bias.attention": Key("attention_bias"), "bias.ffn": Key("mlp_bias"),
     "bias.output": Key("decoder_bias"), "encoder.layers": Key("num_hidden_layers"), "encoder.norm": "pre",
     "encoder.final_norm": True,
     "encoder.normalization": lambda c: "layernorm" if c.norm_bias else "layernorm(bias = false)",
     "encoder.activation": lambda c: _MODERNBERT_GATED.get(c.hidden_activation),
     "encoder.attention": lambda c: _modernbert_kind(c, False),
     **{f"encoder.layer.first.{key}": _modernbert_first(key) for key in ("count", "attention", "rope_base", "block")},
     **{f"encoder.layer.global.{key}": _modernbert_global_key(key)
        for key in ("start", "every", "attention", "rope_base")},
     "dropout.residual": 0.0, "dropout.embedding": rate("embedding_dropout"),
     "dropout.attention": rate("attention_dropout"), "dropout.activation": rate("mlp_dropout")},
    ((r"model\.embeddings\.norm\.(weight|bias)", r"encoder.embed_norm.\1"),
     (_MB + r"attn_norm\.(weight|bias)", r"encoder.layers.\1.self_attn_norm.\2"),
     (_MB + r"attn\.Wqkv\.(weight|bias)", r"encoder.layers.\1.self_attn.qkv_proj.\2"),
     (_MB + r"attn\.Wo\.(weight|bias)", r"encoder.layers.\1.self_attn.o_proj.\2"),
     (_MB + r"mlp_norm\.(weight|bias)", r"encoder.layers.\1.ffn_norm.\2"),
     (_MB + r"mlp\.Wi\.(weight|bias)", r"encoder.layers.\1.ffn.gate_up.\2"),
     (_MB + r"mlp\.Wo\.(weight|bias)", r"encoder.layers.\1.ffn.fc2.\2"),
     (r"model\.final_norm\.(weight|bias)", r"encoder.norm.\1"),
     (r"head\.(dense|norm)\.(weight|bias)", r"head.\1.\2")),
    _modernbert_embeddings, (r".*rotary_emb\..*",),
    (split_qkv("concat"), split_rows("gate_up", ("gate", "fc1"))),
    refuse=(PER_TYPE_ROPE_SCALING,
            (lambda c: c.hidden_activation not in _MODERNBERT_GATED,
             lambda c: f"hidden_activation {c.hidden_activation!r} (the gated feed-forward has "
                       f"{', '.join(_MODERNBERT_GATED)})"),
            (lambda c: c.classifier_activation not in ("relu", "gelu"),
             lambda c: f"classifier_activation {c.classifier_activation!r} (the dense head has relu and gelu)"),
            (lambda c: any(i > 0 for i in _full(c)) and _modernbert_global(c) is None,
             lambda c: "layer_types " + "/".join(c.layer_types) + " (attncomp's layer kinds repeat every N "
                       "layers from a start)")),
    prefix="model", config_of=_modernbert_config,
    folded="Wqkv split into q, k, v; Wi split into GeGLU's activated input (gate) and its multiplier (fc1)")


# --- ALBERT: one layer's weights for every layer of a group, a factorised embedding ----------------------------


def _albert_share(config) -> str | None:
    """share: num_hidden_groups parameter sets, consecutive groups of num_hidden_layers / num_hidden_groups layers
    (transformers: layer i runs group int(i / (layers / groups))); none where every layer has its own."""
    groups, layers = config.num_hidden_groups, config.num_hidden_layers
    if groups == layers:
        return None
    return "all" if groups == 1 else f"groups(size = {layers // groups})"


def _albert_config(model) -> dict:
    """An ALBERT config of a spec written by hand: BERT's values, embedding_size (d_embed, narrower than d_model:
    ALBERT always projects it), num_hidden_groups (the stack's parameter sets) and one layer per group."""
    values = _encoder_config(factorised=True)(model)
    enc = model.encoder
    if isinstance(enc.share, nodes.NoSharing):  # the same model without sharing is ELECTRA's: it exports as that
        raise UsageError("no shared layers (share = all or groups(size); without them, ELECTRA's architecture)")
    if model.d_embed is None or model.d_embed >= enc.d_model:
        raise UsageError("no d_embed narrower than d_model (ALBERT's embedding_size, projected to hidden_size)")
    return dict(values, num_hidden_groups=max(enc.parameter_sets()) + 1, inner_group_num=1,
                **activation_of("hidden_act", DECODER_ACTIVATIONS).back(enc.activation))


_ALBERT_LAYER = r"albert\.encoder\.albert_layer_groups\.(\d+)\.albert_layers\.0\."
ALBERT = FamilyEntry(
    "albert", "AlbertConfig", "AlbertForMaskedLM",
    _encoder_only(head=lambda c: f"dense(activation = {DECODER_ACTIVATIONS[c.hidden_act]})", segments=_type_rows,
                  d_embed=Key("embedding_size"),
                  **{"encoder.activation": activation_of("hidden_act", DECODER_ACTIVATIONS),
                     "encoder.share": _albert_share}),
    tuple((_ALBERT_LAYER + theirs.replace(".", r"\.") + r"\.(weight|bias)", rf"encoder.layers.\1.{ours}.\2")
          for theirs, ours in (
        ("attention.query", "self_attn.q_proj"), ("attention.key", "self_attn.k_proj"),
        ("attention.value", "self_attn.v_proj"), ("attention.dense", "self_attn.o_proj"),
        ("attention.LayerNorm", "self_attn_norm"), ("ffn", "ffn.fc1"), ("ffn_output", "ffn.fc2"),
        ("full_layer_layer_norm", "ffn_norm"))) + (
        (r"albert\.embeddings\.position_embeddings\.weight", "encoder.pos.weight"),
        (r"albert\.embeddings\.token_type_embeddings\.weight", "segment_embed.weight"),
        (r"albert\.embeddings\.LayerNorm\.(weight|bias)", r"encoder.embed_norm.\1"),
        (r"albert\.encoder\.embedding_hidden_mapping_in\.(weight|bias)", r"encoder.embed_proj.\1"),
        (r"predictions\.dense\.(weight|bias)", r"head.dense.\1"),
        (r"predictions\.LayerNorm\.(weight|bias)", r"head.norm.\1")),
    _masked_lm_embeddings("albert.embeddings.word_embeddings.weight", "predictions.decoder.weight",
                          ("predictions.bias", "predictions.decoder.bias")),
    _BERT_DROPPED, (),
    refuse=((lambda c: c.hidden_act not in DECODER_ACTIVATIONS,
             lambda c: f"hidden_act {c.hidden_act!r} (attncomp's encoders and dense head have "
                       f"{', '.join(DECODER_ACTIVATIONS)})"),
            (lambda c: c.inner_group_num != 1,
             lambda c: f"inner_group_num {c.inner_group_num} (each parameter set is one layer: inner_group_num 1)"),
            (lambda c: c.num_hidden_layers % c.num_hidden_groups != 0,
             lambda c: f"num_hidden_groups {c.num_hidden_groups} not dividing num_hidden_layers "
                       f"{c.num_hidden_layers} (share = groups(size) needs equal groups)"),
            (lambda c: c.embedding_size >= c.hidden_size,
             lambda c: f"embedding_size {c.embedding_size} not below hidden_size {c.hidden_size} (d_embed is "
                       "projected to d_model only where it is narrower)"),
            _ABSOLUTE),
    prefix="albert", config_of=_albert_config,
    folded="each of num_hidden_groups layer groups is one parameter set: albert_layer_groups.g is encoder.layers.g")
