"""Decoder-only families: LLaMA and its relatives (Mistral, Qwen2, Qwen3, OLMo, OLMo 2, StableLM, Phi-3, Gemma,
Gemma 2, Gemma 3's text model),
GPT-2, GPT-NeoX, OPT, BLOOM (ALiBi), and the parallel-block Phi, GPT-J and Falcon."""

from __future__ import annotations

from attncomp.errors import UsageError
from attncomp.ir import nodes
from attncomp.interop.families.common import DECODER_ACTIVATIONS, MIXED_LAYERS, ROPE_SCALING, activation_of, bad_activation, rate, tied
from attncomp.interop.mapping import (FamilyEntry, Key, attention, rename_module, fill, head_dim, rope, scaling_parameters,
                                     special_ids, split_qkv, transpose)
from attncomp.interop.families.common import PER_TYPE_UNSUPPORTED_SCALING, per_type_scaling, periodic, rope_theta
from attncomp.interop.mapping import pairs_to_halves, split_rows



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
        if tied(config):
            return {"tgt_embed.weight": (embed, *heads)}
        return {"tgt_embed.weight": (embed,), "output.weight": heads}
    return embeddings


def _decoder_only(**changes) -> dict:
    """The spec keys of a LLaMA-like decoder (pre-norm RMSNorm, SwiGLU, rotary, grouped-query attention)."""
    spec = {
        "d_model": Key("hidden_size"), "heads": Key("num_attention_heads"),
        "kv_heads": lambda c: c.num_key_value_heads or c.num_attention_heads,
        "d_k": head_dim, "d_v": head_dim, "d_ff": Key("intermediate_size"),
        "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "decoder" if tied(c) else "none",
        "positions": rope, "scale_embeddings": False,
        "bias.attention": lambda c: bool(getattr(c, "attention_bias", False)),
        "bias.ffn": lambda c: bool(getattr(c, "mlp_bias", False)),
        "norm_eps": lambda c: float(c.rms_norm_eps),
        "decoder.layers": Key("num_hidden_layers"), "decoder.norm": "pre", "decoder.normalization": "rmsnorm",
        "decoder.activation": "swiglu", "decoder.attention": attention,
        "dropout.residual": 0.0, "dropout.embedding": 0.0, "dropout.attention": rate("attention_dropout"),
    }
    spec.update(changes)
    return spec


_SILU = (lambda c: c.hidden_act != "silu", lambda c: f"hidden_act {c.hidden_act!r} (the gated feed-forward is "
         "SwiGLU: silu only)")


def _decoder(model, positions: str):
    """The decoder stack of a decoder-only spec with `positions` (rope, learned); refused otherwise."""
    if model.encoder is not None or model.decoder is None or getattr(model.positions, "kind", None) != positions:
        raise UsageError(f"not a decoder-only model with {positions} positions")
    return model.decoder


def _lm_config(model) -> dict:
    """What every decoder-only config takes from the spec: the vocabulary, its special ids, the tying."""
    return dict(vocab_size=model.tgt_vocab, tie_word_embeddings=model.tie == "decoder", **special_ids(model))


def _rotary(model) -> dict:
    """rope_parameters (base, scaling, and partial_rotary_factor where only a fraction of d_k rotates) and
    max_position_embeddings of a spec's `rope(...)`."""
    rope_parameters, max_len = scaling_parameters(model.positions)
    if model.positions.fraction != 1.0:
        rope_parameters["partial_rotary_factor"] = model.positions.fraction
    return dict(rope_parameters=rope_parameters, max_position_embeddings=max_len)


def _llama_config(model) -> dict:
    """The config values of a LLaMA-like decoder spec (the family's spec of them is compared with it)."""
    dec = model.decoder
    if model.encoder is not None or dec is None or getattr(model.positions, "kind", None) != "rope":
        raise UsageError("not a decoder-only model with rotary positions")
    rope_parameters, max_len = scaling_parameters(model.positions)
    return dict(vocab_size=model.tgt_vocab, hidden_size=dec.d_model, num_attention_heads=dec.heads,
                num_key_value_heads=dec.kv_heads or dec.heads, head_dim=dec.d_k, intermediate_size=dec.d_ff,
                num_hidden_layers=dec.layers, rms_norm_eps=model.norm_eps, max_position_embeddings=max_len,
                rope_parameters=rope_parameters,
                attention_bias=model.bias.of("q"), mlp_bias=model.bias.of("fc1"),
                tie_word_embeddings=model.tie == "decoder", attention_dropout=model.dropout.attention,
                bos_token_id=model.vocab.bos, eos_token_id=model.vocab.eos, pad_token_id=model.vocab.pad)


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


def _phi3_config(model) -> dict:
    """Phi-3: Llama's without biases or head_dim (d_model / heads), a sliding window where the stack's
    attention is local, the config-level original_max_position_embeddings of LongRoPE."""
    values = _without("attention_bias", "mlp_bias", "head_dim")(model)
    attention = model.decoder.attention
    if getattr(attention, "kind", None) == "local":
        values["sliding_window"] = attention.window + 1
    original = values["rope_parameters"].get("original_max_position_embeddings")
    values["original_max_position_embeddings"] = original or values["max_position_embeddings"]
    return values


def _stablelm_config(model) -> dict:
    """StableLM: Llama's with LayerNorm, a rotary fraction, q/k/v biases (use_qkv_bias), parallel blocks."""
    values = _without("attention_bias", "mlp_bias", "head_dim", "rms_norm_eps")(model)
    return dict(values, **_rotary(model), layer_norm_eps=model.norm_eps, use_qkv_bias=bool(model.bias.of("q")),
                use_parallel_residual=model.decoder.block.kind == "parallel")


