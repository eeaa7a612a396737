"""The CTranslate2 export: an attncomp encoder-decoder written through CTranslate2's model specification API.

The canonical state-dict names map one to one onto `ctranslate2.specs.TransformerSpec`:
q, k, v of self-attention fused into one linear (cross-attention: q, then k and v fused), o, the
feed-forward's fc1 / fc2, the LayerNorm after (post) or before (pre) each sub-layer, the final
norms of a pre-norm model, the embedding LayerNorm (`embedding_norm`: BART's, mBART's
`layernorm_embedding`), the output bias (`bias.output`: BART's `final_logits_bias`). Positions are
written as a table (attncomp's sinusoids in any layout, timescales and offset: M2M100's fairseq
sinusoids from position 2; or the learned table from its offset row), so CTranslate2 adds exactly what
attncomp adds.

The vocabulary is the tokenizer's: a sentencepiece model's pieces, or an imported model's tokens by
attncomp's id (`hf_vocabulary`: tokenizer.json's, or M2M100's vocab.json and language tokens), and the
config names its special tokens: CTranslate2's decoder starts from the token attncomp's starts from
(`<s>`; an imported model's decoder_start_token_id); the forced tokens (BART's `<s>`, a target language)
are the target prefix the caller gives (`decoding`). A model whose decoder starts with the target
language (mBART's) gets no decoder start in the config: CTranslate2 then starts from the target prefix's
first token, the language, as its own TransformersConverter writes mBART-25 (with a fixed start, `</s>`
came before the language and the log-probabilities differed by about 1e-2).
"""

from __future__ import annotations

from pathlib import Path

import torch

from attncomp.errors import UsageError
from attncomp.files import shown_path
from attncomp.interop import require
from attncomp.ir import canonical, nodes
from attncomp.ir.family import prefix_lm
from attncomp.native import native
from attncomp.lower.ops import sinusoidal, sinusoidal_halves, sinusoidal_tensor2tensor
from attncomp.lower import embedding_names

POSITIONS = 2048  # rows of the sinusoid table CTranslate2 gets (source and output positions)



def _llama_choices(model: nodes.ModelSpec) -> list[str]:
    """RMSNorm, gated or SiLU feed-forwards, grouped-query attention and a final norm that does not
    follow the norm placement: CTranslate2's converter spec may express some of them, but none of
    them is exported (or tested) here, so each is refused."""
    problems = []
    for name, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        if stack is None:
            continue
        if stack.normalization != nodes.LayerNorm():
            problems.append(f"model.{name}: only normalization = layernorm (with its gain and bias)")
        if stack.activation not in ACTIVATIONS:
            problems.append(f"model.{name}: only {', '.join(ACTIVATIONS)} activations")
        if stack.key_value_heads != stack.heads:
            problems.append(f"model.{name}: kv_heads must equal heads")
        if stack.norm not in ("post", "pre"):
            problems.append(f"model.{name}: only norm = post or pre")
        if stack.final_norm != (stack.norm == "pre"):
            problems.append(f"model.{name}: a final norm exactly when norm = pre")
        problems += [f"model.{name}: {key} = {_written(getattr(stack, key))} (only its default)" for key in
                     sorted(set(type(stack).model_fields) - CHOSEN) if getattr(stack, key) !=
                     type(stack).model_fields[key].default]
    return problems


def _written(value) -> str:
    """A stack key's value as the spec writes it (moe(experts = 4, ...), not a pydantic repr); layer kinds by name."""
    if isinstance(value, tuple) and all(hasattr(v, "name") for v in value):
        return ", ".join(f"layer {v.name}" for v in value)
    try:
        return canonical._value(value)
    except Exception:  # noqa: BLE001 - a message, never a traceback
        return str(value)


# the stack keys whose choices the checks above allow; any other key must be at its default
CHOSEN = {"layers", "d_model", "heads", "d_k", "d_v", "d_ff", "attention", "cross_attention", "norm",
          "normalization", "activation", "kv_heads", "final_norm"}


# attncomp's feed-forward activations -> CTranslate2's (common_spec.Activation)
ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "gelu_tanh": "GELUTanh", "silu": "SWISH"}

# the model keys CTranslate2's converter is not given: each must be at its default
MODEL_DEFAULTS = ("d_embed", "segments", "logit_scale", "logit_softcap")


