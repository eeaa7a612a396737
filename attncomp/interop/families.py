"""The Hugging Face families attncomp imports: one table entry each (attncomp.interop.mapping reads them),
and the families it refuses, each with the one thing it lacks.

A spec key's value is a config attribute (`Key`), a function of transformers' config object or a
constant; dropout is the config's own where it has one. docs/interop.md prints this table in words.
"""

from __future__ import annotations

from attncomp.errors import UsageError
from attncomp.interop.mapping import (Family, Key, add_one, add_row, attention, drop, fill, flatten, head_dim,
                                      layer_kinds, rope, rope_kind, slice_rows, split_qkv, transpose)

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}  # HF's name -> attncomp's


def _activation(name: str):
    return lambda config: ACTIVATIONS.get(getattr(config, name))


def _bad_activation(name: str):
    def test(config) -> bool:
        return getattr(config, name) not in ACTIVATIONS

    def what(config) -> str:
        value = getattr(config, name)
        tanh = " (GELU's tanh approximation)" if value in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast") else ""
        return f"activation {value!r}{tanh}; attncomp has {', '.join(ACTIVATIONS)}"
    return test, what


def _rate(*names: str):
    """The first of a config's dropout attributes that it has, as a float."""
    def read(config) -> float:
        for name in names:
            value = getattr(config, name, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
        return 0.0
    return read


def _tie(config) -> bool:
    return bool(getattr(config, "tie_word_embeddings", True))


ROPE_SCALING = (lambda c: rope_kind(c) != "default",
                lambda c: f"rope_type {rope_kind(c)!r} (rotary scaling)")
MIXED_LAYERS = (lambda c: len(layer_kinds(c)) > 1,
                lambda c: "layers of different attention kinds (layer_types " + "/".join(sorted(layer_kinds(c))) + ")")

# --- decoder-only: LLaMA and its relatives ---------------------------------------------------------

_LLAMA_LAYER = (
    (r"model\.layers\.(\d+)\.self_attn\.([qkvo])_proj\.(weight|bias)", r"decoder.layers.\1.self_attn.\2_proj.\3"),
    (r"model\.layers\.(\d+)\.self_attn\.([qk])_norm\.(weight|bias)", r"decoder.layers.\1.self_attn.\2_norm.\3"),
    (r"model\.layers\.(\d+)\.mlp\.gate_proj\.(weight|bias)", r"decoder.layers.\1.ffn.gate.\2"),
    (r"model\.layers\.(\d+)\.mlp\.up_proj\.(weight|bias)", r"decoder.layers.\1.ffn.fc1.\2"),
    (r"model\.layers\.(\d+)\.mlp\.down_proj\.(weight|bias)", r"decoder.layers.\1.ffn.fc2.\2"),
    (r"model\.norm\.(weight|bias)", r"decoder.norm.\1"),
)
_PRE_NORMS = (
    (r"model\.layers\.(\d+)\.input_layernorm\.(weight|bias)", r"decoder.layers.\1.self_attn_norm.\2"),
    (r"model\.layers\.(\d+)\.post_attention_layernorm\.(weight|bias)", r"decoder.layers.\1.ffn_norm.\2"),
)
_ROTARY = (r".*rotary_emb\.inv_freq", r".*\.masked_bias", r"transformer\.h\.\d+\.attn\.bias")


def _lm_embeddings(embed: str, heads: tuple[str, ...] = ("lm_head.weight",)):
    def embeddings(config) -> dict[str, tuple[str, ...]]:
        if _tie(config):
            return {"tgt_embed.weight": (embed, *heads)}
        return {"tgt_embed.weight": (embed,), "output.weight": heads}
    return embeddings


def _decoder_only(**changes) -> dict:
    """The spec keys of a LLaMA-like decoder (pre-norm RMSNorm, SwiGLU, rotary, grouped-query attention)."""
    spec = {
        "d_model": Key("hidden_size"), "heads": Key("num_attention_heads"),
        "kv_heads": lambda c: c.num_key_value_heads or c.num_attention_heads,
        "d_k": head_dim, "d_v": head_dim, "d_ff": Key("intermediate_size"),
        "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "decoder" if _tie(c) else "none",
        "positions": rope, "scale_embeddings": False,
        "bias.attention": lambda c: bool(getattr(c, "attention_bias", False)),
        "bias.ffn": lambda c: bool(getattr(c, "mlp_bias", False)),
        "norm_eps": lambda c: float(c.rms_norm_eps),
        "decoder.layers": Key("num_hidden_layers"), "decoder.norm": "pre", "decoder.normalization": "rmsnorm",
        "decoder.activation": "swiglu", "decoder.attention": attention,
        "dropout.residual": 0.0, "dropout.embedding": 0.0, "dropout.attention": _rate("attention_dropout"),
    }
    spec.update(changes)
    return spec


_SILU = (lambda c: c.hidden_act != "silu", lambda c: f"hidden_act {c.hidden_act!r} (the gated feed-forward is "
         "SwiGLU: silu only)")


def _llama_config(model) -> dict:
    """The config values of a LLaMA-like decoder spec (the family's spec of them is compared with it)."""
    from attncomp.vocab import BOS, EOS, PAD

    dec = model.decoder
    if model.encoder is not None or dec is None or getattr(model.positions, "kind", None) != "rope":
        raise UsageError("not a decoder-only model with rotary positions")
    return dict(vocab_size=model.tgt_vocab, hidden_size=dec.d_model, num_attention_heads=dec.heads,
                num_key_value_heads=dec.kv_heads or dec.heads, head_dim=dec.d_k, intermediate_size=dec.d_ff,
                num_hidden_layers=dec.layers, rms_norm_eps=model.norm_eps, max_position_embeddings=4096,
                rope_parameters={"rope_type": "default", "rope_theta": model.positions.base},
                attention_bias=model.bias.of("q"), mlp_bias=model.bias.of("fc1"),
                tie_word_embeddings=model.tie == "decoder", attention_dropout=model.dropout.attention,
                bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)


def _without(*keys: str, window: bool = False):
    """_llama_config less the keys a family's config lacks; `window`: the sliding window too."""
    def config_of(model) -> dict:
        values = {k: v for k, v in _llama_config(model).items() if k not in keys}
        if window:
            attention = model.decoder.attention
            if getattr(attention, "kind", None) != "local":
                raise UsageError("no sliding window (without one, Mistral is Llama)")
            values["sliding_window"] = attention.window + 1
        return values
    return config_of


def _llama_like(model_type: str, config: str, model: str, spec: dict | None = None, renames=_PRE_NORMS,
                refuse=(), activation=_SILU, transforms=(), folded: str = "", config_of=None) -> Family:
    return Family(model_type, config, model, _decoder_only(**(spec or {})), _LLAMA_LAYER + renames,
                  _lm_embeddings("model.embed_tokens.weight"), _ROTARY, transforms,
                  refuse=(ROPE_SCALING, activation, *refuse), prefix="model", folded=folded, config_of=config_of)


LLAMA = _llama_like("llama", "LlamaConfig", "LlamaForCausalLM", refuse=(MIXED_LAYERS,), config_of=_llama_config)
MISTRAL = _llama_like("mistral", "MistralConfig", "MistralForCausalLM", refuse=(MIXED_LAYERS,),
                      config_of=_without("attention_bias", "mlp_bias", window=True))
QWEN2 = _llama_like("qwen2", "Qwen2Config", "Qwen2ForCausalLM", refuse=(MIXED_LAYERS,),
                    spec={"bias.attention": False, "bias.q": True, "bias.k": True, "bias.v": True},
                    config_of=_without("attention_bias", "mlp_bias", "head_dim"))
QWEN3 = _llama_like("qwen3", "Qwen3Config", "Qwen3ForCausalLM", refuse=(MIXED_LAYERS,),
                    spec={"decoder.qk_norm": "head"}, config_of=_without("mlp_bias"))
OLMO2 = _llama_like(
    "olmo2", "Olmo2Config", "Olmo2ForCausalLM", spec={"decoder.qk_norm": "projection", "decoder.norm": "output"},
    config_of=_without("mlp_bias", "head_dim"),
    renames=((r"model\.layers\.(\d+)\.post_attention_layernorm\.(weight|bias)", r"decoder.layers.\1.self_attn_norm.\2"),
             (r"model\.layers\.(\d+)\.post_feedforward_layernorm\.(weight|bias)", r"decoder.layers.\1.ffn_norm.\2")))
STABLELM = _llama_like(
    "stablelm", "StableLmConfig", "StableLmForCausalLM",
    spec={"bias.attention": False, "bias.q": Key("use_qkv_bias"), "bias.k": Key("use_qkv_bias"),
          "bias.v": Key("use_qkv_bias"), "bias.ffn": False, "norm_eps": lambda c: float(c.layer_norm_eps),
          "decoder.normalization": "layernorm", "decoder.attention": "scaled_dot",
          "dropout.attention": _rate("attention_dropout")},
    refuse=((lambda c: c.use_parallel_residual, "use_parallel_residual (attention and feed-forward in parallel)"),
            (lambda c: c.qk_layernorm,
             "qk_layernorm (a LayerNorm of q and k per head; attncomp's qk_norm is RMSNorm)")))

_GATED = {"silu": "swiglu", "gelu": "geglu"}  # transformers' GemmaConfig reads "gelu" as the tanh form
GEMMA = _llama_like(
    "gemma", "GemmaConfig", "GemmaForCausalLM",
    spec={"decoder.activation": lambda c: _GATED.get(c.hidden_act), "scale_embeddings": True},
    activation=(lambda c: c.hidden_act not in _GATED,
                lambda c: f"hidden_act {c.hidden_act!r}" + (" (GELU's tanh approximation: Gemma's default, and what "
                                                            "its config's 'gelu' means)" if "tanh" in str(c.hidden_act)
                                                            else "")),
    transforms=(add_one(r".*norm\.weight"),), folded="RMSNorm gains 1 + w (Gemma's norms multiply by 1 + w)")


def _olmo_norms(config) -> dict[str, tuple[float, int]]:
    """OLMo's LayerNorms have no parameters: weight 1, bias 0 in attncomp's."""
    names = [f"decoder.layers.{i}.{norm}" for i in range(config.num_hidden_layers)
             for norm in ("self_attn_norm", "ffn_norm")] + ["decoder.norm"]
    return {f"{name}.{leaf}": (value, config.hidden_size) for name in names
            for leaf, value in (("weight", 1.0), ("bias", 0.0))}


OLMO = _llama_like(
    "olmo", "OlmoConfig", "OlmoForCausalLM",
    spec={"decoder.normalization": "layernorm", "norm_eps": 1e-5, "decoder.attention": "scaled_dot"},
    refuse=((lambda c: c.clip_qkv is not None, "clip_qkv (queries, keys and values clipped)"),),
    transforms=(fill(_olmo_norms),), folded="its parameter-free LayerNorms as weight 1, bias 0")

# --- GPT-2 and GPT-NeoX: fused QKV ---------------------------------------------------------------

GPT2 = Family(
    "gpt2", "GPT2Config", "GPT2LMHeadModel",
    {"d_model": Key("n_embd"), "heads": Key("n_head"), "d_ff": lambda c: c.n_inner or 4 * c.n_embd,
     "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "decoder" if _tie(c) else "none",
     "positions": lambda c: f"learned(max_len = {c.n_positions})", "scale_embeddings": False,
     "bias.attention": True, "bias.ffn": True, "norm_eps": lambda c: float(c.layer_norm_epsilon),
     "decoder.layers": Key("n_layer"), "decoder.norm": "pre", "decoder.activation": _activation("activation_function"),
     "dropout.residual": _rate("resid_pdrop"), "dropout.embedding": _rate("embd_pdrop"),
     "dropout.attention": _rate("attn_pdrop")},
    ((r"transformer\.wpe\.weight", "decoder.pos.weight"),
     (r"transformer\.h\.(\d+)\.ln_1\.(weight|bias)", r"decoder.layers.\1.self_attn_norm.\2"),
     (r"transformer\.h\.(\d+)\.ln_2\.(weight|bias)", r"decoder.layers.\1.ffn_norm.\2"),
     (r"transformer\.h\.(\d+)\.attn\.c_attn\.(weight|bias)", r"decoder.layers.\1.self_attn.qkv_proj.\2"),
     (r"transformer\.h\.(\d+)\.attn\.c_proj\.(weight|bias)", r"decoder.layers.\1.self_attn.o_proj.\2"),
     (r"transformer\.h\.(\d+)\.mlp\.c_fc\.(weight|bias)", r"decoder.layers.\1.ffn.fc1.\2"),
     (r"transformer\.h\.(\d+)\.mlp\.c_proj\.(weight|bias)", r"decoder.layers.\1.ffn.fc2.\2"),
     (r"transformer\.ln_f\.(weight|bias)", r"decoder.norm.\1")),
    _lm_embeddings("transformer.wte.weight"), _ROTARY,
    (transpose(r"decoder\.layers\.\d+\.(self_attn\.(qkv|o)_proj|ffn\.fc[12])\.weight"), split_qkv("concat")),
    refuse=(_bad_activation("activation_function"),
            (lambda c: not c.scale_attn_weights, "scale_attn_weights = false (unscaled dot products)"),
            (lambda c: c.scale_attn_by_inverse_layer_idx, "scale_attn_by_inverse_layer_idx (a per-layer score scale)"),
            (lambda c: c.add_cross_attention, "add_cross_attention")),
    folded="Conv1D weights transposed; c_attn split into q, k, v", prefix="transformer")

GPT_NEOX = Family(
    "gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM",
    {"d_model": Key("hidden_size"), "heads": Key("num_attention_heads"), "d_ff": Key("intermediate_size"),
     "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "decoder" if _tie(c) else "none",
     "positions": rope, "scale_embeddings": False, "bias.attention": Key("attention_bias"), "bias.ffn": True,
     "norm_eps": lambda c: float(c.layer_norm_eps), "decoder.layers": Key("num_hidden_layers"),
     "decoder.norm": "pre", "decoder.activation": _activation("hidden_act"),
     "dropout.residual": _rate("hidden_dropout"), "dropout.embedding": 0.0,
     "dropout.attention": _rate("attention_dropout")},
    ((r"gpt_neox\.layers\.(\d+)\.input_layernorm\.(weight|bias)", r"decoder.layers.\1.self_attn_norm.\2"),
     (r"gpt_neox\.layers\.(\d+)\.post_attention_layernorm\.(weight|bias)", r"decoder.layers.\1.ffn_norm.\2"),
     (r"gpt_neox\.layers\.(\d+)\.attention\.query_key_value\.(weight|bias)",
      r"decoder.layers.\1.self_attn.qkv_proj.\2"),
     (r"gpt_neox\.layers\.(\d+)\.attention\.dense\.(weight|bias)", r"decoder.layers.\1.self_attn.o_proj.\2"),
     (r"gpt_neox\.layers\.(\d+)\.mlp\.dense_h_to_4h\.(weight|bias)", r"decoder.layers.\1.ffn.fc1.\2"),
     (r"gpt_neox\.layers\.(\d+)\.mlp\.dense_4h_to_h\.(weight|bias)", r"decoder.layers.\1.ffn.fc2.\2"),
     (r"gpt_neox\.final_layer_norm\.(weight|bias)", r"decoder.norm.\1")),
    _lm_embeddings("gpt_neox.embed_in.weight", ("embed_out.weight", "lm_head.weight")),
    _ROTARY + (r"gpt_neox\.layers\.\d+\.attention\.bias",), (split_qkv("per_head"),),
    refuse=(ROPE_SCALING, _bad_activation("hidden_act"),
            (lambda c: c.use_parallel_residual, "use_parallel_residual (attention and feed-forward in parallel)")),
    folded="query_key_value split into q, k, v (per-head layout)", prefix="gpt_neox")

# --- encoder-only: BERT and its relatives ------------------------------------------------------------


def _bert_layer(prefix: str) -> tuple[tuple[str, str], ...]:
    layer = rf"{prefix}\.encoder\.layer\.(\d+)\."
    pairs = (("attention.self.query", "self_attn.q_proj"), ("attention.self.key", "self_attn.k_proj"),
             ("attention.self.value", "self_attn.v_proj"), ("attention.output.dense", "self_attn.o_proj"),
             ("attention.output.LayerNorm", "self_attn_norm"), ("intermediate.dense", "ffn.fc1"),
             ("output.dense", "ffn.fc2"), ("output.LayerNorm", "ffn_norm"))
    return tuple((layer + theirs.replace(".", r"\.") + r"\.(weight|bias)", rf"encoder.layers.\1.{ours}.\2")
                 for theirs, ours in pairs) + (
        (rf"{prefix}\.embeddings\.position_embeddings\.weight", "encoder.pos.weight"),
        (rf"{prefix}\.embeddings\.token_type_embeddings\.weight", "token_type.weight"),
        (rf"{prefix}\.embeddings\.LayerNorm\.(weight|bias)", r"encoder.embed_norm.\1"))


def _masked_lm_embeddings(word: str, decoder: str, biases: tuple[str, ...]):
    def embeddings(config) -> dict[str, tuple[str, ...]]:
        if _tie(config):
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
        "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "encoder" if _tie(c) else "none",
        "positions": lambda c: f"learned(max_len = {c.max_position_embeddings})", "scale_embeddings": False,
        "embedding_norm": True, "head": lambda c: f"dense(activation = {ACTIVATIONS[c.hidden_act]})",
        "norm_eps": lambda c: float(c.layer_norm_eps),
        "bias.attention": True, "bias.ffn": True, "bias.output": True,
        "encoder.layers": Key("num_hidden_layers"), "encoder.norm": "post",
        "encoder.activation": _activation("hidden_act"),
        "dropout.residual": _rate("hidden_dropout_prob"), "dropout.embedding": _rate("hidden_dropout_prob"),
        "dropout.attention": _rate("attention_probs_dropout_prob"),
    }
    spec.update(changes)
    return spec