def _olmo_config(model) -> dict:
    """OLMo: Llama's with parameter-free LayerNorms (eps fixed) and clip_qkv."""
    values = _without("mlp_bias", "head_dim", "rms_norm_eps")(model)
    return dict(values, clip_qkv=model.decoder.attention.clip_qkv or None)


def _gemma_config(model) -> dict:
    """Gemma: Llama's with GeGLU (gelu_pytorch_tanh) or SwiGLU (silu)."""
    values = _without("mlp_bias")(model)
    activation = model.decoder.activation
    return dict(values, hidden_act={"geglu_tanh": "gelu_pytorch_tanh", "swiglu": "silu"}.get(activation, activation))


def _gpt2_config(model) -> dict:
    dec = _decoder(model, "learned")
    return dict(_lm_config(model), n_inner=dec.d_ff, n_positions=model.positions.max_len)


def _neox_config(model) -> dict:
    dec = _decoder(model, "rope")
    return dict(_lm_config(model), **_rotary(model), use_parallel_residual=dec.block.kind == "parallel")


def _phi_config(model) -> dict:
    dec = _decoder(model, "rope")
    return dict(_lm_config(model), **_rotary(model), num_key_value_heads=dec.kv_heads or dec.heads)


def _falcon_config(model) -> dict:
    """Falcon's three block layouts: sequential, parallel with one norm (parallel_attn), parallel with two
    (new_decoder_architecture: num_kv_heads); without the new architecture, kv heads are one (multi_query)
    or every head."""
    dec = _decoder(model, "rope")
    parallel = dec.block.kind == "parallel"
    new = parallel and dec.block.norms == 2
    kv = dec.kv_heads or dec.heads
    return dict(_lm_config(model), **_rotary(model), ffn_hidden_size=dec.d_ff, parallel_attn=parallel,
                new_decoder_architecture=new, num_kv_heads=kv if new else None, multi_query=not new and kv == 1,
                num_ln_in_parallel_attn=None, alibi=False)


def _llama_like(model_type: str, config: str, model: str, spec: dict | None = None, renames=_PRE_NORMS,
                refuse=(), activation=_SILU, transforms=(), folded: str = "", config_of=None,
                named_only: bool = False) -> FamilyEntry:
    return FamilyEntry(model_type, config, model, _decoder_only(**(spec or {})), _LLAMA_LAYER + renames,
                  _lm_embeddings("model.embed_tokens.weight"), _ROTARY, transforms,
                  refuse=(ROPE_SCALING, activation, *refuse), prefix="model", folded=folded, config_of=config_of,
                       named_only=named_only)


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
          "decoder.block": lambda c: "parallel" if c.use_parallel_residual else None,
          "dropout.attention": rate("attention_dropout")}, config_of=_stablelm_config,
    renames=((r"model\.layers\.(\d+)\.input_layernorm\.(weight|bias)", r"decoder.layers.\1.input_layernorm.\2"),
             (r"model\.layers\.(\d+)\.post_attention_layernorm\.(weight|bias)", r"decoder.layers.\1.ffn_norm.\2")),
    transforms=(rename_module("input_layernorm", lambda c: "norm" if c.use_parallel_residual else "self_attn_norm"),),
    refuse=((lambda c: c.qk_layernorm,
             "qk_layernorm (a LayerNorm of q and k per head; attncomp's qk_norm is RMSNorm)"),))

# Phi-3: Llama's layers with fused projections (qkv_proj: q, then k and v of the kv heads; gate_up_proj: SwiGLU's
# gate, then its multiplier), no biases, residual dropout, and LongRoPE where rope_parameters has it
PHI3 = _llama_like(
    "phi3", "Phi3Config", "Phi3ForCausalLM",
    spec={"bias.attention": False, "bias.ffn": False, "dropout.residual": rate("resid_pdrop")},
    renames=_PRE_NORMS + (
        (r"model\.layers\.(\d+)\.self_attn\.qkv_proj\.(weight|bias)", r"decoder.layers.\1.self_attn.qkv_proj.\2"),
        (r"model\.layers\.(\d+)\.mlp\.gate_up_proj\.(weight|bias)", r"decoder.layers.\1.ffn.gate_up.\2")),
    transforms=(split_qkv("concat", lambda c: c.num_key_value_heads or c.num_attention_heads),
                split_rows("gate_up", ("gate", "fc1"))),
    folded="qkv_proj split into q, k, v (concat layout, kv heads wide k and v); gate_up_proj split into gate, fc1",
    config_of=_phi3_config, named_only=True)  # its every spec is Llama's (or Mistral's, with a window)

# Gemma's gated feed-forward: silu -> SwiGLU; GELU's tanh approximation (gelu_pytorch_tanh, Gemma's default, and
# the legacy "gelu" of the released configs, which GemmaConfig reads as the tanh form) -> GeGLU with tanh
_GATED = {"silu": "swiglu", "gelu": "geglu_tanh", "gelu_pytorch_tanh": "geglu_tanh", "gelu_new": "geglu_tanh"}
GEMMA = _llama_like(
    "gemma", "GemmaConfig", "GemmaForCausalLM",
    spec={"decoder.activation": lambda c: _GATED.get(c.hidden_act), "scale_embeddings": True,
          "decoder.normalization": "rmsnorm(offset = 1)"},  # x / rms(x) * (1 + w): the stored w is the parameter
    activation=(lambda c: c.hidden_act not in _GATED,
                lambda c: f"hidden_act {c.hidden_act!r} (Gemma's gated feed-forward has {', '.join(_GATED)})"),
    config_of=_gemma_config)