def check_supported(spec: nodes.Spec) -> None:
    """What CTranslate2's Transformer can express; anything else is one clear error."""
    model = spec.model
    if prefix_lm(model):
        raise UsageError("CTranslate2 cannot express a prefix LM (decoder { mask = prefix }): its decoders attend "
                         "causally over the whole input; export --format torch-export")
    problems = []
    if model.encoder is None or model.decoder is None:
        problems.append("only encoder-decoder models (this one has one stack)")
    for name, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        if stack is None:
            continue
        kinds = [stack.attention] + ([stack.cross_attention] if isinstance(stack, nodes.DecoderSpec) else [])
        if any(not isinstance(k, nodes.ScaledDot) for k in kinds):
            problems.append(f"model.{name}: only scaled_dot attention")
        problems += [f"model.{name}: normalizer = {_written(k.normalizer)} (only softmax)" for k in kinds
                     if isinstance(k, nodes.ScaledDot) and not isinstance(k.normalizer, nodes.Softmax)]
        if stack.d_k * stack.heads != stack.d_model or stack.d_v * stack.heads != stack.d_model:
            problems.append(f"model.{name}: d_k and d_v must be d_model / heads")
    if model.encoder and model.decoder and (model.encoder.heads != model.decoder.heads or
                                            model.encoder.norm != model.decoder.norm or
                                            model.encoder.activation != model.decoder.activation):
        problems.append("encoder and decoder must share heads, norm and activation")
    if not isinstance(model.positions, (nodes.Learned, nodes.Sinusoidal)):
        problems.append(f"positions must be sinusoidal or learned, not {model.positions.kind} "
                        "(CTranslate2 adds positions to the embeddings, never to the attention scores)")
    if len({model.bias.of(p) for p in ("q", "k", "v")}) > 1:
        problems.append("bias: q, k and v must all have a bias or none (they are written fused)")
    if not isinstance(model.head, nodes.LinearHead):
        problems.append("head must be linear")
    problems += [f"{key} = {getattr(model, key)} (not exported)" for key in MODEL_DEFAULTS
                 if getattr(model, key) != nodes.ModelSpec.model_fields[key].default]
    if model.tie == "inputs":
        problems.append("tie = inputs (not exported)")
    problems += _llama_choices(model)
    if problems:
        raise UsageError("CTranslate2 cannot express this model: " + "; ".join(problems))


def _linear(target, state: dict, prefix: str) -> None:
    target.weight = state[f"{prefix}.weight"].numpy()
    if f"{prefix}.bias" in state:
        target.bias = state[f"{prefix}.bias"].numpy()


def _fused(target, state: dict, prefixes: list[str]) -> None:
    target.weight = torch.cat([state[f"{p}.weight"] for p in prefixes]).numpy()
    if all(f"{p}.bias" in state for p in prefixes):
        target.bias = torch.cat([state[f"{p}.bias"] for p in prefixes]).numpy()


def _norm(target, state: dict, prefix: str) -> None:
    target.gamma = state[f"{prefix}.weight"].numpy()
    target.beta = state[f"{prefix}.bias"].numpy()


def _attention(target, state: dict, prefix: str, cross: bool) -> None:
    names = [f"{prefix}.{x}_proj" for x in "qkv"]
    if cross:
        _linear(target.linear[0], state, names[0])
        _fused(target.linear[1], state, names[1:])
    else:
        _fused(target.linear[0], state, names)
    _linear(target.linear[-1], state, f"{prefix}.o_proj")
    _norm(target.layer_norm, state, f"{prefix}_norm")


def _ffn(target, state: dict, prefix: str) -> None:
    _linear(target.linear_0, state, f"{prefix}.ffn.fc1")
    _linear(target.linear_1, state, f"{prefix}.ffn.fc2")
    _norm(target.layer_norm, state, f"{prefix}.ffn_norm")


def _positions(spec: nodes.Spec, state: dict, stack: str) -> torch.Tensor:
    if isinstance(spec.model.positions, nodes.Learned):
        return state[f"{stack}.pos.weight"][spec.model.positions.offset:]  # row p: position p
    pos = spec.model.positions  # CTranslate2 takes any table: row p is position p
    table = sinusoidal_tensor2tensor if pos.timescales == "tensor2tensor" else \
        sinusoidal_halves if pos.layout == "halves" else sinusoidal
    return table(torch.arange(POSITIONS) + pos.offset, spec.model.d_model, torch.float32)


def _stack(target, spec: nodes.Spec, state: dict, name: str, embed: str) -> None:
    embeddings = target.embeddings[0] if isinstance(target.embeddings, list) else target.embeddings
    embeddings.weight = state[f"{embed}.weight"].numpy()
    target.scale_embeddings = spec.model.scale_embeddings
    target.position_encodings.encodings = _positions(spec, state, name).numpy()
    if spec.model.embedding_norm:
        _norm(target.layernorm_embedding, state, f"{name}.embed_norm")
    if getattr(spec.model, name).norm == "pre":
        _norm(target.layer_norm, state, f"{name}.norm")
    for i, layer in enumerate(target.layer):
        prefix = f"{name}.layers.{i}"
        _attention(layer.self_attention, state, f"{prefix}.self_attn", cross=False)
        if name == "decoder":
            _attention(layer.attention, state, f"{prefix}.cross_attn", cross=True)
        _ffn(layer.ffn, state, prefix)