_HEAD_ACTIVATION = (lambda c: c.hidden_act not in ("relu", "gelu"),
                    lambda c: f"hidden_act {c.hidden_act!r} (attncomp's encoders and dense head have relu and gelu)")
_ABSOLUTE = (lambda c: getattr(c, "position_embedding_type", "absolute") != "absolute",
             lambda c: f"position_embedding_type {c.position_embedding_type!r} (Shaw/Huang relative keys)")
_BERT_DROPPED = (r".*\.position_ids", r".*\.token_type_ids", r".*\.pooler\..*")

BERT = Family(
    "bert", "BertConfig", "BertForMaskedLM", _encoder_only(),
    _bert_layer("bert") + ((r"cls\.predictions\.transform\.dense\.(weight|bias)", r"head.dense.\1"),
                           (r"cls\.predictions\.transform\.LayerNorm\.(weight|bias)", r"head.norm.\1")),
    _masked_lm_embeddings("bert.embeddings.word_embeddings.weight", "cls.predictions.decoder.weight",
                          ("cls.predictions.bias", "cls.predictions.decoder.bias")),
    _BERT_DROPPED + (r"cls\.seq_relationship\..*",), (add_row("encoder.pos.weight", "token_type.weight", _type_rows),),
    refuse=(_HEAD_ACTIVATION, _ABSOLUTE), pad_first=True, prefix="bert",
    folded="token type 0's embedding added to every position's")