def _olmo_norms(config) -> dict[str, tuple[float, int]]:
    """OLMo's LayerNorms have no parameters: weight 1, bias 0 in attncomp's."""
    names = [f"decoder.layers.{i}.{norm}" for i in range(config.num_hidden_layers)
             for norm in ("self_attn_norm", "ffn_norm")] + ["decoder.norm"]
    return {f"{name}.{leaf}": (value, config.hidden_size) for name in names
            for leaf, value in (("weight", 1.0), ("bias", 0.0))}


OLMO = _llama_like(
    "olmo", "OlmoConfig", "OlmoForCausalLM",
    spec={"decoder.normalization": "layernorm", "norm_eps": 1e-5,
          "decoder.attention": lambda c: "scaled_dot" if c.clip_qkv is None else
          f"scaled_dot(clip_qkv = {float(c.clip_qkv)!r})"},  # q, k, v clamped to [-c, c]
    transforms=(fill(_olmo_norms),), folded="its parameter-free LayerNorms as weight 1, bias 0",
    config_of=_olmo_config)

# --- GPT-2 and GPT-NeoX: fused QKV ---------------------------------------------------------------

GPT2 = FamilyEntry(
    "gpt2", "GPT2Config", "GPT2LMHeadModel",
    {"d_model": Key("n_embd"), "heads": Key("n_head"), "d_ff": lambda c: c.n_inner or 4 * c.n_embd,
     "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "decoder" if tied(c) else "none",
     "positions": lambda c: f"learned(max_len = {c.n_positions})", "scale_embeddings": False,
     "bias.attention": True, "bias.ffn": True, "norm_eps": Key("layer_norm_epsilon", float),
     "decoder.layers": Key("n_layer"), "decoder.norm": "pre",
     "decoder.activation": activation_of("activation_function", DECODER_ACTIVATIONS),
     "dropout.residual": rate("resid_pdrop"), "dropout.embedding": rate("embd_pdrop"),
     "dropout.attention": rate("attn_pdrop")},
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
    refuse=(bad_activation("activation_function", DECODER_ACTIVATIONS),
            (lambda c: not c.scale_attn_weights, "scale_attn_weights = false (unscaled dot products)"),
            (lambda c: c.scale_attn_by_inverse_layer_idx, "scale_attn_by_inverse_layer_idx (a per-layer score scale)"),
            (lambda c: c.add_cross_attention, "add_cross_attention")),
    folded="Conv1D weights transposed; c_attn split into q, k, v", prefix="transformer", config_of=_gpt2_config)

GPT_NEOX = FamilyEntry(
    "gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM",
    {"d_model": Key("hidden_size"), "heads": Key("num_attention_heads"), "d_ff": Key("intermediate_size"),
     "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "decoder" if tied(c) else "none",
     "positions": rope, "scale_embeddings": False, "bias.attention": Key("attention_bias"), "bias.ffn": True,
     "norm_eps": Key("layer_norm_eps", float), "decoder.layers": Key("num_hidden_layers"),
     "decoder.norm": "pre", "decoder.activation": activation_of("hidden_act", DECODER_ACTIVATIONS),
     "decoder.block": lambda c: "parallel(norms = 2)" if c.use_parallel_residual else None,
     "dropout.residual": rate("hidden_dropout"), "dropout.embedding": 0.0,
     "dropout.attention": rate("attention_dropout")},
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
    refuse=(ROPE_SCALING, bad_activation("hidden_act", DECODER_ACTIVATIONS)),
    folded="query_key_value split into q, k, v (per-head layout)", prefix="gpt_neox", config_of=_neox_config)

def _bloom_config(model) -> dict:
    """BLOOM: the vocabulary and its ids; its other values are Keys (d_ff is 4 d_model, fixed: the spec of
    the config compares it)."""
    decoder = _decoder(model, "alibi")
    normed = any(isinstance(s.skip, nodes.NormedSkip) for s in decoder.block.sublayers)
    return dict(_lm_config(model), apply_residual_connection_post_layernorm=normed, pretraining_tp=1,
                slow_but_exact=False)