def model_spec(spec: nodes.Spec, state: dict[str, torch.Tensor], src_vocab: list[str], tgt_vocab: list[str],
               tokens: dict | None = None):
    """A validated `ctranslate2.specs.TransformerSpec` holding this model's weights (float32); `tokens`: the
    config's special tokens (`config_tokens`; CTranslate2's defaults, attncomp's own, where None)."""
    specs = require("ctranslate2.specs", "--format ctranslate2")
    check_supported(spec)
    model = spec.model
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in state.items()}
    activation = getattr(specs.common_spec.Activation, ACTIVATIONS[model.encoder.activation])
    ct2 = specs.TransformerSpec.from_config((model.encoder.layers, model.decoder.layers), model.encoder.heads,
                                            pre_norm=model.encoder.norm == "pre", activation=activation,
                                            layernorm_embedding=model.embedding_norm)
    names = embedding_names(model)
    _stack(ct2.encoder, spec, state, "encoder", names["src"])
    _stack(ct2.decoder, spec, state, "decoder", names["tgt"])
    ct2.decoder.projection.weight = state[f"{names['output']}.weight"].numpy()
    if model.bias.output:
        ct2.decoder.projection.bias = state["output_bias"].numpy()
    ct2.config.layer_norm_epsilon = model.norm_eps
    for key, value in (tokens or {}).items():
        setattr(ct2.config, key, value)
    ct2.register_source_vocabulary(src_vocab)
    ct2.register_target_vocabulary(tgt_vocab)
    with native("CTranslate2 refuses the converted model", error=UsageError):  # e.g. a vocabulary not the model's
        ct2.validate()
    return ct2


def write(spec: nodes.Spec, state: dict, src_vocab: list[str], tgt_vocab: list[str], out: Path,
          quantization: str = "float32", tokens: dict | None = None) -> Path:
    """Convert and save to `out` (a new or empty directory), weights quantised as asked."""
    ct2 = model_spec(spec, state, src_vocab, tgt_vocab, tokens)
    with native(f"CTranslate2 could not write {shown_path(out)}", "check the disk space and --out",
                error=UsageError):
        ct2.optimize(quantization=quantization)
        out.mkdir(parents=True, exist_ok=True)
        ct2.save(str(out))
    return out


def vocabulary(tokenizer) -> list[str]:
    """The token strings of a sentencepiece-backed attncomp Tokenizer, by id."""
    return [tokenizer.sp.id_to_piece(i) for i in range(tokenizer.vocab_size)]


def hf_vocabulary(tokenizer, size: int) -> list[str]:
    """An imported model's tokens by attncomp's id (an HFTokenizer: its ids exchanged where the import
    exchanged them), `size` of them (the embedding rows); a row no token names, or whose name an earlier id
    has, gets a name of its own (`<unused_N>`: CTranslate2 looks tokens up by name, so every name must be
    one id's)."""
    tokens, seen = [], set()
    for i in range(size):
        token = tokenizer.tok.id_to_token(tokenizer._swap(i))
        token = token if token is not None and token not in seen else f"<unused_{i}>"  # a name given twice: the
        seen.add(token)  # tokenizer reads it as its first id, so the later one only comes from the model
        tokens.append(token)
    return tokens


def config_tokens(specials, vocab: list[str], start_from_prefix: bool = False) -> dict:
    """CTranslate2's config of an imported model's special tokens: its unknown, begin and end tokens, and
    the decoder start (decoder_start_token_id's); none where the decoder starts with the target language
    (`start_from_prefix`: mBART's): CTranslate2 then starts its decoder from the target prefix's first token,
    as its own TransformersConverter writes mBART-25 (a fixed start would put a token before the language)."""
    tokens = {"unk_token": specials.unk, "bos_token": specials.bos, "eos_token": specials.eos,
              "decoder_start_token": None if start_from_prefix else specials.start}
    found = {k: vocab[i] for k, i in tokens.items() if i is not None}
    return {**found, "decoder_start_token": None} if start_from_prefix else found


def start_is_language(tokenizer) -> bool:
    """Whether the decoder starts with the target language (mBART; a model whose decoder_start_token_id is
    one), so that CTranslate2's decoder start is the target prefix's first token, not a fixed one (the
    config's decoder_start_token is null)."""
    if tokenizer.specials.start in tokenizer.languages.values():
        return True
    if not tokenizer.languages or tokenizer.target_lang is None:
        return False
    chosen = tokenizer.with_target_language(next(iter(tokenizer.languages)))
    return chosen.specials.start in tokenizer.languages.values()


def target_prefix(tokenizer, vocab: list[str]) -> list[str]:
    """The tokens a caller gives CTranslate2 as the target prefix: the language where the decoder starts
    with it, then the forced tokens."""
    first = [tokenizer.specials.start] if start_is_language(tokenizer) else []
    return [vocab[i] for i in [*first, *tokenizer.specials.forced]]


def decoding(tokenizer, vocab: list[str]) -> dict:
    """What a caller of CTranslate2 gives with each source (written as attncomp_decoding.json): the source
    template (tokens around "text") and the target prefix (the forced tokens; mBART's language first)."""
    source = [item if item in ("text", "lang") else vocab[item] for item in tokenizer.source]
    return {"source": source, "source_lang": tokenizer.source_lang, "target_prefix": target_prefix(tokenizer, vocab),
            "languages": sorted(tokenizer.languages)}