def _roberta(model_type: str, config: str, model: str) -> Family:
    return Family(
        model_type, config, model,
        _encoder_only(positions=lambda c: f"learned(max_len = {c.max_position_embeddings - _roberta_offset(c)})",
                      head="dense(activation = gelu)"),  # RobertaLMHead's gelu, whatever hidden_act says
        _bert_layer("roberta") + ((r"lm_head\.dense\.(weight|bias)", r"head.dense.\1"),
                                  (r"lm_head\.layer_norm\.(weight|bias)", r"head.norm.\1")),
        _masked_lm_embeddings("roberta.embeddings.word_embeddings.weight", "lm_head.decoder.weight",
                              ("lm_head.bias", "lm_head.decoder.bias")),
        _BERT_DROPPED, (add_row("encoder.pos.weight", "token_type.weight", _type_rows),
                        slice_rows("encoder.pos.weight", _roberta_offset)),
        refuse=(_HEAD_ACTIVATION, _ABSOLUTE), pad_first=True, prefix="roberta",
        folded="token type 0's embedding added to every position's; the position table starts at padding_idx + 1")


ROBERTA = _roberta("roberta", "RobertaConfig", "RobertaForMaskedLM")
XLM_ROBERTA = _roberta("xlm-roberta", "XLMRobertaConfig", "XLMRobertaForMaskedLM")