# BLOOM: pre-norm LayerNorm decoder with ALiBi (scores q.k / sqrt(d_k) plus the unscaled bias, as HF's
# alibi.baddbmm(q, k^T, beta=1, alpha=1/sqrt(d_k))), a LayerNorm of the embeddings, biases everywhere, bloom_gelu
# (GELU's tanh approximation), a per-head fused query_key_value ((heads, 3, d_k), GPT-NeoX's layout). HF adds
# m_h j where ALiBi adds -m_h (i - j): the two differ by m_h i, the same for every key of query i, which softmax
# drops; the slopes are the same (its _get_alibi_slopes is the paper's get_slopes, heads not a power of two too)
_BLOOM = r"transformer\.h\.(\d+)\."
BLOOM = FamilyEntry(
    "bloom", "BloomConfig", "BloomForCausalLM",
    {"d_model": Key("hidden_size"), "heads": Key("n_head"), "d_ff": lambda c: 4 * c.hidden_size,
     "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "decoder" if tied(c) else "none",
     "positions": "alibi", "scale_embeddings": False, "embedding_norm": True,
     "bias.attention": True, "bias.ffn": True, "norm_eps": Key("layer_norm_epsilon", float),
     "decoder.layers": Key("n_layer"), "decoder.norm": "pre", "decoder.normalization": "layernorm",
     "decoder.activation": "gelu_tanh",
     "decoder.block": lambda c: "sequential(attention(skip = normed), ffn(skip = normed))"
     if c.apply_residual_connection_post_layernorm else None,
     "dropout.residual": rate("hidden_dropout"), "dropout.embedding": 0.0,
     "dropout.attention": rate("attention_dropout")},
    ((r"transformer\.word_embeddings_layernorm\.(weight|bias)", r"decoder.embed_norm.\1"),
     (_BLOOM + r"input_layernorm\.(weight|bias)", r"decoder.layers.\1.self_attn_norm.\2"),
     (_BLOOM + r"post_attention_layernorm\.(weight|bias)", r"decoder.layers.\1.ffn_norm.\2"),
     (_BLOOM + r"self_attention\.query_key_value\.(weight|bias)", r"decoder.layers.\1.self_attn.qkv_proj.\2"),
     (_BLOOM + r"self_attention\.dense\.(weight|bias)", r"decoder.layers.\1.self_attn.o_proj.\2"),
     (_BLOOM + r"mlp\.dense_h_to_4h\.(weight|bias)", r"decoder.layers.\1.ffn.fc1.\2"),
     (_BLOOM + r"mlp\.dense_4h_to_h\.(weight|bias)", r"decoder.layers.\1.ffn.fc2.\2"),
     (r"transformer\.ln_f\.(weight|bias)", r"decoder.norm.\1")),
    _lm_embeddings("transformer.word_embeddings.weight"), (), (split_qkv("per_head"),),
    refuse=((lambda c: c.pretraining_tp > 1 and c.slow_but_exact,
             "slow_but_exact with pretraining_tp > 1 (its sliced dense and dense_4h_to_h leave out their biases)"),),
    folded="query_key_value split into q, k, v (per-head layout)", prefix="transformer", config_of=_bloom_config)


# --- OPT: learned positions from row 2 ---------------------------------------------------------------

_OPT_OFFSET = 2  # OPTLearnedPositionalEmbedding: max_position_embeddings + 2 rows, position p reads row p + 2


def _opt_config(model) -> dict:
    """OPT: pre-norm with a final norm (do_layer_norm_before) or post-norm, LayerNorms with or without
    parameters (layer_norm_elementwise_affine), positions from row 2 of a table 2 rows longer."""
    dec = _decoder(model, "learned")
    if model.positions.offset != _OPT_OFFSET:
        raise UsageError(f"OPT's learned positions start at row {_OPT_OFFSET} (learned(offset = {_OPT_OFFSET}))")
    if dec.final_norm != (dec.norm == "pre"):
        raise UsageError("OPT closes a pre-norm stack with a norm and a post-norm stack without one")
    return dict(_lm_config(model), max_position_embeddings=model.positions.max_len,
                do_layer_norm_before=dec.norm == "pre", word_embed_proj_dim=dec.d_model,
                layer_norm_elementwise_affine=dec.normalization.gain)


OPT = FamilyEntry(
    "opt", "OPTConfig", "OPTForCausalLM",
    {"d_model": Key("hidden_size"), "heads": Key("num_attention_heads"), "d_ff": Key("ffn_dim"),
     "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "decoder" if tied(c) else "none",
     "positions": lambda c: f"learned(max_len = {c.max_position_embeddings}, offset = {_OPT_OFFSET})",
     "scale_embeddings": False, "bias.attention": Key("enable_bias"), "bias.ffn": Key("enable_bias"),
     "norm_eps": 1e-5, "decoder.layers": Key("num_hidden_layers"),
     "decoder.norm": lambda c: "pre" if c.do_layer_norm_before else "post",
     "decoder.normalization": lambda c: "layernorm" if c.layer_norm_elementwise_affine else
     "layernorm(gain = false, bias = false)",
     "decoder.activation": activation_of("activation_function", DECODER_ACTIVATIONS),
     "dropout.residual": rate("dropout"), "dropout.embedding": 0.0, "dropout.attention": rate("attention_dropout")},
    ((r"model\.decoder\.embed_positions\.weight", "decoder.pos.weight"),
     (r"model\.decoder\.layers\.(\d+)\.self_attn\.([qkv])_proj\.(weight|bias)",
      r"decoder.layers.\1.self_attn.\2_proj.\3"),
     (r"model\.decoder\.layers\.(\d+)\.self_attn\.out_proj\.(weight|bias)", r"decoder.layers.\1.self_attn.o_proj.\2"),
     (r"model\.decoder\.layers\.(\d+)\.self_attn_layer_norm\.(weight|bias)", r"decoder.layers.\1.self_attn_norm.\2"),
     (r"model\.decoder\.layers\.(\d+)\.(fc1|fc2)\.(weight|bias)", r"decoder.layers.\1.ffn.\2.\3"),
     (r"model\.decoder\.layers\.(\d+)\.final_layer_norm\.(weight|bias)", r"decoder.layers.\1.ffn_norm.\2"),
     (r"model\.decoder\.final_layer_norm\.(weight|bias)", r"decoder.norm.\1")),
    _lm_embeddings("model.decoder.embed_tokens.weight"), (), (),
    refuse=(bad_activation("activation_function", DECODER_ACTIVATIONS),
            (lambda c: c.word_embed_proj_dim != c.hidden_size,
             lambda c: f"word_embed_proj_dim {c.word_embed_proj_dim} != hidden_size {c.hidden_size} (project_in "
                       "and project_out: unbiased projections of the embeddings, positions added after the first)"),
            (lambda c: c.do_layer_norm_before and getattr(c, "_remove_final_layer_norm", False),
             "_remove_final_layer_norm (a pre-norm stack without its final norm)")),
    prefix="model", config_of=_opt_config)

