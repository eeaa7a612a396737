"""The typed IR of a spec: frozen pydantic models, one per block and one per choice of a union.

Defaults are the paper's base model (Vaswani et al. 2017, Table 3 first row), so `model { encoder {}
decoder {} }` is the base Transformer. Every union member carries a `kind` discriminator, which is
the name a spec writes: `positions = learned(max_len = 512)` is `Learned(kind="learned", max_len=512)`.
"""

from __future__ import annotations

import keyword
import math
import re
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, create_model, field_validator, model_validator

from attncomp.vocab import BOS, EOS, PAD, SEP, UNK, Specials


class Node(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    def written(self) -> list[tuple[str, object]]:
        """The keys and values the canonical text writes, in field order: every field but `kind`, except
        an unset one (None where that is the default: `none` is written where it is not) and a key marked
        LATER at its default (the one rule for new keys)."""
        out = []
        for key, field in type(self).model_fields.items():
            value = getattr(self, key)
            if key == "kind" or (value is None and field.default is None) \
                    or (later(field) and value == field.default):
                continue
            out.append((key, value))
        return out


Dim = Annotated[int, Field(ge=1, le=1 << 16)]
# A key added after checkpoints and sweeps recorded spec hashes (`Field(..., json_schema_extra=LATER)`):
# the canonical text leaves it out at its default, so specs that do not use it keep their text and hash.
# The rule is `Node.written`; every new key of the language is declared this way.
LATER = {"written": "only away from its default"}
# A LATER key that a call takes by name only (`shared(50257, pad = none)`): never one of its positional arguments.
BY_NAME = {**LATER, "argument": "by name only"}


def later(field) -> bool:
    return isinstance(field.json_schema_extra, dict) and "written" in field.json_schema_extra


def by_name(field) -> bool:
    return field.json_schema_extra == BY_NAME


def per_layer(place: int, extra: dict | None = None) -> dict:
    """The json_schema_extra of a Stack key that a layer kind may set too (`layer NAME { key = ... }`):
    `place` orders it among a layer block's keys (their canonical order); LayerKind's fields are made from
    these marks (`_layer_kind_fields`), so a key is declared once, on the Stack."""
    return {**(extra or {}), "layer": place}


def layer_place(field) -> int | None:
    return field.json_schema_extra.get("layer") if isinstance(field.json_schema_extra, dict) else None
Count = Annotated[int, Field(ge=1, le=1 << 20)]
Prob = Annotated[float, Field(ge=0.0, lt=1.0)]
VocabSize = Annotated[int, Field(ge=1, le=1 << 24)]
Positive = Annotated[float, Field(gt=0.0, le=1e6)]


# --- attention ------------------------------------------------------------------------------


class RsqrtDk(Node):
    """The paper's score scale, 1 / sqrt(d_k)."""

    kind: Literal["rsqrt_d_k"] = "rsqrt_d_k"


class NoScale(Node):
    """Unscaled dot products (T5: the scale is folded into the initialisation of W^Q)."""

    kind: Literal["none"] = "none"


class ScaleBy(Node):
    """A given constant multiplies the scores (Gemma 2: query_pre_attn_scalar^-0.5), or a sub-layer's skip
    (`skip = 0.5`); written as a number."""

    kind: Literal["constant"] = "constant"
    value: Positive = Field(description="the factor on q . k")


Scale = Annotated[Union[RsqrtDk, NoScale, ScaleBy], Field(discriminator="kind")]


Cap = Annotated[float, Field(ge=0.0, le=1e6)]


class Softmax(Node):
    """The paper's weights: softmax over the keys of each query."""

    kind: Literal["softmax"] = "softmax"


class Sigmoid(Node):
    """Sigmoid attention (Ramapuram et al. 2024): weights sigmoid(s + b) per key, no normalisation across the
    keys; a hidden key weighs 0. b is a number (`bias`), or -log n for a length n the spec writes (`length`),
    never the sentence's own length, so that decoding one position at a time equals the whole forward."""

    kind: Literal["sigmoid"] = "sigmoid"
    bias: Annotated[float, Field(ge=-1e6, le=1e6)] | None = Field(None, json_schema_extra=BY_NAME,
                                                                   description="b, a number")
    length: Count | None = Field(None, json_schema_extra=BY_NAME, description="n, with b = -log n (the paper's)")

    @model_validator(mode="after")
    def _one_bias(self) -> "Sigmoid":
        if (self.bias is None) == (self.length is None):
            raise ValueError("sigmoid takes exactly one of bias = B (b = B) or length = n (b = -log n)")
        return self

    @property
    def b(self) -> float:
        return self.bias if self.bias is not None else -math.log(self.length)


class Differential(Node):
    """Differential attention (Ye et al. 2024, DIFF Transformer): each head's q and k split into halves,
    (softmax(q1 k1^T s) - lambda softmax(q2 k2^T s)) v, lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init,
    then the head's RMSNorm times (1 - lambda_init). lambda_init unset: 0.8 - 0.6 exp(-0.3 (l - 1)) for the
    layer's depth l in its stack, counting from 1 (the paper's)."""

    kind: Literal["differential"] = "differential"
    lambda_init: Annotated[float, Field(ge=0.0, lt=1.0)] | None = Field(
        None, json_schema_extra=BY_NAME, description="a fixed lambda_init in [0, 1), so (1 - lambda_init) > 0 "
                                                     "(unset: by the layer's depth, the paper's 0.2 to 0.8)")


Normalizer = Annotated[Union[Softmax, Sigmoid, Differential], Field(discriminator="kind")]


class DotProduct(Node):
    """The parts of a dot-product attention, one description that every dot-product kind (scaled_dot, local,
    latent) embeds after its own keys, each part at the paper's meaning by default: the score scale,
    soft-capping of the scores, attention sinks, an output gate, clipping of q, k and v and a per-head
    temperature. The stack's
    qk_norm, the model's positions and the layer's mask are the other parts a score reads
    (attncomp.lower.attention applies them all, in one place). A new part is a field here (declared LATER,
    so no spec's text changes), its lowering in attncomp.lower.attention and a row in docs/language.md."""

    scale: Scale = Field(RsqrtDk(), json_schema_extra=LATER, description="the score scale: rsqrt_d_k (1/sqrt(d_k), "
                         "the paper), none (T5), or a number (Gemma 2)")
    softcap: Cap = Field(0.0, json_schema_extra=LATER,
                         description="soft-capping of the scores, tanh(s / c) * c (Gemma 2); 0: off")
    sinks: bool = Field(False, json_schema_extra=LATER,
                        description="a learned logit per head in every softmax, a key that holds no value (gpt-oss)")
    gate: bool = Field(False, json_schema_extra=LATER, description="the heads' output gated by sigmoid(W^G x) "
                       "before W^O (Qwen3-Next's gated attention)")
    clip_qkv: Cap = Field(0.0, json_schema_extra=LATER,
                          description="q, k and v clipped to [-c, c] after their projections (OLMo's clip_qkv); 0: off")
    temperature: bool = Field(False, json_schema_extra=LATER,
                              description="a learned temperature per head, `heads` values multiplying q . k (1 at "
                                          "initialisation)")
    normalizer: Normalizer = Field(Softmax(), json_schema_extra=LATER,
                                   description="how scores become weights: softmax (the paper), sigmoid(bias = B | "
                                               "length = n) (Ramapuram et al. 2024) or differential (Ye et al. 2024)")


# A dot-product kind is `class Kind(DotProduct, _KindKeys)`: its own keys (in _KindKeys) come first in its
# fields, and so in its canonical text (`local(window = 8, softcap = 30)`), the parts after them.


class _ScaledDotKeys(Node):
    kind: Literal["scaled_dot"] = "scaled_dot"


class ScaledDot(DotProduct, _ScaledDotKeys):
    """softmax(q k^T / sqrt(d_k)) v: the paper's attention (section 3.2.1), with the parts of DotProduct."""


class Additive(Node):
    """Additive attention, v^T tanh(q + k) per head, unscaled: the alternative of section 3.2.1."""

    kind: Literal["additive"] = "additive"


class _LocalKeys(Node):
    kind: Literal["local"] = "local"
    window: Count = Field(description="positions visible on each side (decoder: before) of a query")


class Local(DotProduct, _LocalKeys):
    """Restricted self-attention (section 4): each position sees `window` positions either side; the
    dot-product parts as scaled_dot's."""


class _LatentKeys(Node):
    kind: Literal["latent"] = "latent"
    kv_rank: Count = Field(description="width of the key/value latent c^KV (DeepSeek's kv_lora_rank)")
    rope_dims: Count = Field(description="a head's rotary dims, of its d_k (DeepSeek's qk_rope_head_dim)")
    q_rank: Annotated[int, Field(ge=0, le=1 << 20)] = Field(
        0, description="width of the query latent (DeepSeek's q_lora_rank); 0: queries not compressed")


class Latent(DotProduct, _LatentKeys):
    """Multi-head latent attention (DeepSeek-V2, Liu et al. 2024): keys and values come from one low-rank
    latent c^KV = RMSNorm(W^DKV x) per position, k^C = W^UK c^KV and v = W^UV c^KV per head; the rotary
    part is decoupled: q^R = W^QR (per head) and one shared k^R = W^KR x, rotated, are appended to q^C and
    k^C. A head's d_k counts both parts (`rope_dims` of it rotary), d_v its values. Queries are compressed
    too where `q_rank` > 0: q = W^UQ RMSNorm(W^DQ x). The decoding cache holds c^KV and k^R only. The
    dot-product parts as scaled_dot's, but clip_qkv (its keys and values have no projection of their own)."""


Attention = Annotated[Union[ScaledDot, Additive, Local, Latent], Field(discriminator="kind")]


# --- norms and layer structure -----------------------------------------------------------------


class LayerNorm(Node):
    """LayerNorm (Ba et al. 2016): (x - mean(x)) / sqrt(var(x) + eps) * g + b."""

    kind: Literal["layernorm"] = "layernorm"
    gain: bool = Field(True, json_schema_extra=LATER,
                       description="a learned gain g (false, with bias = false: no parameters, as OLMo)")
    bias: bool = Field(True, json_schema_extra=LATER, description="a learned bias b (false: as GPT-NeoX-2, Gemma 3n)")
    eps: Annotated[float, Field(gt=0.0, lt=1.0)] | None = Field(
        None, json_schema_extra=BY_NAME, description="this norm's epsilon (unset: the model's norm_eps)")


class RMSNorm(Node):
    """RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x^2) + eps) * (offset + g), no centring, no bias.
    `offset = 1` is Gemma's (1 + w) gain, its w starting at 0."""

    kind: Literal["rmsnorm"] = "rmsnorm"
    gain: bool = Field(True, json_schema_extra=LATER, description="a learned gain g (false: no parameters)")
    offset: Literal[0, 1] = Field(0, json_schema_extra=LATER,
                                  description="added to the gain: 1 is Gemma's x * (1 + w), w starting at 0")
    eps: Annotated[float, Field(gt=0.0, lt=1.0)] | None = Field(
        None, json_schema_extra=BY_NAME, description="this norm's epsilon (unset: the model's norm_eps)")


Normalization = Annotated[Union[LayerNorm, RMSNorm], Field(discriminator="kind")]


NormPlace = Literal["post", "pre", "output", "sandwich"]
SublayerNorm = Literal["post", "pre", "output", "sandwich", "none"]


class LayerScale(Node):
    """LayerScale (Touvron et al. 2021, CaiT): a learned vector of d_model gains multiplies what a sub-layer
    adds, diag(lambda) F(x), every entry starting at `init`."""

    kind: Literal["layerscale"] = "layerscale"
    init: Annotated[float, Field(gt=0.0, le=1e3)] = Field(0.1, description="each gain's initial value (CaiT: 0.1 "
                                                                           "to 1e-6 by depth)")


class ReZero(Node):
    """ReZero (Bachlechner et al. 2020): one learned scalar alpha multiplies what a sub-layer adds, x + alpha F(x),
    alpha starting at 0 so every layer starts as the identity."""

    kind: Literal["rezero"] = "rezero"


Gain = Annotated[Union[LayerScale, ReZero], Field(discriminator="kind")]


class NormedSkip(Node):
    """The skip carries the sub-layer's normed input, Norm(x) + F(Norm(x)) (BLOOM's
    apply_residual_connection_post_layernorm); needs a norm before the sub-layer (pre or sandwich)."""

    kind: Literal["normed"] = "normed"


class DeepNorm(Node):
    """DeepNorm (Wang et al. 2022): Norm(alpha x + F(x)) with alpha from the layer counts, and the sub-layer's
    value and output projections (W^V, W^O; the feed-forward's W_1, W_2) initialised times beta. N encoder and
    M decoder layers: an encoder-decoder's encoder alpha = 0.81 (N^4 M)^(1/16), beta = 0.87 (N^4 M)^(-1/16),
    its decoder alpha = (3M)^(1/4), beta = (12M)^(-1/4); one stack of L layers alone alpha = (2L)^(1/4),
    beta = (8L)^(-1/4). Needs norm = post."""

    kind: Literal["deepnorm"] = "deepnorm"

    @staticmethod
    def constants(encoder_layers: int | None, decoder_layers: int | None, decoder: bool) -> tuple[float, float]:
        """(alpha, beta) for a sub-layer of the decoder (or the encoder), given both stacks' layer counts."""
        n, m = encoder_layers, decoder_layers
        if n and m:
            return ((3 * m) ** 0.25, (12 * m) ** -0.25) if decoder else \
                (0.81 * (n ** 4 * m) ** (1 / 16), 0.87 * (n ** 4 * m) ** (-1 / 16))
        layers = m if decoder else n
        return (2 * layers) ** 0.25, (8 * layers) ** -0.25


Skip = Annotated[Union[ScaleBy, NormedSkip, DeepNorm], Field(discriminator="kind")]


class _Sublayer(Node):
    """One sub-layer of a layer, with its norms and its residual connection; written in a block's
    list, `sequential(attention(norm = sandwich), ffn(norm = sandwich))`."""

    norm: SublayerNorm | None = Field(
        None, description="its norms: post, pre, output, sandwich as the stack's norm, or none: x + F(x) "
                          "(unset: the layer's norm)")
    scale: Annotated[float, Field(gt=0.0, le=1e3)] = Field(
        1.0, json_schema_extra=LATER, description="the residual adds scale * F: 0.5 is the macaron half "
                                                  "feed-forward (Conformer)")
    gain: Gain | None = Field(
        None, json_schema_extra=LATER,
        description="a learned gain on what the residual adds: layerscale(init) per channel, rezero a scalar from 0")
    normalization: Normalization | None = Field(
        None, json_schema_extra=LATER, description="the kind of this sub-layer's norms (unset: the stack's)")
    skip: Skip | None = Field(
        None, json_schema_extra=LATER,
        description="what the skip carries (unset: the input x): a number alpha, alpha x; deepnorm, alpha and beta "
                    "from the layer counts; normed, the normed input")


class SelfAttentionSublayer(_Sublayer):
    """The layer's self-attention (its kind is the stack's `attention`)."""

    kind: Literal["attention"] = "attention"


class CrossAttentionSublayer(_Sublayer):
    """Attention over the encoder's output (a decoder with an encoder; its kind is `cross_attention`)."""

    kind: Literal["cross_attention"] = "cross_attention"


class FeedForwardSublayer(_Sublayer):
    """A position-wise feed-forward net (d_ff, activation: the stack's); a layer may have several."""

    kind: Literal["ffn"] = "ffn"


class Stream(Node):
    """A norm-only step of a layer: the stream itself normed, x = Norm(x) (a layer-final norm, or with a
    pre-norm sub-layer before it, Norm(x + F(Norm(x)))); written `norm` in a block's list,
    `sequential(attention(norm = pre), ffn(norm = pre), norm)`, or with a norm of its own, `norm(normalization =
    rmsnorm)`."""

    normalization: Normalization | None = Field(
        None, json_schema_extra=LATER, description="the kind of this norm (unset: the stack's)")
    kind: Literal["norm"] = "norm"


Sublayer = Annotated[Union[SelfAttentionSublayer, CrossAttentionSublayer, FeedForwardSublayer, Stream],
                     Field(discriminator="kind")]
SUBLAYER_LIMIT = 8  # sub-layers of one layer


def paper_sublayers(cross: bool) -> tuple:
    """The paper's layer: self-attention, (cross-attention,) the feed-forward net, norms unset."""
    return (SelfAttentionSublayer(),) + ((CrossAttentionSublayer(),) if cross else ()) + (FeedForwardSublayer(),)


class Sequential(Node):
    """Sub-layers one after another, each reading the previous one's output (the paper). Written
    `sequential`, its sub-layers are the paper's, each with the stack's norm; written out,
    `sequential(ffn(scale = 0.5), attention, ffn(scale = 0.5))`, they are the ones listed."""

    kind: Literal["sequential"] = "sequential"
    sublayers: tuple[Sublayer, ...] = Field(
        (), json_schema_extra=LATER, description="the sub-layers in order (unset: the paper's, with the stack's norm)")


class Parallel(Node):
    """Self-attention and the feed-forward net read the same input, their outputs added to it:
    x + Attn(Norm(x)) + FFN(Norm(x)) (GPT-J, PaLM, Phi, Falcon-7B: one norm) or
    x + Attn(Norm_1(x)) + FFN(Norm_2(x)) (GPT-NeoX, Falcon's new decoder architecture: two).
    Written out, `parallel(attention(norm = sandwich), ffn(scale = 0.5), norms = 1)`: each sub-layer with
    its own norm place (pre, output, sandwich, none; unset: the stack's) and scale."""

    kind: Literal["parallel"] = "parallel"
    sublayers: tuple[Sublayer, ...] = Field(
        (), json_schema_extra=LATER,
        description="attention, ffn (the only parallel pair), each with its norm and scale (unset: the stack's norm)")
    norms: Literal[1, 2] = Field(1, description="one norm both sub-layers read, or one each")


Block = Annotated[Union[Sequential, Parallel], Field(discriminator="kind")]


# --- stacks -----------------------------------------------------------------------------------

Activation = Literal["relu", "gelu", "silu", "swiglu", "geglu", "gelu_tanh", "geglu_tanh", "relu2"]
GATED = ("swiglu", "geglu", "geglu_tanh")  # act(W_gate x) * (W_up x) (Shazeer 2020)
QKNorm = Literal["none", "head", "projection"]
DecoderMask = Literal["causal", "prefix"]  # a decoder's self-attention mask (`mask = prefix`: prefix-LM)


class DenseFFN(Node):
    """One position-wise feed-forward net (section 3.3): d_ff and the activation are the stack's."""

    kind: Literal["dense"] = "dense"


class MoE(Node):
    """A mixture of experts (Shazeer et al. 2017; Switch, Mixtral): a router W_r scores each token's
    experts, softmax(W_r x); the top_k are kept (renormalised to sum to one where `renormalize`) and the
    token's output is the sum of those experts' outputs, each weighted; every expert is a feed-forward net
    of the stack's d_ff and activation. `shared` adds one more expert that reads every token (Qwen2-MoE's
    shared expert, that wide), gated by sigmoid(w_s . x) where `shared_gate`. `aux_loss` is the weight of
    the router's load-balancing loss (Switch Transformer's; transformers' router_aux_loss_coef) in training."""

    kind: Literal["moe"] = "moe"
    experts: Annotated[int, Field(ge=1, le=1024)] = Field(description="experts per layer (Mixtral: 8)")
    top_k: Annotated[int, Field(ge=1, le=1024)] = Field(2, description="experts each token is routed to")
    renormalize: bool = Field(True, description="the top_k weights divided by their sum (Mixtral; Qwen2-MoE's "
                                                "norm_topk_prob)")
    shared: Annotated[int, Field(ge=0, le=1 << 16)] = Field(
        0, description="inner width of a shared expert every token reads (Qwen2-MoE); 0: none")
    shared_gate: bool = Field(True, description="the shared expert's output gated by sigmoid(w . x) (Qwen2-MoE)")
    aux_loss: Annotated[float, Field(ge=0.0, le=1e3)] = Field(
        0.0, description="weight of the router's load-balancing loss in training (router_aux_loss_coef); 0: off")


FFN = Annotated[Union[DenseFFN, MoE], Field(discriminator="kind")]
# --- rotary scaling: context extension of rope (transformers' ROPE_INIT_FUNCTIONS, rope_scaling's rope_type) ---

Factor = Annotated[float, Field(ge=1.0, le=1e6)]
ContextLength = Annotated[int, Field(ge=1, le=1 << 24)]


class LinearScaling(Node):
    """Position interpolation (Chen et al. 2023; kaiokendev): every inverse frequency divided by `factor`."""

    kind: Literal["linear"] = "linear"
    factor: Factor = Field(description="how many times longer the positions stretch")


class DynamicScaling(Node):
    """Dynamic NTK scaling (bloc97, emozilla): past `original_max_len` the base grows with the length L,
    base * (factor * L / original_max_len - (factor - 1))^(r / (r - 2)); L is the last rotated position + 1."""

    kind: Literal["dynamic"] = "dynamic"
    factor: Factor = Field(description="the growth of the base per original context length")
    original_max_len: ContextLength = Field(description="the context length trained (HF: max_position_embeddings)")


class Llama3Scaling(Node):
    """Llama 3.1's: wavelengths above original_max_len / low_freq_factor divided by `factor`, below
    original_max_len / high_freq_factor kept, a smooth blend between."""

    kind: Literal["llama3"] = "llama3"
    factor: Factor = Field(description="the division of the low frequencies (Llama 3.1: 8)")
    low_freq_factor: Annotated[float, Field(gt=0.0, le=1e6)] = Field(1.0, description="Llama 3.1: 1")
    high_freq_factor: Annotated[float, Field(gt=0.0, le=1e6)] = Field(4.0, description="Llama 3.1: 4")
    original_max_len: ContextLength = Field(description="the context length trained (Llama 3.1: 8192)")


class YarnScaling(Node):
    """YaRN (Peng et al. 2023): frequencies interpolated by `factor` below a ramp between the dims that
    rotate beta_fast and beta_slow times over original_max_len, kept above it; cos and sin times
    `attention_factor` (unset: 0.1 ln(factor) + 1)."""

    kind: Literal["yarn"] = "yarn"
    factor: Factor = Field(description="how many times longer the context")
    original_max_len: ContextLength = Field(description="the context length trained")
    beta_fast: Annotated[float, Field(gt=0.0, le=1e6)] = Field(32.0, description="rotations where the ramp starts")
    beta_slow: Annotated[float, Field(gt=0.0, le=1e6)] = Field(1.0, description="rotations where the ramp ends")
    attention_factor: Annotated[float, Field(gt=0.0, le=1e6)] | None = Field(
        None, description="cos and sin scaled by it (unset: 0.1 ln(factor) + 1)")
    truncate: bool = Field(True, description="the ramp's ends rounded to whole dims")


ROPE_DIMS_LIMIT = 1 << 15  # LongRoPE factors: one per rotated pair of dims, so at most d_k / 2 (d_k <= 65536)
ExtensionFactors = Annotated[tuple[Annotated[float, Field(gt=0.0, le=1e6)], ...],
                             Field(min_length=1, max_length=ROPE_DIMS_LIMIT)]


class LongropeScaling(Node):
    """LongRoPE (Ding et al. 2024; Phi-3): each rotated pair i's inverse frequency divided by its own factor,
    `short_factor[i]` while the last rotated position + 1 (L) is at most original_max_len, `long_factor[i]`
    past it; cos and sin times `attention_factor` (unset: sqrt(1 + ln(factor) / ln(original_max_len)), 1 for
    factor 1)."""

    kind: Literal["longrope"] = "longrope"
    short_factor: ExtensionFactors = Field(description="per rotated pair, up to original_max_len")
    long_factor: ExtensionFactors = Field(description="per rotated pair, past original_max_len")
    original_max_len: ContextLength = Field(
        description="the context length trained (HF: original_max_position_embeddings)")
    factor: Factor = Field(description="the context extension, for the attention factor (Phi-3: "
                                       "max_position_embeddings / original_max_position_embeddings)")
    attention_factor: Annotated[float, Field(gt=0.0, le=1e6)] | None = Field(
        None, description="cos and sin scaled by it (unset: sqrt(1 + ln(factor) / ln(original_max_len)))")


RopeScaling = Annotated[Union[LinearScaling, DynamicScaling, Llama3Scaling, YarnScaling, LongropeScaling],
                        Field(discriminator="kind")]


class NoSharing(Node):
    """Every layer its own parameters (the paper)."""

    kind: Literal["none"] = "none"


class ShareAll(Node):
    """Every layer of the stack uses one parameter set (ALBERT, Lan et al. 2019)."""

    kind: Literal["all"] = "all"


class ShareGroups(Node):
    """Consecutive groups of `size` layers each use one parameter set: size 3 over 6 layers is A A A B B B
    (ALBERT's num_hidden_groups; Takase & Kiyono 2021's "sequence"). size divides the stack's layers."""

    kind: Literal["groups"] = "groups"
    size: Annotated[int, Field(ge=1, le=1024)] = Field(description="layers per parameter set")


class ShareCycle(Node):
    """Layer i uses parameter set i % period: A B A B ... (Takase & Kiyono 2021's "cycle"); period is at
    most the stack's layers."""

    kind: Literal["cycle"] = "cycle"
    period: Annotated[int, Field(ge=1, le=1024)] = Field(description="how many parameter sets, used in turn")


Share = Annotated[Union[NoSharing, ShareAll, ShareGroups, ShareCycle], Field(discriminator="kind")]


# A layer kind's name reaches generated code only as the CamelCase prefix of a class named ...EncoderLayer
# or ...DecoderLayer (`class_prefix`), so it can be no keyword, builtin, torch name or method there.
KIND_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
LAYER_KIND_LIMIT = 64  # kinds of one stack: each is lowered once and printed as a class


class _LayerKindPlace(Node):
    """Where a layer kind's layers are, and its name (LayerKind adds the Stack keys it may change)."""

    name: str = Field(description="the layer kind's name: lower-case letters, digits and _")
    every: Annotated[int, Field(ge=1, le=1024)] = Field(1, description="one layer of this kind every so many")
    start: Annotated[int, Field(ge=0, le=1023)] = Field(0, description="the index of the first (from 0)")
    count: Annotated[int, Field(ge=1, le=1024)] | None = Field(None, description="how many (unset: to the end)")

    @field_validator("name")
    @classmethod
    def _kind_name(cls, name: str) -> str:
        if not KIND_NAME.fullmatch(name):  # generated code reads it only as a class name's prefix: GlobalDecoderLayer
            raise ValueError(f"{name!r} is not a layer kind name (lower-case ASCII letters, digits and _, "
                             "starting with a letter, at most 32)")
        return name

    @property
    def class_prefix(self) -> str:
        """`global_attn` -> `GlobalAttn`: what generated code puts before EncoderLayer / DecoderLayer."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    def indices(self, layers: int) -> list[int]:
        """The layer indices of this kind in a stack of `layers`."""
        found = list(range(self.start, layers, self.every))
        return found if self.count is None else found[: self.count]

    def changes(self) -> dict:
        """The stack keys this kind sets."""
        return {k: getattr(self, k) for k in LAYER_KEYS if getattr(self, k) is not None}


def follows_depth(attention: "Attention | None") -> bool:
    """Whether an attention is differential with its lambda_init left to the layer's depth (the paper's
    0.8 - 0.6 exp(-0.3 (depth - 1))): a number the stack's loop hands each layer as it runs it
    (attncomp.lower.loops), so layers at different depths stay one layer, and shared sets stay shared."""
    normalizer = getattr(attention, "normalizer", None)
    return isinstance(normalizer, Differential) and normalizer.lambda_init is None


class Stack(Node):
    """N identical layers: self-attention (and, in a decoder, cross-attention), then a feed-forward net."""

    layers: Annotated[int, Field(ge=1, le=1024)] = Field(6, description="number of layers N")
    d_model: Dim = Field(512, description="width of the residual stream")
    heads: Annotated[int, Field(ge=1, le=1024)] = Field(8, description="attention heads h")
    d_k: Dim = Field(64, description="query/key width per head (default d_model / heads)")
    d_v: Dim = Field(64, description="value width per head (default d_model / heads)")
    d_ff: Dim = Field(2048, json_schema_extra=per_layer(2), description="inner width of the feed-forward net")
    attention: Attention = Field(ScaledDot(), json_schema_extra=per_layer(1), description="self-attention kind")
    norm: NormPlace = Field(
        "post", json_schema_extra=per_layer(4), description="where each sub-layer's norm goes: post Norm(x + F(x)) (the paper), pre x + F(Norm(x)), "
                            "output x + Norm(F(x)) (OLMo 2), sandwich x + Norm(F(Norm(x))) (Gemma 2)")
    activation: Activation = Field(
        "relu", json_schema_extra=per_layer(3), description="feed-forward activation: relu, gelu (erf), gelu_tanh (the tanh approximation, GPT-2's "
                            "gelu_new), silu, relu2 (ReLU squared); gated: swiglu, geglu, geglu_tanh, "
                            "W2(act(W_gate x) * (W_up x))")
    normalization: Normalization = Field(
        LayerNorm(), json_schema_extra=per_layer(5), description="every norm of the stack: layernorm(gain, bias) or rmsnorm(gain, offset)")
    final_norm: bool = Field(False, description="a norm closes the stack (default: true unless norm = post)")
    kv_heads: Annotated[int, Field(ge=1, le=1024)] | None = Field(
        None, description="key/value heads (none: = heads; fewer: grouped-query attention, 1: multi-query)")
    qk_norm: QKNorm = Field(
        "none", json_schema_extra=per_layer(7, LATER),
        description="RMSNorm of q and k before the scores: per head over d_k (Qwen3), or over the whole "
                    "projection (OLMo 2)")
    block: Block = Field(Sequential(), json_schema_extra=per_layer(6, LATER),
                         description="sequential sub-layers (the paper), or parallel(norms = 1|2): attention "
                                     "and feed-forward net reading one input")
    rope_base: Positive | None = Field(
        None, json_schema_extra=per_layer(9, LATER),
        description="the rotary base of this stack's layers (unset: positions = rope(base)); a layer kind may set its "
                    "own (ModernBERT: 160000 for global layers, 10000 for local ones)")
    rope_scaling: RopeScaling | None = Field(
        None, json_schema_extra=per_layer(10), description="the rotary scaling of this stack's layers (unset: positions = rope(scaling)); a layer kind "
                          "may set its own (Gemma 3: linear(factor = 8) for global layers only)")
    ffn: FFN = Field(DenseFFN(), json_schema_extra=per_layer(8, LATER),
                     description="the feed-forward nets: dense (one, the paper), or moe(experts, top_k, renormalize, "
                                 "shared, shared_gate, aux_loss), a mixture of experts")
    qk_normalization: Normalization | None = Field(
        None, json_schema_extra=LATER,
        description="the kind of the q/k norms (unset: RMSNorm, with the stack's rmsnorm offset)")
    unet: bool = Field(False, json_schema_extra=LATER,
                       description="U-net skips: the output of layer i, times a learned weight (from 1), added to the "
                                   "input of layer L-1-i, for i < L/2 (modded-nanogpt)")
    value_residual: bool = Field(
        False, json_schema_extra=LATER,
        description="value residual learning (ResFormer): every layer's values mixed with the first layer's, "
                    "l_1 V_n + l_2 V_1, l learned (from 0.5)")
    reinject: bool = Field(False, json_schema_extra=LATER,
                           description="the stack's input re-injected: layer l > 0 reads a_l x + b_l x_0, a_l and b_l "
                                       "learned (from 1 and 0; modded-nanogpt)")
    layer: tuple["LayerKind", ...] = Field(
        (), json_schema_extra=LATER,
        description="layer kinds that differ from the stack's own keys, each `layer NAME { ... }`")
    # sharing across layers (a layer kind says what a layer is; `share` which layers of a kind hold one set of
    # weights; `share_kv` which layers reuse another's keys and values)
    share: Share = Field(
        NoSharing(), json_schema_extra=LATER,
        description="parameter sets across the layers: none (each its own), all (one for the stack, ALBERT), "
                    "groups(size) (A A A B B B), cycle(period) (A B A B); layers sharing a set are of one layer kind")
    share_kv: Annotated[int, Field(ge=1, le=1024)] = Field(
        1, json_schema_extra=LATER,
        description="cross-layer key/value sharing (CLA, Brandon et al. 2024): layer i attends with the keys and "
                    "values layer N * (i // N) computed; only those layers project them and are cached (1: none)")

    @property
    def key_value_heads(self) -> int:
        """kv_heads, or heads when unset: left unset (and out of the canonical text), it follows heads,
        so `--set model.heads=...` on a stored spec keeps plain multi-head attention."""
        return self.heads if self.kv_heads is None else self.kv_heads

    def layer_plan(self, positions: "Positions | None" = None) -> list[tuple[str, "Stack"]]:
        """For each layer index, its kind's name ("" for the stack's own) and the stack as that layer
        sees it (the kind's keys applied, no kinds of its own): the one place per-layer keys resolve.
        Given the model's `positions`, each layer's rotation is resolved too: with rope, its rope_base and
        rope_scaling are the kind's, else the stack's, else positions' (base, scaling), so a lowering
        reads the layer's own and asks no other level."""
        plan: list[tuple[str, Stack]] = [("", self._resolved(self.model_copy(update={"layer": ()}), positions))] \
            * self.layers
        for kind in self.layer:
            changes = kind.changes()
            if "norm" in changes and "block" not in changes and self.block.sublayers:
                # a kind's norm is the norm of every inherited sub-layer: the stack's written norms were the stack's
                changes["block"] = self.block.model_copy(update={"sublayers": tuple(
                    s if isinstance(s, Stream) else s.model_copy(update={"norm": None}) for s in self.block.sublayers)})
            layer = self._resolved(self.model_copy(update={**changes, "layer": ()}), positions)
            for i in kind.indices(self.layers):
                plan[i] = (kind.name, layer)
        return plan

    def parameter_sets(self) -> tuple[int, ...]:
        """For each layer index, the index of the parameter set it uses (`share`): 0, 1, ..., L-1 without sharing.
        Set s's parameters are the module `layers.s` of the compiled model (and its state dict's names)."""
        share, n = self.share, self.layers
        if isinstance(share, ShareAll):
            return (0,) * n
        if isinstance(share, ShareGroups):
            return tuple(i // share.size for i in range(n))
        if isinstance(share, ShareCycle):
            return tuple(i % share.period for i in range(n))
        return tuple(range(n))

    def kv_source(self, i: int) -> int:
        """The layer whose keys and values layer i attends with (`share_kv = N`: N * (i // N); i itself at N = 1)."""
        return self.share_kv * (i // self.share_kv)

    @staticmethod
    def _resolved(layer: "Stack", positions: "Positions | None") -> "Stack":
        """A layer's rotation with positions' base and scaling where neither its kind nor its stack set one."""
        if not isinstance(positions, Rope):
            return layer
        return layer.model_copy(update={
            "rope_base": positions.base if layer.rope_base is None else layer.rope_base,
            "rope_scaling": positions.scaling if layer.rope_scaling is None else layer.rope_scaling})

    def sublayers(self, cross: bool) -> tuple:
        """The layer's sub-layers in order, each with its norm: the block's written list, or the paper's
        (with cross-attention when the decoder reads an encoder); an unset norm is the stack's."""
        written = self.block.sublayers or paper_sublayers(cross)
        return tuple(s if isinstance(s, Stream) or s.norm is not None else s.model_copy(update={"norm": self.norm})
                     for s in written)

    @property
    def depth_lambda(self) -> bool:
        """Whether a layer of the stack has a differential attention whose lambda_init follows its depth: then the
        stack's loop hands every layer its depth's lambda_init (attncomp.lower.loops)."""
        return any(follows_depth(getattr(layer, key, None)) for _, layer in self.layer_plan()
                   for key in ("attention", "cross_attention"))

    @property
    def gated(self) -> bool:
        """A gated feed-forward (Shazeer 2020): two inner projections of width d_ff."""
        return self.activation in GATED


def _layer_kind_fields() -> dict:
    """LayerKind's keys: each Stack field marked `per_layer`, in its place, optional (unset: the stack's)."""
    marked = sorted((layer_place(f), key, f) for key, f in Stack.model_fields.items() if layer_place(f) is not None)
    fields = {}
    for _, key, field in marked:
        kind = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
        fields[key] = (Optional[kind], Field(None, discriminator=field.discriminator,
                                             description=f"{field.description} (unset: the stack's)"))
    return fields


LayerKind = create_model(
    "LayerKind", __base__=_LayerKindPlace, __module__=__name__, **_layer_kind_fields(),
    __doc__="""Layers of a stack that differ from it (Gemma 2's global layers among local ones, ModernBERT's
    global layer every third): where they are, layer indices start, start + every, ... (count of them,
    or as many as the stack has), and what they change: any Stack key marked `per_layer`; a key left unset
    is the stack's. Written `layer NAME { ... }` inside the stack; NAME names the layer kind (and its class in
    generated code).""")
LAYER_KEYS = tuple(key for key in LayerKind.model_fields if key not in _LayerKindPlace.model_fields)
Stack.model_rebuild()


class EncoderSpec(Stack):
    """The `encoder { }` block (its nn.Module, made by the lowering, is the compiled model's `Encoder`)."""


class DecoderSpec(Stack):
    """The `decoder { }` block (its nn.Module is the compiled model's `Decoder`)."""

    cross_attention: Attention = Field(ScaledDot(), description="encoder-decoder attention kind")
    mask: DecoderMask = Field(
        "causal", json_schema_extra=LATER,
        description="which keys a position's self-attention sees: causal (those up to it), or prefix (a "
                    "decoder-only model: every key of its row's prefix, the source, bidirectionally, and causal "
                    "after it; the prefix-LM of T5, UL2, GLM)")


# --- vocabulary, positions, dropout -----------------------------------------------------------


# The special tokens' ids, declared by the vocabulary (attncomp.vocab: every stage reads them from here, through
# `ModelSpec.specials`). The defaults are attncomp's own (<pad> 0, <unk> 1, <s> 2, </s> 3, <sep> 4); an imported
# model declares its family's (GPT-2: bos = eos = unk = 50256, pad = none), so no vocabulary rows move.
TokenId = Annotated[int, Field(ge=0, lt=1 << 24)] | None
# every role a vocabulary declares; a stored tokenizer records all but mask (Specials.tokenizer_roles)
ROLES = ("pad", "unk", "bos", "eos", "sep", "mask", "start")


def _role(default: int | None, what: str):
    return Field(default, json_schema_extra=BY_NAME, description=what)


class Shared(Node):
    """One vocabulary for source and target (the paper's shared BPE), and its special tokens' ids."""

    kind: Literal["shared"] = "shared"
    size: VocabSize = Field(description="number of tokens, special tokens included")
    pad: TokenId = _role(PAD, "padding: masked in attention, never a target; none: the vocabulary has none")
    unk: TokenId = _role(UNK, "the unknown token; none: the vocabulary has none")
    bos: TokenId = _role(BOS, "<s>: what a sequence begins with; none: nothing")
    eos: TokenId = _role(EOS, "</s>: what ends a sentence; none: the model cannot end one")
    sep: TokenId = _role(SEP, "<sep>: joins a decoder-only model's source and target; none: it reads plain text")
    mask: TokenId = _role(None, "masked-LM's <mask> (unset: sep's id)")
    start: TokenId = _role(None, "the decoder's first input (unset: bos; BART: </s>)")


class Separate(Node):
    """Separate source and target vocabularies, and their special tokens' ids (the same on both sides)."""

    kind: Literal["separate"] = "separate"
    src: VocabSize = Field(description="source vocabulary size")
    tgt: VocabSize = Field(description="target vocabulary size")
    pad: TokenId = _role(PAD, "padding: masked in attention, never a target")
    unk: TokenId = _role(UNK, "the unknown token; none: the vocabulary has none")
    bos: TokenId = _role(BOS, "<s>: what a sequence begins with; none: nothing")
    eos: TokenId = _role(EOS, "</s>: what ends a sentence")
    sep: TokenId = _role(SEP, "<sep> (unused by an encoder-decoder)")
    mask: TokenId = _role(None, "masked-LM's <mask> (unset: sep's id)")
    start: TokenId = _role(None, "the decoder's first input (unset: bos; Marian: <pad>)")


Vocab = Annotated[Union[Shared, Separate], Field(discriminator="kind")]


class Sinusoidal(Node):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...): no parameters.

    `layout` orders the dimensions: `interleaved` is the paper's (sin, cos per pair of dimensions);
    `halves` is Marian's (all sines, then all cosines, the same frequencies), which fairseq and
    tensor2tensor also write, with frequencies 10000^(-i/(d/2 - 1)) (`timescales = tensor2tensor`) and
    fairseq with positions from padding_idx + 1 (`offset`)."""

    kind: Literal["sinusoidal"] = "sinusoidal"
    layout: Literal["interleaved", "halves"] = Field(
        "interleaved",
        description="interleaved (the paper: sin, cos per dimension pair) or halves (Marian: sines, then cosines)",
    )
    timescales: Literal["paper", "tensor2tensor"] = Field(
        "paper", json_schema_extra=LATER,
        description="frequencies 10000^(-2i/d_model) (the paper), or 10000^(-i/(d_model/2 - 1)) (tensor2tensor's "
                    "get_timing_signal_1d, fairseq, M2M100; with layout = halves)")
    offset: Annotated[int, Field(ge=0, le=1 << 16)] = Field(
        0, json_schema_extra=LATER, description="the first position's index (fairseq: padding_idx + 1 = 2)")


class Learned(Node):
    """A learned embedding per position (Table 3 row E). With `offset = k` the table has max_len + k rows and
    position p reads row p + k (OPT's OPTLearnedPositionalEmbedding: k = 2, its first rows never read)."""

    kind: Literal["learned"] = "learned"
    max_len: Count = Field(1024, description="longest sequence the table covers")
    offset: Annotated[int, Field(ge=0, le=1 << 16)] = Field(
        0, json_schema_extra=LATER, description="rows before position 0's (OPT: 2); the table has max_len + offset")


class NoPositions(Node):
    """No positional information (order-blind unless the attention is local or causal)."""

    kind: Literal["none"] = "none"


class ALiBi(Node):
    """Attention with linear biases (Press et al. 2022): nothing added to the embeddings; each head h
    adds -m_h |i - j| to the self-attention scores, m_h the paper's geometric slopes. No bias in
    cross-attention (source and target positions do not line up)."""

    kind: Literal["alibi"] = "alibi"


class Relative(Node):
    """Relative position representations (Shaw, Uszkoreit, Vaswani 2018; tensor2tensor's
    dot_product_attention_relative): per layer, learned vectors a^K (and a^V) for the clipped
    distances -max_distance..max_distance, shared across heads; self-attention only. The logit term
    q_i . a^K_ij / sqrt(d_k) is an additive mask of the fused attention; the value term
    sum_j w_ij a^V_ij (`values = true`) keeps the attention explicit, since SDPA cannot take it."""

    kind: Literal["relative"] = "relative"
    max_distance: Annotated[int, Field(ge=1, le=1 << 16)] = Field(16, description="k: distances clip to -k..k")
    values: bool = Field(False, description="also the value-side term a^V (the paper's; keeps attention unfused)")



class Rope(Node):
    """Rotary positions (Su et al. 2021): q and k of every head rotated by their position, pairs
    (i, i + r/2) of the first r = fraction * d_k dims at angles pos * base^(-2i/r) (HF Llama's rotate_half);
    nothing is added to the embeddings."""

    kind: Literal["rope"] = "rope"
    base: Annotated[float, Field(gt=1.0, le=1e9)] = Field(
        10000.0, description="theta: the wavelength base of the rotation angles")
    fraction: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        1.0, description="the share of each head's d_k dims rotated (GPT-NeoX's rotary_pct)")
    scaling: RopeScaling | None = Field(
        None, description="context extension: linear, dynamic, llama3, yarn or longrope (unset: none)")

    def dims(self, d_k: int) -> int:
        """How many of a head's d_k dims are rotated (verify checks fraction * d_k is even and whole)."""
        return round(self.fraction * d_k)


class Buckets(Node):
    """T5's relative position bias (Raffel et al. 2020): the distance j - i falls into one of `count`
    buckets, exact for small distances and log-spaced up to `max_distance` (farther ones share the
    last); each bucket has a learned scalar per head, one table per stack (`relative_bias`) shared by
    its layers (`per_layer = true`: one per layer's self-attention, umT5's), added to the self-attention
    scores. An encoder's buckets are bidirectional (half of them for keys after the query), a decoder's causal."""

    kind: Literal["buckets"] = "buckets"
    count: Annotated[int, Field(ge=4, le=1 << 12)] = Field(32, description="buckets (T5: relative_attention_num_buckets)")
    max_distance: Annotated[int, Field(ge=1, le=1 << 20)] = Field(
        128, description="the distance where the log-spaced buckets end (T5: relative_attention_max_distance)")
    per_layer: bool = Field(False, json_schema_extra=LATER,
                            description="a table in every layer's self-attention (umT5) rather than one per stack")


Positions = Annotated[Union[Sinusoidal, Learned, NoPositions, ALiBi, Relative, Rope, Buckets],
                      Field(discriminator="kind")]


class Dropout(Node):
    """Dropout probabilities; the paper's P_drop is `residual`."""

    residual: Prob = Field(0.1, description="on each sub-layer output before the residual add")
    embedding: Prob = Field(0.1, description="on embeddings + positions (default: residual)")
    attention: Prob = Field(0.0, description="on attention weights")
    activation: Prob = Field(0.0, description="on the feed-forward activation")


class Bias(Node):
    """Which projections add a bias. The paper's W^Q, W^K, W^V, W^O are plain matrices and only the
    feed-forward layer has biases (`bias { attention = false }`, as specs/base.attn writes); the
    defaults are torch.nn.Transformer's, so a spec that never named biases keeps its meaning.
    `bias = true` / `bias = false` set both groups.

    Per projection: q, k, v, o (attention) and fc1, fc2 (feed-forward) each inherit their group
    (`attention`, `ffn`) unless set, so `bias { attention = false  o = true }` biases only W^O.
    `output` (the pre-softmax projection) is its own key, false unless set."""

    attention: bool = Field(True, description="biases in the attention projections W^Q, W^K, W^V, W^O")
    ffn: bool = Field(True, description="biases in the feed-forward layers (the paper: b_1, b_2)")
    q: bool | None = Field(None, description="bias of W^Q (unset: the attention group's)")
    k: bool | None = Field(None, description="bias of W^K (unset: the attention group's)")
    v: bool | None = Field(None, description="bias of W^V (unset: the attention group's)")
    o: bool | None = Field(None, description="bias of W^O (unset: the attention group's)")
    fc1: bool | None = Field(None, description="bias of the first feed-forward layer (unset: the ffn group's)")
    fc2: bool | None = Field(None, description="bias of the second feed-forward layer (unset: the ffn group's)")
    output: bool = Field(False, description="a bias on the pre-softmax projection (BERT's MLM decoder bias)",
                         json_schema_extra=LATER)

    def of(self, projection: str) -> bool:
        """Whether `projection` (q, k, v, o, fc1, fc2) has a bias: its own key, else its group's."""
        own = getattr(self, projection)
        if own is not None:
            return own
        return self.attention if projection in ATTENTION_PROJECTIONS else self.ffn


ATTENTION_PROJECTIONS = ("q", "k", "v", "o")


class LinearHead(Node):
    """The final hidden states go straight to the output projection (the paper)."""

    kind: Literal["linear"] = "linear"


class DenseHead(Node):
    """BERT's prediction-head transform before the output projection: LayerNorm(act(dense(x)))."""

    kind: Literal["dense"] = "dense"
    activation: Activation = Field("gelu", description="activation after the dense layer, any a stack takes (gated: "
                                                        "act(W_gate x) * (W x))")
    bias: bool = Field(True, description="a bias in the dense layer")
    normalization: Normalization = Field(
        LayerNorm(), json_schema_extra=LATER,
        description="the head's norm: layernorm(gain, bias) (BERT's; bias = false: ModernBERT's norm_bias = false) "
                    "or rmsnorm(gain, offset)")


Head = Annotated[Union[LinearHead, DenseHead], Field(discriminator="kind")]


class ModelSpec(Node):
    """The `model { }` block: the architecture (its nn.Module is a CompiledModel, whose class is `Model`).
    Code names a ModelSpec `arch`; `model` is always an nn.Module."""

    name: str = Field("model", description="the model's name (an ASCII identifier)")
    vocab: Vocab = Field(Shared(size=37000), description="vocabulary: shared(size) or separate(src, tgt)")
    tie: Literal["none", "decoder", "all", "encoder", "inputs"] = Field(
        "all", description="share weights: none; decoder (target embedding = output); all three; "
        "encoder (encoder-only: its embedding = output); inputs (source embedding = target embedding, "
        "the output projection its own: T5 v1.1)"
    )
    positions: Positions = Field(Sinusoidal(), description="positional encoding")
    scale_embeddings: bool = Field(True, description="multiply embeddings by sqrt(d_model)")
    bias: Bias = Field(Bias(), description="biases: bias { attention = ...  ffn = ... }, or true/false for both")
    norm_eps: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(1e-5, description="LayerNorm epsilon")
    embedding_norm: bool = Field(False, description="LayerNorm on embeddings + positions, before their dropout",
                                 json_schema_extra=LATER)
    head: Head = Field(LinearHead(), description="before the output projection: linear (none) or dense(activation)",
                       json_schema_extra=LATER)
    d_embed: Dim | None = Field(
        None, json_schema_extra=LATER,
        description="width of the token embeddings (unset: d_model); narrower (ALBERT, ELECTRA), the embedded "
                    "tokens are projected in to each stack's d_model (embed_proj) and the final states out to "
                    "d_embed (the dense head, or output_proj) before the output projection")
    segments: Annotated[int, Field(ge=0, le=1024)] = Field(
        0, json_schema_extra=LATER,
        description="token-type (segment) embeddings: how many segment ids (BERT: 2), each a learned vector "
                    "added to the source's token embeddings; 0: none")
    logit_scale: Annotated[float, Field(gt=0.0, le=1e6)] = Field(
        1.0, json_schema_extra=LATER, description="a constant multiplier on the logits (T5 with tied "
                                                  "embeddings: d_model^-0.5)")
    logit_softcap: Annotated[float, Field(gt=0.0, le=1e6)] | None = Field(
        None, json_schema_extra=LATER,
        description="final-logit soft-capping: logits = cap * tanh(logits / cap) (Gemma 2: 30); unset: none")
    encoder: EncoderSpec | None = Field(None, description="the encoder stack, absent for decoder-only")
    decoder: DecoderSpec | None = Field(None, description="the decoder stack, absent for encoder-only")
    dropout: Dropout = Field(Dropout(), description="dropout probabilities")

    @field_validator("name")
    @classmethod
    def _identifier(cls, name: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name) or keyword.iskeyword(name):
            raise ValueError(f"{name!r} is not a valid model name (ASCII letters, digits and _, at most 64, "
                             "not starting with a digit, not a Python keyword)")
        return name

    @property
    def stacks(self) -> list[Stack]:
        return [s for s in (self.encoder, self.decoder) if s is not None]

    @property
    def d_model(self) -> int:
        """The width the output projection (and the noam schedule) sees."""
        return (self.decoder or self.encoder).d_model  # type: ignore[union-attr]

    @property
    def embed_width(self) -> int:
        """The width of the token embeddings and of the output projection's input: d_embed, or d_model."""
        return self.d_embed if self.d_embed is not None else self.d_model

    @property
    def src_vocab(self) -> int:
        return self.vocab.size if isinstance(self.vocab, Shared) else self.vocab.src

    @property
    def tgt_vocab(self) -> int:
        return self.vocab.size if isinstance(self.vocab, Shared) else self.vocab.tgt

    @property
    def specials(self) -> Specials:
        """The special tokens' ids the vocabulary declares (defaults: attncomp's own)."""
        v = self.vocab
        return Specials(pad=v.pad, unk=v.unk, bos=v.bos, eos=v.eos, sep=v.sep,
                        mask=v.sep if v.mask is None else v.mask, start=v.bos if v.start is None else v.start)


# --- training ---------------------------------------------------------------------------------


class CrossEntropy(Node):
    """Cross-entropy over target tokens, padding ignored."""

    kind: Literal["cross_entropy"] = "cross_entropy"
    label_smoothing: Prob = Field(0.1, description="epsilon_ls")


Loss = Annotated[Union[CrossEntropy], Field(discriminator="kind")]


class Adam(Node):
    """Adam (fused on GPU); the learning rate comes from the schedule."""

    kind: Literal["adam"] = "adam"
    beta1: Prob = Field(0.9, description="first-moment decay")
    beta2: Prob = Field(0.98, description="second-moment decay")
    eps: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(1e-9, description="denominator epsilon")
    weight_decay: Annotated[float, Field(ge=0.0, lt=1.0)] = Field(0.0, description="L2 penalty")


class AdamW(Adam):
    """Adam with decoupled weight decay."""

    kind: Literal["adamw"] = "adamw"  # type: ignore[assignment]
    weight_decay: Annotated[float, Field(ge=0.0, lt=1.0)] = Field(0.01, description="decoupled decay")


Optimizer = Annotated[Union[Adam, AdamW], Field(discriminator="kind")]


class Noam(Node):
    """lr = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (section 5.3)."""

    kind: Literal["noam"] = "noam"
    warmup: Annotated[int, Field(ge=1, le=1 << 30)] = Field(4000, description="warm-up steps")
    scale: Positive = Field(1.0, description="multiplier on the whole schedule")


class InverseSqrt(Node):
    """Linear warm-up to `peak`, then peak * sqrt(warmup / step)."""

    kind: Literal["inverse_sqrt"] = "inverse_sqrt"
    peak: Positive = Field(5e-4, description="learning rate at the end of warm-up")
    warmup: Annotated[int, Field(ge=1, le=1 << 30)] = Field(4000, description="warm-up steps")


class Constant(Node):
    """Linear warm-up to `lr`, then constant."""

    kind: Literal["constant"] = "constant"
    lr: Positive = Field(1e-4, description="learning rate")
    warmup: Annotated[int, Field(ge=0, le=1 << 30)] = Field(0, description="warm-up steps")


class Cosine(Node):
    """Linear warm-up to `peak`, then a cosine decay to `final` at the last step."""

    kind: Literal["cosine"] = "cosine"
    peak: Positive = Field(5e-4, description="learning rate at the end of warm-up")
    warmup: Annotated[int, Field(ge=0, le=1 << 30)] = Field(0, description="warm-up steps")
    final: Annotated[float, Field(ge=0.0, le=1e6)] = Field(0.0, description="learning rate at the last step")


Schedule = Annotated[Union[Noam, InverseSqrt, Constant, Cosine], Field(discriminator="kind")]


class Tokens(Node):
    """At most `count` source and `count` target tokens per update, all GPUs and accumulation steps together."""

    kind: Literal["tokens"] = "tokens"
    count: Annotated[int, Field(ge=1, le=1 << 30)] = Field(description="the cap on each side's tokens per update")


Batch = Annotated[Union[Tokens], Field(discriminator="kind")]


class Steps(Node):
    """Every so many updates (written as a plain number)."""

    kind: Literal["steps"] = "steps"
    steps: Annotated[int, Field(ge=1, le=1 << 40)] = Field(description="updates between events")


class Time(Node):
    """Every so much wall-clock time (written with a unit: 30s, 10min, 2h)."""

    kind: Literal["time"] = "time"
    minutes: Annotated[float, Field(gt=0.0, le=1e6)] = Field(description="minutes between events")


Interval = Annotated[Union[Steps, Time], Field(discriminator="kind")]


class Checkpointing(Node):
    every: Interval = Field(Time(minutes=10.0), description="how often to save: 5000 (steps) or 10min")
    keep: Annotated[int, Field(ge=1, le=10_000)] = Field(5, description="checkpoints kept on disk")
    average_last: Annotated[int, Field(ge=1, le=10_000)] = Field(
        5, description="checkpoints averaged into checkpoint_avg.pt at the end"
    )


class MaskedLM(Node):
    """BERT's masked-LM objective for encoder-only models: of the non-special tokens, `rate` are chosen;
    of those, `mask` are replaced by <mask>, `random` by a random token, the rest kept; the loss is
    on the chosen positions only."""

    rate: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(0.15, description="fraction of tokens chosen for the loss")
    mask: Annotated[float, Field(ge=0.0, le=1.0)] = Field(0.8, description="of the chosen, replaced by <mask>")
    random: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        0.1, description="of the chosen, replaced by a random token")


class Validation(Node):
    """What each evaluation during training adds to the validation loss: BLEU on the first sentences, the
    best checkpoint by a metric, early stopping. Absent, a run evaluates loss and perplexity only."""

    bleu: Annotated[int, Field(ge=0, le=1 << 20)] = Field(
        0, description="validation sentences translated for BLEU at each evaluation (0: no BLEU)"
    )
    best: Literal["none", "ppl", "bleu"] = Field(
        "none", description="keep checkpoint_best.pt by this metric (lower ppl, higher BLEU)"
    )
    patience: Annotated[int, Field(ge=0, le=1 << 20)] = Field(
        0, description="stop after this many evaluations without a better `best` metric (0: never)"
    )


class Train(Node):
    """The training recipe."""

    loss: Loss = Field(CrossEntropy(), description="training loss")
    optimizer: Optimizer = Field(Adam(), description="optimiser")
    schedule: Schedule = Field(Noam(), description="learning-rate schedule")
    batch: Batch = Field(Tokens(count=25000), description="tokens per update")
    steps: Annotated[int, Field(ge=1, le=1 << 40)] = Field(100_000, description="updates to train for")
    clip_norm: Annotated[float, Field(ge=0.0, le=1e6)] = Field(0.0, description="gradient-norm clip (0: off)")
    precision: Literal["fp32", "bf16", "float8"] = Field(
        "bf16", description="autocast precision on GPU (CPU: fp32); float8: bf16 with the linear layers in float8"
    )
    seed: Annotated[int, Field(ge=0, le=(1 << 63) - 1)] = Field(1, description="seed for weights, data order, dropout")
    checkpoint: Checkpointing = Field(Checkpointing(), description="checkpointing")
    mlm: MaskedLM = Field(MaskedLM(), description="masked-LM rates (encoder-only models)", json_schema_extra=LATER)
    validation: Validation | None = Field(
        None, description="validation BLEU, the best checkpoint and early stopping (absent: loss and ppl only)"
    )


# --- decoding ---------------------------------------------------------------------------------


class SrcPlus(Node):
    """`src + k`: the source length plus k tokens."""

    kind: Literal["src_plus"] = "src_plus"
    offset: Annotated[int, Field(ge=0, le=1 << 20)] = Field(description="tokens beyond the source length")


class Fixed(Node):
    """A fixed number of tokens (written as a plain number)."""

    kind: Literal["fixed"] = "fixed"
    length: Count = Field(description="maximum output length")


MaxLen = Annotated[Union[SrcPlus, Fixed], Field(discriminator="kind")]


class Decode(Node):
    """Beam search."""

    beam: Annotated[int, Field(ge=1, le=1024)] = Field(4, description="beam size (1: greedy)")
    length_penalty: Annotated[float, Field(ge=0.0, le=10.0)] = Field(
        0.6, description="alpha in ((5 + len) / 6)^alpha"
    )
    max_len: MaxLen = Field(SrcPlus(offset=50), description="longest output: src + k, or a number")
    stop: Literal["bound", "first"] = Field(
        "bound", description="end a sentence when no live hypothesis can beat the worst finished one "
        "(bound: tensor2tensor's rule), or as soon as `beam` have finished (first)"
    )


# --- expectations -----------------------------------------------------------------------------


class Tolerance(Node):
    """`65M +- 5%`, `65M +- 2M`, or an exact `65M`."""

    value: Annotated[float, Field(ge=0.0, le=1e18)]
    percent: Annotated[float, Field(ge=0.0, le=100.0)] | None = None
    absolute: Annotated[float, Field(ge=0.0, le=1e18)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "Tolerance":
        if self.percent is not None and self.absolute is not None:
            raise ValueError("give a tolerance either in percent or absolute, not both")
        return self

    def bounds(self) -> tuple[float, float]:
        if self.percent is not None:
            delta = self.value * self.percent / 100.0
        else:
            delta = self.absolute or 0.0
        return self.value - delta, self.value + delta

    def admits(self, measured: float) -> bool:
        low, high = self.bounds()
        return low <= measured <= high


class Expect(Node):
    """What a build must measure, so a wrong architecture fails before training."""

    params: Tolerance | None = Field(None, description="trainable parameters")
    flops: Tolerance | None = Field(
        None, description="training FLOPs per target token at 64-token source and target sentences"
    )


# --- the whole spec ---------------------------------------------------------------------------


class Recipe(Node):
    """A training recipe without a model: a spec's train and decode blocks, written as a spec writes them, for a
    model that a factory makes (attncomp.train.factory)."""

    train: Train = Train()
    decode: Decode = Decode()


class Spec(Node):
    """A resolved spec: every default filled in. `_spans` maps key paths to their source spans."""

    model: ModelSpec
    train: Train = Train()
    decode: Decode = Decode()
    expect: Expect = Expect()

    _spans: dict = PrivateAttr(default_factory=dict)

    def __eq__(self, other: object) -> bool:  # spans are where a value came from, not what it is
        return isinstance(other, Spec) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((self.model, self.train, self.decode, self.expect))

    def span(self, *path: str):
        """The span of the nearest key on `path` that the source gave, or None."""
        for end in range(len(path), 0, -1):
            found = self._spans.get(tuple(path[:end]))
            if found is not None:
                return found
        return None