def _distil_table(config):
    from attncomp.lower import ops
    import torch

    return ops.sinusoidal(torch.arange(config.max_position_embeddings), config.dim, torch.float32)


ELECTRA = Family(
    "electra", "ElectraConfig", "ElectraForMaskedLM",
    _encoder_only(head="dense(activation = gelu)"),  # ElectraGeneratorPredictions' gelu
    _bert_layer("electra") + ((r"generator_predictions\.dense\.(weight|bias)", r"head.dense.\1"),
                              (r"generator_predictions\.LayerNorm\.(weight|bias)", r"head.norm.\1")),
    _masked_lm_embeddings("electra.embeddings.word_embeddings.weight", "generator_lm_head.weight",
                          ("generator_lm_head.bias",)),
    _BERT_DROPPED, (add_row("encoder.pos.weight", "token_type.weight", _type_rows),),
    refuse=(_HEAD_ACTIVATION, _ABSOLUTE,
            (lambda c: c.embedding_size != c.hidden_size,
             lambda c: f"embedding_size {c.embedding_size} != hidden_size {c.hidden_size} (embeddings_project)")),
    pad_first=True, prefix="electra", folded="token type 0's embedding added to every position's")

_DISTIL = r"distilbert\.transformer\.layer\.(\d+)\."
DISTILBERT = Family(
    "distilbert", "DistilBertConfig", "DistilBertForMaskedLM",
    _encoder_only(**{"d_model": Key("dim"), "heads": Key("n_heads"), "d_ff": Key("hidden_dim"),
                     "positions": lambda c: "sinusoidal" if c.sinusoidal_pos_embds
                     else f"learned(max_len = {c.max_position_embeddings})",
                     "head": lambda c: f"dense(activation = {ACTIVATIONS[c.activation]})", "norm_eps": 1e-12,
                     "encoder.layers": Key("n_layers"), "encoder.activation": _activation("activation"),
                     "dropout.residual": _rate("dropout"), "dropout.embedding": _rate("dropout"),
                     "dropout.attention": _rate("attention_dropout")}),
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
    pad_first=True, prefix="distilbert")