# --- parallel blocks: Phi and Falcon ---------------------------------------------------------------

PHI = FamilyEntry(
    "phi", "PhiConfig", "PhiForCausalLM",
    {"d_model": Key("hidden_size"), "heads": Key("num_attention_heads"),
     "kv_heads": lambda c: c.num_key_value_heads or c.num_attention_heads, "d_k": head_dim, "d_v": head_dim,
     "d_ff": Key("intermediate_size"), "vocab": lambda c: f"shared({c.vocab_size})",
     "tie": lambda c: "decoder" if tied(c) else "none", "positions": rope, "scale_embeddings": False,
     "bias.attention": True, "bias.ffn": True, "bias.output": True, "norm_eps": Key("layer_norm_eps", float),
     "decoder.layers": Key("num_hidden_layers"), "decoder.norm": "pre", "decoder.normalization": "layernorm",
     "decoder.block": "parallel", "decoder.activation": activation_of("hidden_act", DECODER_ACTIVATIONS),
     "dropout.residual": rate("resid_pdrop"), "dropout.embedding": rate("embd_pdrop"),
     "dropout.attention": rate("attention_dropout")},
    ((r"model\.layers\.(\d+)\.self_attn\.([qkv])_proj\.(weight|bias)", r"decoder.layers.\1.self_attn.\2_proj.\3"),
     (r"model\.layers\.(\d+)\.self_attn\.dense\.(weight|bias)", r"decoder.layers.\1.self_attn.o_proj.\2"),
     (r"model\.layers\.(\d+)\.mlp\.(fc1|fc2)\.(weight|bias)", r"decoder.layers.\1.ffn.\2.\3"),
     (r"model\.layers\.(\d+)\.input_layernorm\.(weight|bias)", r"decoder.layers.\1.norm.\2"),
     (r"model\.final_layernorm\.(weight|bias)", r"decoder.norm.\1"),
     (r"lm_head\.bias", "output_bias")),
    _lm_embeddings("model.embed_tokens.weight"), _ROTARY, (),
    refuse=(ROPE_SCALING, bad_activation("hidden_act", DECODER_ACTIVATIONS),
            (lambda c: c.qk_layernorm, "qk_layernorm (a LayerNorm of q and k; attncomp's qk_norm is RMSNorm)")),
    prefix="model", config_of=_phi_config)


def _gptj_rotated(config) -> int:
    """How many of a head's dims GPT-J rotates: rotary_dim, or (unset) transformers' table width, n_embd."""
    return config.rotary_dim or config.n_embd


def _gptj_heads(config) -> bool:
    """Whether n_head splits n_embd into heads: GPT-J's spec sets d_k = n_embd // n_head, which the language
    takes for any d_k, so a remainder (or a count below 1) would reach the weights' per-head permutation."""
    return config.n_head >= 1 and config.n_embd >= 1 and config.n_embd % config.n_head == 0


def _gptj_config(model) -> dict:
    """GPT-J: d_ff, and the rotary dims of a spec's `rope(fraction)` (its base is 10000, unscaled: the
    family's spec says so, and a spec with another differs from it); n_positions the config's default."""
    dec = _decoder(model, "rope")
    return dict(_lm_config(model), n_inner=dec.d_ff, rotary_dim=model.positions.dims(dec.d_k))


GPTJ = FamilyEntry(
    "gptj", "GPTJConfig", "GPTJForCausalLM",
    {"d_model": Key("n_embd"), "heads": Key("n_head"), "d_k": head_dim, "d_v": head_dim,
     "d_ff": lambda c: c.n_inner or 4 * c.n_embd, "vocab": lambda c: f"shared({c.vocab_size})",
     "tie": lambda c: "decoder" if tied(c) else "none",
     "positions": lambda c: f"rope(base = 10000.0, fraction = {_gptj_rotated(c) / head_dim(c)!r})",
     "scale_embeddings": False, "bias.attention": False, "bias.ffn": True, "bias.output": True,
     "norm_eps": Key("layer_norm_epsilon", float), "decoder.layers": Key("n_layer"), "decoder.norm": "pre",
     "decoder.normalization": "layernorm", "decoder.block": "parallel",
     "decoder.activation": activation_of("activation_function", DECODER_ACTIVATIONS),
     "dropout.residual": rate("resid_pdrop"), "dropout.embedding": rate("embd_pdrop"),
     "dropout.attention": rate("attn_pdrop")},
    ((r"transformer\.h\.(\d+)\.attn\.([qkv])_proj\.(weight|bias)", r"decoder.layers.\1.self_attn.\2_proj.\3"),
     (r"transformer\.h\.(\d+)\.attn\.out_proj\.(weight|bias)", r"decoder.layers.\1.self_attn.o_proj.\2"),
     (r"transformer\.h\.(\d+)\.mlp\.fc_in\.(weight|bias)", r"decoder.layers.\1.ffn.fc1.\2"),
     (r"transformer\.h\.(\d+)\.mlp\.fc_out\.(weight|bias)", r"decoder.layers.\1.ffn.fc2.\2"),
     (r"transformer\.h\.(\d+)\.ln_1\.(weight|bias)", r"decoder.layers.\1.norm.\2"),
     (r"transformer\.ln_f\.(weight|bias)", r"decoder.norm.\1"),
     (r"lm_head\.bias", "output_bias")),
    _lm_embeddings("transformer.wte.weight"), _ROTARY + (r".*rotary_emb\.embed_positions",),
    (pairs_to_halves(("self_attn.q_proj", "self_attn.k_proj"), lambda c: c.n_head, _gptj_rotated),),
    refuse=(bad_activation("activation_function", DECODER_ACTIVATIONS),
            (lambda c: not _gptj_heads(c),
             lambda c: f"n_head {c.n_head} does not split n_embd {c.n_embd} into heads (transformers' GPTJAttention "
                       "needs n_embd divisible by n_head, both at least 1)"),
            (lambda c: _gptj_heads(c) and (_gptj_rotated(c) % 2 or _gptj_rotated(c) > head_dim(c)),
             lambda c: f"rotary_dim {c.rotary_dim} of a head's {head_dim(c)} dims (rotary positions rotate an even "
                       "count of a head's dims; transformers' GPT-J rotates n_embd dims where rotary_dim is unset)")),
    folded="q_proj and k_proj rows permuted within each head: GPT-J's rotated pairs of neighbouring dims "
           "(rotate_every_two) become rotate_half's halves",
    prefix="transformer", config_of=_gptj_config)


def _falcon_groups(config) -> int:
    """kv heads: the new architecture's num_kv_heads; multi-query's one; otherwise one per head."""
    if config.new_decoder_architecture:
        return config.num_kv_heads
    return 1 if config.multi_query else config.num_attention_heads


def _falcon_norms(config) -> int:
    return config.num_ln_in_parallel_attn or (2 if config.new_decoder_architecture else 1)


def _falcon_parallel(config) -> bool:
    return bool(config.new_decoder_architecture or config.parallel_attn)


def _falcon_block(config) -> str | None:
    if not _falcon_parallel(config):
        return None
    return "parallel(norms = 2)" if config.new_decoder_architecture and _falcon_norms(config) == 2 else "parallel"


def _falcon_input_norm(config) -> str | None:
    """Where input_layernorm goes: the one norm of a parallel block, or the sequential block's first."""
    if not _falcon_parallel(config):
        return "self_attn_norm"
    return None if _falcon_block(config) == "parallel(norms = 2)" else "norm"


_FALCON = r"transformer\.h\.(\d+)\."
FALCON = FamilyEntry(
    "falcon", "FalconConfig", "FalconForCausalLM",
    {"d_model": Key("hidden_size"), "heads": Key("num_attention_heads"), "kv_heads": _falcon_groups,
     "d_k": head_dim, "d_v": head_dim, "d_ff": lambda c: c.ffn_hidden_size or 4 * c.hidden_size,
     "vocab": lambda c: f"shared({c.vocab_size})", "tie": lambda c: "decoder" if tied(c) else "none",
     "positions": rope, "scale_embeddings": False, "bias.attention": Key("bias"), "bias.ffn": Key("bias"),
     "norm_eps": Key("layer_norm_epsilon", float), "decoder.layers": Key("num_hidden_layers"),
     "decoder.norm": "pre", "decoder.normalization": "layernorm", "decoder.block": _falcon_block,
     "decoder.activation": activation_of("activation", DECODER_ACTIVATIONS),
     "dropout.residual": rate("hidden_dropout"), "dropout.embedding": 0.0,
     "dropout.attention": rate("attention_dropout")},
    ((_FALCON + r"self_attention\.query_key_value\.(weight|bias)", r"decoder.layers.\1.self_attn.qkv_proj.\2"),
     (_FALCON + r"self_attention\.dense\.(weight|bias)", r"decoder.layers.\1.self_attn.o_proj.\2"),
     (_FALCON + r"mlp\.dense_h_to_4h\.(weight|bias)", r"decoder.layers.\1.ffn.fc1.\2"),
     (_FALCON + r"mlp\.dense_4h_to_h\.(weight|bias)", r"decoder.layers.\1.ffn.fc2.\2"),
     (_FALCON + r"input_layernorm\.(weight|bias)", r"decoder.layers.\1.input_layernorm.\2"),
     (_FALCON + r"post_attention_layernorm\.(weight|bias)", r"decoder.layers.\1.ffn_norm.\2"),
     (_FALCON + r"ln_attn\.(weight|bias)", r"decoder.layers.\1.self_attn_norm.\2"),
     (_FALCON + r"ln_mlp\.(weight|bias)", r"decoder.layers.\1.ffn_norm.\2"),
     (r"transformer\.ln_f\.(weight|bias)", r"decoder.norm.\1")),
    _lm_embeddings("transformer.word_embeddings.weight"), _ROTARY,
    (split_qkv("grouped", _falcon_groups), rename_module("input_layernorm", _falcon_input_norm)),
    refuse=(ROPE_SCALING, bad_activation("activation", DECODER_ACTIVATIONS),
            (lambda c: c.alibi, "alibi (ALiBi position biases with Falcon's scaling)"),
            (lambda c: not c.new_decoder_architecture and c.parallel_attn and _falcon_norms(c) == 2,
             "num_ln_in_parallel_attn = 2 without new_decoder_architecture")),
    folded="query_key_value split into q, k, v (kv-group layout: each group's queries, then its key and value)",
    prefix="transformer", config_of=_falcon_config)


# --- Gemma 2: sandwich norms, soft-capped attention and logits, alternating local and global layers ---------------