# DistilBERT's sinusoidal_pos_embds table is the paper's interleaved one, computed rather than copied

# --- encoder-decoder: Marian, BART, mBART ----------------------------------------------------------


def _stack(side: str, norm: str) -> dict:
    return {f"{side}.layers": Key(f"{side}_layers"), f"{side}.d_model": Key("d_model"),
            f"{side}.heads": Key(f"{side}_attention_heads"), f"{side}.d_ff": Key(f"{side}_ffn_dim"),
            f"{side}.norm": norm, f"{side}.activation": _activation("activation_function")}


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
        if _tie(config):
            return {"src_embed.weight": (enc,), "tgt_embed.weight": (dec, head)}
        return {"src_embed.weight": (enc,), "tgt_embed.weight": (dec,), "output.weight": (head,)}
    if _tie(config):
        return {"embed.weight": ("model.shared.weight", enc, dec, head)}
    return {"src_embed.weight": ("model.shared.weight", enc), "tgt_embed.weight": ("model.shared.weight", dec),
            "output.weight": (head,)}


def _seq2seq_tie(config) -> str:
    if not _tie(config):
        return "none"
    return "all" if _marian_shared(config) else "decoder"


def _seq2seq(norm: str, **changes) -> dict:
    spec = {
        "vocab": lambda c: f"shared({c.vocab_size})", "tie": _seq2seq_tie,
        "positions": lambda c: f"learned(max_len = {c.max_position_embeddings})",
        "scale_embeddings": lambda c: bool(c.scale_embedding), "embedding_norm": True,
        "bias.attention": True, "bias.ffn": True, "bias.output": True, "norm_eps": 1e-5,
        **_stack("encoder", norm), **_stack("decoder", norm),
        "dropout.residual": _rate("dropout"), "dropout.embedding": _rate("dropout"),
        "dropout.attention": _rate("attention_dropout"), "dropout.activation": _rate("activation_dropout"),
    }
    spec.update(changes)
    return spec