def _gemma2_scores(config) -> str:
    """The parts every Gemma 2 attention shares: scores times query_pre_attn_scalar^-0.5 (as HF's
    Gemma2Attention.scaling computes it; the default rsqrt_d_k where query_pre_attn_scalar is head_dim),
    soft-capped where attn_logit_softcapping is set."""
    parts = [] if config.query_pre_attn_scalar == head_dim(config) else \
        [f"scale = {float(config.query_pre_attn_scalar) ** -0.5!r}"]
    if config.attn_logit_softcapping is not None:
        parts.append(f"softcap = {float(config.attn_logit_softcapping)!r}")
    return ", ".join(parts)


def _gemma2_kind(kind: str, config, window: str = "") -> str:
    parts = ", ".join(p for p in (window, _gemma2_scores(config)) if p)
    return f"{kind}({parts})" if parts else kind


def _gemma2_pattern(config) -> str | None:
    """'local', 'global' (every layer one kind) or 'alternating' (sliding at even indices, full at odd: Gemma
    2's layer_types); None for any other layer_types."""
    kinds = list(config.layer_types or ())
    if kinds and all(k == "sliding_attention" for k in kinds):
        return "local"
    if all(k == "full_attention" for k in kinds):
        return "global"
    if kinds == ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(len(kinds))]:
        return "alternating" if len(kinds) > 1 else "local"
    return None


def _gemma2_stack_attention(config) -> str:
    if _gemma2_pattern(config) == "global":
        return _gemma2_kind("scaled_dot", config)
    return _gemma2_kind("local", config, f"window = {config.sliding_window - 1}")  # HF: i - j < W


def _gemma2_global(value):
    """A key of the `layer global` kind (the odd layers' full attention), only where layers alternate."""
    return lambda c: (value(c) if callable(value) else value) if _gemma2_pattern(c) == "alternating" else None


def _gemma2_softcap(config):
    cap = config.final_logit_softcapping
    return float(cap) if cap is not None else None


def _gemma2_config(model) -> dict:
    """The Gemma2Config of a spec (the family's spec of it is compared with the model, so a spec that is
    not Gemma 2's is refused there): the stack's attention gives the window, scale and soft-cap, a layer
    kind of scaled_dot every second layer from 1 the alternation."""
    values = _without("mlp_bias")(model)
    dec = model.decoder
    attention = dec.attention
    values["hidden_activation"] = {"geglu_tanh": "gelu_pytorch_tanh", "swiglu": "silu"}[dec.activation]
    values["final_logit_softcapping"] = model.logit_softcap
    values["attn_logit_softcapping"] = attention.softcap or None
    scale = attention.scale
    if scale.kind == "rsqrt_d_k":
        values["query_pre_attn_scalar"] = dec.d_k
    else:  # a constant c = q^-0.5: the integer q where it gives c back exactly
        q = scale.value ** -2
        values["query_pre_attn_scalar"] = round(q) if float(round(q)) ** -0.5 == scale.value else q
    local = attention.kind == "local"
    if local:
        values["sliding_window"] = attention.window + 1
    if not dec.layer:
        values["layer_types"] = [("sliding_attention" if local else "full_attention")] * dec.layers
    return values


GEMMA2 = _llama_like(
    "gemma2", "Gemma2Config", "Gemma2ForCausalLM",
    spec={"decoder.activation": lambda c: _GATED.get(c.hidden_activation), "scale_embeddings": True,
          "decoder.normalization": "rmsnorm(offset = 1)", "decoder.norm": "sandwich",
          "logit_softcap": _gemma2_softcap, "decoder.attention": _gemma2_stack_attention,
          "decoder.layer.global.start": _gemma2_global(1), "decoder.layer.global.every": _gemma2_global(2),
          "decoder.layer.global.attention": _gemma2_global(lambda c: _gemma2_kind("scaled_dot", c))},
    renames=((r"model\.layers\.(\d+)\.input_layernorm\.(weight|bias)", r"decoder.layers.\1.self_attn_norm.\2"),
             (r"model\.layers\.(\d+)\.post_attention_layernorm\.(weight|bias)",
              r"decoder.layers.\1.self_attn_output_norm.\2"),
             (r"model\.layers\.(\d+)\.pre_feedforward_layernorm\.(weight|bias)", r"decoder.layers.\1.ffn_norm.\2"),
             (r"model\.layers\.(\d+)\.post_feedforward_layernorm\.(weight|bias)",
              r"decoder.layers.\1.ffn_output_norm.\2")),
    activation=(lambda c: c.hidden_activation not in _GATED,
                lambda c: f"hidden_activation {c.hidden_activation!r} (Gemma 2's gated feed-forward has "
                          f"{', '.join(_GATED)})"),
    refuse=((lambda c: _gemma2_pattern(c) is None,
             lambda c: "layer_types " + "/".join(c.layer_types) + " (attncomp's layer kinds repeat every N layers "
                       "from a start; Gemma 2's alternate sliding, full)"),
            (lambda c: _gemma2_pattern(c) != "global" and not c.sliding_window,
             "sliding layers without a sliding_window"),
            (lambda c: getattr(c, "use_bidirectional_attention", False),
             "use_bidirectional_attention (a decoder stack's self-attention is causal)")),
    config_of=_gemma2_config)


# --- Gemma 3 (text): Gemma 2's layers with q/k norms, five local layers to a global one, two rotary bases -------


def _gemma3_full(config) -> list[int]:
    return [i for i, kind in enumerate(config.layer_types) if kind == "full_attention"]


def _gemma3_global(config) -> tuple[int, int] | None:
    """(start, every) of the global layers among local ones (transformers: every sliding_window_pattern-th,
    from index pattern - 1); None where every layer is one kind."""
    full = _gemma3_full(config)
    return None if len(full) in (0, config.num_hidden_layers) else periodic(full, config.num_hidden_layers)