_BART_OFFSET = 2  # BartLearnedPositionalEmbedding: position p reads row p + 2

BART = Family(
    "bart", "BartConfig", "BartForConditionalGeneration", _seq2seq("post"), _seq2seq_layer(), _seq2seq_embeddings,
    (), (slice_rows("encoder.pos.weight", lambda c: _BART_OFFSET),
         slice_rows("decoder.pos.weight", lambda c: _BART_OFFSET),
         flatten("output_bias")),
    refuse=(_bad_activation("activation_function"),), pad_first=True, prefix="model",
    folded="position tables start at row 2 (BART's offset)")
MBART = Family(
    "mbart", "MBartConfig", "MBartForConditionalGeneration", _seq2seq("pre"), _seq2seq_layer(), _seq2seq_embeddings,
    (), BART.transforms, refuse=BART.refuse, pad_first=True, folded=BART.folded, prefix="model")
def _halves(config):
    """Marian's sinusoid table (all sines, then all cosines), as transformers stores it: float32."""
    from attncomp.lower import ops
    import torch

    table = ops.sinusoidal_halves(torch.arange(config.max_position_embeddings), config.d_model, torch.float64)
    return table.float()


MARIAN = Family(
    "marian", "MarianConfig", "MarianMTModel",
    _seq2seq("post", **{"vocab": lambda c: f"shared({c.vocab_size})" if _marian_shared(c)
                        else f"separate({c.vocab_size}, {c.decoder_vocab_size or c.vocab_size})",
                        "positions": "sinusoidal(layout = halves)", "embedding_norm": None}),
    _seq2seq_layer(), _seq2seq_embeddings, (),
    (flatten("output_bias"), drop("encoder.pos.weight", lambda c: True, lambda c: _halves(c)),
     drop("decoder.pos.weight", lambda c: True, lambda c: _halves(c))),
    refuse=(_bad_activation("activation_function"),),
    folded="sinusoid tables computed, not copied; vocabulary rows renumbered with the tokenizers")