def _gemma3_all_global(config) -> bool:
    return len(_gemma3_full(config)) == config.num_hidden_layers


def _gemma3_positions(config) -> str:
    """The stack's rotary base and scaling: the local layers' (rope_local_base_freq, unscaled in the released
    models), or the global ones' where every layer is global; the global kind rotates with its own
    (`rope_base`, and `rope_scaling` where its scaling differs: the 4B and larger models' linear factor 8)."""
    kind = "full_attention" if _gemma3_all_global(config) else "sliding_attention"
    scaling = per_type_scaling(config, kind)
    return f"rope(base = {rope_theta(config, kind)!r}" + (f", scaling = {scaling})" if scaling else ")")


def _gemma3_kind_scaling(config) -> str | None:
    full = per_type_scaling(config, "full_attention")
    return full if full != per_type_scaling(config, "sliding_attention") else None


def _gemma3_stack_attention(config) -> str:
    if _gemma3_all_global(config):
        return _gemma2_kind("scaled_dot", config)
    return _gemma2_kind("local", config, f"window = {config.sliding_window - 1}")  # HF: i - j < W


def _gemma3_global_key(key: str):
    def value(config):
        found = _gemma3_global(config)
        if found is None:
            return None
        return {"start": found[0], "every": found[1], "attention": _gemma2_kind("scaled_dot", config),
                "rope_base": rope_theta(config, "full_attention"), "rope_scaling": _gemma3_kind_scaling(config)}[key]
    return value



def _gemma3_layer_types(dec) -> list[str]:
    """layer_types of a Gemma 3 stack: its one layer kind's layers full, the others the stack's kind."""
    stack = "sliding_attention" if dec.attention.kind == "local" else "full_attention"
    if not dec.layer:
        return [stack] * dec.layers
    if len(dec.layer) > 1:
        raise UsageError("more than one layer kind (Gemma 3 has its global layers among local ones)")
    kind = dec.layer[0]
    indices = range(kind.start, dec.layers, kind.every)
    if kind.count is not None:
        indices = indices[:kind.count]
    full = set(indices)
    return ["full_attention" if i in full else stack for i in range(dec.layers)]


def _gemma3_config(model) -> dict:
    """The Gemma3TextConfig of a spec: Gemma 2's values, layer_types from the global layer kind (start,
    every), rope_parameters per layer type (the sliding layers' from the stack's `rope`, the full layers'
    from the kind's rope_base and rope_scaling, the stack's where the kind leaves them unset)."""
    values = _gemma2_config(model)
    dec = model.decoder
    values["layer_types"] = _gemma3_layer_types(dec)
    stack, max_len = scaling_parameters(model.positions)
    full = stack
    if dec.layer:
        kind = dec.layer[0]
        rotary = model.positions.model_copy(update={
            "base": kind.rope_base if kind.rope_base is not None else model.positions.base,
            "scaling": kind.rope_scaling if kind.rope_scaling is not None else model.positions.scaling})
        full, full_len = scaling_parameters(rotary)
        max_len = max(max_len or 0, full_len or 0) or None
    values["rope_parameters"] = {"sliding_attention": stack, "full_attention": full}
    values["max_position_embeddings"] = max_len  # every layer global: the config's default window, unread
    return values


GEMMA3_TEXT = _llama_like(
    "gemma3_text", "Gemma3TextConfig", "Gemma3ForCausalLM",
    spec={**{k: v for k, v in GEMMA2.spec.items() if not k.startswith("decoder.layer.")},
          "decoder.qk_norm": "head", "positions": _gemma3_positions,
          "decoder.attention": _gemma3_stack_attention,
          **{f"decoder.layer.global.{key}": _gemma3_global_key(key) for key in ("start", "every", "attention")},
          "decoder.layer.global.rope_base": _gemma3_global_key("rope_base"),
          "decoder.layer.global.rope_scaling": _gemma3_global_key("rope_scaling")},
    renames=GEMMA2.renames[len(_LLAMA_LAYER):],  # Gemma 2's sandwich norms
    activation=(lambda c: c.hidden_activation not in _GATED,
                lambda c: f"hidden_activation {c.hidden_activation!r} (Gemma 3's gated feed-forward has "
                          f"{', '.join(_GATED)})"),
    refuse=(PER_TYPE_UNSUPPORTED_SCALING,
            (lambda c: not _gemma3_all_global(c) and _gemma3_full(c) and per_type_scaling(c, "sliding_attention")
             and not per_type_scaling(c, "full_attention"),
             "a rotary scaling of the sliding layers that the full layers lack (a layer kind cannot unset the "
             "stack's rope scaling)"),
            (lambda c: not _gemma3_all_global(c) and _gemma3_full(c) and _gemma3_global(c) is None,
             lambda c: "layer_types " + "/".join(c.layer_types) + " (attncomp's layer kinds repeat every N layers "
                       "from a start)"),
            (lambda c: not _gemma3_all_global(c) and not c.sliding_window, "sliding layers without a sliding_window"),
            (lambda c: getattr(c, "use_bidirectional_attention", False),
             "use_bidirectional_attention (a decoder stack's self-attention is causal)"),
            (lambda c: c.attn_logit_softcapping is not None,
             "attn_logit_softcapping (transformers' Gemma 3 attention does not apply it, so the model's logits "
             "would depend on who reads its config)")),
    config_of=_gemma3_config)