IMPORTED = {f.model_type: f for f in (MARIAN, BART, MBART, LLAMA, MISTRAL, QWEN2, QWEN3, OLMO, OLMO2, STABLELM,
                                      GEMMA, GPT2, GPT_NEOX, BERT, ROBERTA, XLM_ROBERTA, DISTILBERT, ELECTRA)}

# model_type -> what has no spec equivalent (refused before anything else is read)
REFUSED = {
    "t5": "T5's relative position bias (bucketed, learned per head, shared across layers)",
    "mt5": "T5's relative position bias (bucketed, learned per head, shared across layers)",
    "umt5": "T5's relative position bias (bucketed, learned per head, per layer)",
    "gemma2": "attention and final logit soft-capping, and alternating local/global layers",
    "gemma3": "alternating local/global layers with two rotary bases",
    "phi": "parallel attention and feed-forward blocks",
    "phi3": "a fused gate_up projection with LongRoPE scaling",
    "falcon": "parallel attention and feed-forward blocks (parallel_attn)",
    "gptj": "parallel attention and feed-forward blocks, and interleaved rotary pairs",
    "m2m_100": "fairseq's sinusoid frequencies 10000^(-i/(d/2 - 1)), which no positions layout reproduces",
    "nllb-moe": "mixture-of-experts feed-forwards",
    "modernbert": "alternating local/global attention with two rotary bases, and GeGLU without biases",
    "mixtral": "mixture-of-experts feed-forwards",
    "qwen2_moe": "mixture-of-experts feed-forwards",
    "bloom": "ALiBi with embedding LayerNorm and fused per-head QKV",
    "opt": "learned positions with an offset and a projection of the embeddings (project_in/out)",
}
