"""Attention units, written the paper's way: projections, q @ k^T, scale, mask, softmax, dropout, @ v.

Every op has one spelling (the table below), so the passes can match it reliably; fuse_attention
turns the middle of it into `scaled_dot_product_attention`.

    linear layer          call_module(q_proj, x)
    clipped q, k, v       torch.clamp(x, -c, c) right after each projection (`clip_qkv`)
    split heads           torch.unflatten(x, -1, (h, d)) -> torch.transpose(x, 1, 2)
    merge heads           torch.transpose(x, 1, 2) -> torch.flatten(x, -2)
    scores                torch.matmul(q, torch.transpose(k, -2, -1)) -> torch.mul(s, 1 / math.sqrt(d_k))
                          (the spec's `scale`: a given number, or no mul at all for `scale = none`)
    soft-capping          ops.softcap(s, cap), after the scale (`softcap`)
    temperature           torch.mul(q, torch.add(temperature, 1).view(-1, 1, 1)) before the scores: t_h q . k
                          = t_h (q . k), so every kernel takes it (`temperature`; the parameter holds t - 1)
    positional bias       torch.add(s, bias)  (ALiBi, relative positions, T5's buckets; before the mask)
    mask (True = hidden)  ops.hide(s, mask): -inf where hidden; a mask may be None (nothing hidden)
    weights               torch.softmax(s, -1) -> ops.zero_rows(w, mask) where the mask has padding;
                          with `sinks`, ops.sink_softmax(s, sinks) for the softmax
    gated output          torch.mul(heads, torch.sigmoid(gate_proj(x))) before o_proj (`gate`)
    dropout               F.dropout(x, p=p, training=self.training), only where p > 0
    q/k norm              call_module(q_norm, q): RMSNorm before split_heads (qk_norm = projection) or
                          after it, over d_k (qk_norm = head); then k_norm the same way; an OffsetRMSNorm
                          unit (x / rms(x) * (1 + w)) where the stack's normalization is rmsnorm(offset = 1)
    rotary positions      ops.rotate(q, rope), q and k after split_heads (the table comes from the stack)
    grouped k/v heads     torch.repeat_interleave(k, heads // kv_heads, 1), right before the scores
    latent attention      torch.split(kv_down_proj(x), (kv_rank, rope_dims), -1): kv_latent_norm on the
                          latent, ops.rotate on k^R; kv_up_proj(latent) split into heads, then into k^C and v;
                          k = torch.cat((k^C, k^R expanded to every head), -1); q's last rope_dims rotated
                          (torch.split, ops.rotate, torch.cat) (`latent(...)`, DeepSeek-V2)

The dot-product parts (scale, soft-capping, sinks, gate, clip_qkv) are one IR description, nodes.DotProduct,
that scaled_dot, local and latent embed (`parts_of`); the functions below apply each where the table puts it,
the same for the forward graphs and the decoding steps (`attend` is the one path from q, k, v to the heads).
`attend` records on the weights the mask it applied, as the build report names it (`meta["attention"]`);
fuse_attention adds the kernel it chose there.

Three units: `SelfAttention` (an encoder's: padding mask, or a band for local attention),
`CausalSelfAttention` (a decoder's; its `step` reads and extends the key/value cache) and
`CrossAttention` (queries from the decoder, keys and values from the memory; `kv` projects them once
for decoding, `step` attends to them). Positions that act on the scores or on q and k arrive from the
stack as one tensor, `positions` (a rope table, an ALiBi bias or relative-position indices).
"""

from __future__ import annotations

import operator

import torch
from torch import fx

from attncomp.ir import nodes
from attncomp.lower import ops
from attncomp.lower.positions import (bias_logits, decode_bias, layer_bucket_bias, position_input, relative_values,
                                       rotary_dims)
from attncomp.lower.norms import apply_norm
from attncomp.lower.units import Builder, Param, Unit, inv_sqrt_const, linear, norm

Node = fx.Node
NAMES = {"self": "SelfAttention", "causal": "CausalSelfAttention", "cross": "CrossAttention"}
MEMBERS = ("q_proj", "k_proj", "v_proj", "q_down_proj", "q_latent_norm", "q_up_proj", "kv_down_proj", "kv_latent_norm",
           "kv_up_proj", "o_proj", "gate_proj", "q_norm", "k_norm", "energy", "sinks", "temperature", "relative_k",
           "relative_v", "relative_bias", "value_weights", "lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2",
           "head_norm")  # registration order


def split_heads(b: Builder, x: Node, heads: int, dim: int, name: str) -> Node:
    """(B, T, h * dim) -> (B, h, T, dim)."""
    return b.call(torch.transpose, b.call(torch.unflatten, x, -1, (heads, dim), name=name), 1, 2, name=name)


def merge_heads(b: Builder, x: Node) -> Node:
    """(B, h, T, dim) -> (B, T, h * dim)."""
    return b.call(torch.flatten, b.call(torch.transpose, x, 1, 2, name="heads"), -2, name="heads")


PAPER = nodes.ScaledDot()  # the parts at the paper's meaning: what an attention without dot-product parts reads


def parts_of(kind: nodes.Attention) -> nodes.DotProduct:
    """The dot-product parts of an attention (nodes.DotProduct, which scaled_dot, local and latent embed);
    additive attention has none, so it reads the paper's."""
    return kind if isinstance(kind, nodes.DotProduct) else PAPER


def _qk_normalization(stack: nodes.Stack) -> nodes.Normalization:
    """The q/k norms' kind: the stack's `qk_normalization` where written, else RMSNorm with a gain, offset as the
    stack's `rmsnorm(offset)` (Gemma 3's (1 + w) gains are its norms' one fact), no offset beside any other."""
    if stack.qk_normalization is not None:  # written: `qk_normalization = layernorm(eps = 1e-6)`
        return stack.qk_normalization
    offset = stack.normalization.offset if isinstance(stack.normalization, nodes.RMSNorm) else 0
    return nodes.RMSNorm(offset=offset)


def _project(b: Builder, role: str, x: Node, stack: nodes.Stack, heads: int, dim: int, d_in: int,
             ctx, kind: nodes.Attention) -> Node:
    """One of q, k, v: its projection, clipped to [-c, c] where the attention's `clip_qkv` says so (OLMo),
    split into heads; q and k normalised where `qk_norm` says so (RMSNorm over the whole projection,
    OLMo 2; or over each head's d_k, Qwen3)."""
    arch = ctx.arch
    out = b.leaf(f"{role}_proj", linear(d_in, heads * dim, arch.bias.of(role)), x, name=role)
    clip = parts_of(kind).clip_qkv
    if clip:
        out = b.call(torch.clamp, out, -clip, clip, name=role)
    qk = role in ("q", "k")
    if qk and stack.qk_norm == "projection":
        out = apply_norm(b, ctx, f"{role}_norm", _qk_normalization(stack), heads * dim, out, name=role)
    out = split_heads(b, out, heads, dim, role)
    if qk and stack.qk_norm == "head":
        out = apply_norm(b, ctx, f"{role}_norm", _qk_normalization(stack), dim, out, name=role)
    return out


def project_kv(b: Builder, ctx, stack: nodes.Stack, kind: nodes.Attention, source: Node, d_in: int,
               rope: Node | None = None) -> tuple[Node, Node]:
    """Keys and values (B, kv_heads, T, d), keys rotated when the model has rotary positions."""
    k = _project(b, "k", source, stack, stack.key_value_heads, stack.d_k, d_in, ctx, kind)
    v = _project(b, "v", source, stack, stack.key_value_heads, stack.d_v, d_in, ctx, kind)
    if rope is not None:
        k = _rotated(b, k, rope, stack, kind, "k")
    return k, v


def project_q(b: Builder, ctx, stack: nodes.Stack, kind: nodes.Attention, x: Node,
              rope: Node | None = None) -> Node:
    q = _project(b, "q", x, stack, stack.heads, stack.d_k, stack.d_model, ctx, kind)
    return q if rope is None else _rotated(b, q, rope, stack, kind, "q")


def _rotated(b: Builder, x: Node, rope: Node, stack: nodes.Stack, kind: nodes.Attention, role: str) -> Node:
    """q or k rotated; a differential attention's each half on its own (its two maps are two attentions, and
    the table is d_k / 2 wide: positions.rotary_dims), as the paper's code rotates them."""
    if not isinstance(parts_of(kind).normalizer, nodes.Differential):
        return b.call(ops.rotate, x, rope, name=role)
    half = stack.d_k // 2
    parts = b.call(torch.split, x, (half, half), -1, name=role)
    halves = tuple(b.call(ops.rotate, b.item(parts, i, f"{role}{i + 1}"), rope, name=f"{role}{i + 1}") for i in (0, 1))
    return b.call(torch.cat, halves, -1, name=role)


def _rotated_tail(b: Builder, x: Node, kind: nodes.Latent, rope: Node, role: str) -> Node:
    """A latent attention's q or k (B, h, T, d_k): its last rope_dims rotated, the rest as they are."""
    parts = b.call(torch.split, x, (x.meta["shape"][-1] - kind.rope_dims, kind.rope_dims), -1, name=role)
    rotated = b.call(ops.rotate, b.item(parts, 1, f"{role}_rope"), rope, name=f"{role}_rope")
    return b.call(torch.cat, (b.item(parts, 0, role), rotated), -1, name=role)


def latent_q(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, kind: nodes.Latent, x: Node, rope: Node) -> Node:
    """Multi-head latent attention's queries (B, h, T, d_k): W^Q x, or W^UQ RMSNorm(W^DQ x) where `q_rank`
    compresses them; the last rope_dims of each head (q^R) rotated."""
    width = stack.heads * stack.d_k
    if kind.q_rank:
        latent = b.leaf("q_down_proj", linear(stack.d_model, kind.q_rank, arch.bias.of("q")), x, name="q_latent")
        latent = b.leaf("q_latent_norm", norm("rmsnorm", kind.q_rank, arch.norm_eps), latent, name="q_latent")
        q = b.leaf("q_up_proj", linear(kind.q_rank, width, False), latent, name="q")
    else:
        q = b.leaf("q_proj", linear(stack.d_model, width, False), x, name="q")
    return _rotated_tail(b, split_heads(b, q, stack.heads, stack.d_k, "q"), kind, rope, "q")


def latent_compress(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, kind: nodes.Latent, x: Node,
                    rope: Node) -> tuple[Node, Node]:
    """What a latent attention's cache keeps per position: c^KV = RMSNorm(W^DKV x) (B, 1, T, kv_rank) and the
    shared rotary key k^R = rotate(W^KR x) (B, 1, T, rope_dims); W^DKV and W^KR are one projection."""
    down = linear(stack.d_model, kind.kv_rank + kind.rope_dims, arch.bias.of("k"))
    parts = b.call(torch.split, b.leaf("kv_down_proj", down, x, name="kv_latent"), (kind.kv_rank, kind.rope_dims), -1,
                   name="kv_latent")
    latent = b.leaf("kv_latent_norm", norm("rmsnorm", kind.kv_rank, arch.norm_eps), b.item(parts, 0, "latent"),
                    name="latent")
    k_rope = b.call(torch.unsqueeze, b.item(parts, 1, "k_rope"), 1, name="k_rope")
    return b.call(torch.unsqueeze, latent, 1, name="latent"), b.call(ops.rotate, k_rope, rope, name="k_rope")


def latent_kv(b: Builder, stack: nodes.Stack, kind: nodes.Latent, latent: Node, k_rope: Node) -> tuple[Node, Node]:
    """Keys (B, h, T, d_k) and values (B, h, T, d_v) from the latent (B, 1, T, kv_rank): k^C and v per head
    (W^UK and W^UV are one projection), k^R shared by every head."""
    nope = stack.d_k - kind.rope_dims
    up = linear(kind.kv_rank, stack.heads * (nope + stack.d_v), False)
    kv = b.leaf("kv_up_proj", up, b.call(torch.squeeze, latent, 1, name="latent"), name="kv")
    parts = b.call(torch.split, split_heads(b, kv, stack.heads, nope + stack.d_v, "kv"), (nope, stack.d_v), -1,
                   name="kv")
    shared = b.method("expand", k_rope, -1, stack.heads, -1, -1, name="k_rope")
    return b.call(torch.cat, (b.item(parts, 0, "k"), shared), -1, name="k"), b.item(parts, 1, "v")


def repeat_kv(b: Builder, x: Node, stack: nodes.Stack) -> Node:
    """Grouped-query attention (Ainslie et al. 2023): (B, kv_heads, T, d) -> (B, heads, T, d), query
    head i reading key/value head i // (heads / kv_heads); nothing to do when kv_heads = heads."""
    groups = stack.heads // stack.key_value_heads
    return x if groups == 1 else b.call(torch.repeat_interleave, x, groups, 1, name=x.meta["var"])


def score_scale(kind: nodes.Attention, d_k: int) -> float | None:
    """The factor on q . k: 1/sqrt(d_k) (the paper), a given constant, or None (unscaled, T5)."""
    scale = parts_of(kind).scale
    if isinstance(scale, nodes.NoScale):
        return None
    return float(scale.value) if isinstance(scale, nodes.ScaleBy) else inv_sqrt_const(d_k)


def scores(b: Builder, q: Node, k: Node, kind: nodes.Attention, d_k: int) -> Node:
    """Attention logits (B, h, Tq, Tk): scaled (and soft-capped) dot products, or the additive score
    v^T tanh(q + k)."""
    if kind.kind == "additive":
        summed = b.call(torch.add, b.call(torch.unsqueeze, q, 3, name="q"), b.call(torch.unsqueeze, k, 2, name="k"),
                        name="energy")
        energy = b.param("energy", Param((q.meta["shape"][1], d_k), "normal"))
        return b.call(torch.einsum, "bhqkd,hd->bhqk", b.call(torch.tanh, summed, name="energy"), energy, name="scores")
    logits = b.call(torch.matmul, q, b.call(torch.transpose, k, -2, -1, name="k_t"), name="scores")
    scale = score_scale(kind, d_k)
    if scale is not None:
        logits = b.call(torch.mul, logits, scale, name="scores")
    if parts_of(kind).softcap:
        logits = b.call(ops.softcap, logits, parts_of(kind).softcap, name="scores")
    return logits


def _temperature(b: Builder, kind: nodes.Attention, q: Node, heads: int) -> Node:
    """q (B, h, Tq, d_k) times each head's learned temperature t = 1 + w (w a parameter starting at 0), so the
    scores are t_h (q . k): inside the scale and the soft cap, and no positional term's (`temperature`)."""
    if not parts_of(kind).temperature:
        return q
    offset = b.param("temperature", Param((heads,), "zeros"), name="temperature")
    t = b.call(torch.add, offset, 1, name="temperature", shape=(heads,))
    return b.call(torch.mul, q, b.method("view", t, -1, 1, 1, name="temperature", shape=(heads, 1, 1)), name="q")


def _weights(b: Builder, kind: nodes.Attention, s: Node, heads: int) -> Node:
    """softmax over the keys; with sinks, over the keys and one learned logit per head (gpt-oss); sigmoid(s + b)
    per key with `normalizer = sigmoid` (Ramapuram et al. 2024: no normalisation across the keys)."""
    normalizer = parts_of(kind).normalizer
    if isinstance(normalizer, nodes.Sigmoid):  # (verify refuses sinks beside it)
        return b.call(ops.sigmoid_weights, s, normalizer.b, name="weights")
    if not parts_of(kind).sinks:
        return b.call(torch.softmax, s, -1, name="weights")
    sinks = b.param("sinks", Param((heads,), "zeros"), name="sinks")
    return b.call(ops.sink_softmax, s, sinks, name="weights")


def _mask_name(arch: nodes.ModelSpec, mask: Node | None, relative: bool, bias: Node | None) -> str:
    """What hides keys from a query and what is added to its scores, as the build report names it: the
    positional term (alibi, buckets, relative) and the mask (its `mask` meta, set where it is made)."""
    named = ["relative"] if relative else [arch.positions.kind] if bias is not None else []
    named += [] if mask is None else [mask.meta.get("mask", mask.name)]
    return " + ".join(named) or "none"


def attend(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, q: Node, k: Node, v: Node,
           kind: nodes.Attention, mask: Node | None = None, padded: bool = False, positions: Node | None = None,
           bias: Node | None = None, lambda_init: Node | None = None) -> Node:
    """softmax(hide(scores + bias, mask)) @ v, explicitly (or the normaliser's weights for softmax's). `padded`:
    the mask may hide every key of a query (it has padding), whose weights are then defined as 0. `positions`:
    relative-position indices (their logit and value terms); `bias`: a float bias on the scores (ALiBi, T5's
    buckets). A differential attention is two such maps (`_differential`); `lambda_init`: its method's input where
    the spec leaves lambda_init to the layer's depth (`depth_input`)."""
    q = _temperature(b, kind, q, stack.heads)
    if isinstance(parts_of(kind).normalizer, nodes.Differential):
        return _differential(b, arch, stack, q, k, v, kind, mask, padded, bias, lambda_init)
    return _one_map(b, arch, stack, q, k, v, kind, mask, padded, positions, bias)


def _one_map(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, q: Node, k: Node, v: Node,
             kind: nodes.Attention, mask: Node | None, padded: bool, positions: Node | None, bias: Node | None,
             differential: bool = False) -> Node:
    """weights(hide(scores + bias, mask)) @ v; `differential`: one of a differential attention's two maps, q and
    k d_k / 2 wide."""
    s = scores(b, q, k, kind, stack.d_k // 2 if differential else stack.d_k)
    relative = isinstance(arch.positions, nodes.Relative) and positions is not None
    if relative:
        s = b.call(torch.add, s, bias_logits(b, arch, stack, q, positions), name="scores")
    elif bias is not None:
        s = b.call(torch.add, s, bias, name="scores")
    if mask is not None:
        s = b.call(ops.hide, s, mask, name="scores")
    weights = _weights(b, kind, s, stack.heads)
    # fuse_attention adds its kernel and reason here (it moves to the kernel's node); the build report reads it
    weights.meta["attention"] = {"mask": _mask_name(arch, mask, relative, bias)}
    if differential:
        weights.meta["attention"]["normalizer"] = "differential"
    if padded:
        weights = b.call(ops.zero_rows, weights, mask, name="weights")
    weights = b.dropout(weights, arch.dropout.attention, name="weights")
    out = b.call(torch.matmul, weights, v, name="heads")
    if relative:
        out = relative_values(b, arch, stack, weights, out, positions)
    return out


LAMBDAS = ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")


def _halves(b: Builder, x: Node, half: int, role: str) -> tuple[Node, Node]:
    """A head's q or k (B, h, T, d_k) as its two halves, (B, h, T, d_k / 2) each: q1 and q2, k1 and k2."""
    parts = b.call(torch.split, x, (half, half), -1, name=role)
    return b.item(parts, 0, f"{role}1"), b.item(parts, 1, f"{role}2")


def _own_mask(b: Builder, mask: Node | None) -> Node | None:
    """The mask made again for the second map, so each map's kernel sees a causal or band mask of its own
    (an input, or nothing, is read as it is)."""
    if mask is None or mask.op != "call_function":
        return mask
    return b.graph.node_copy(mask)


def _differential(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, q: Node, k: Node, v: Node,
                  kind: nodes.DotProduct, mask: Node | None, padded: bool, bias: Node | None,
                  depth_lambda: Node | None) -> Node:
    """Differential attention (Ye et al. 2024): (softmax(q1 k1^T s) - lambda softmax(q2 k2^T s)) v, each map an
    attention of its own (its kernel chosen alone), lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init
    (ops.differential_lambda; lq1 ... lk2 d_k / 2 wide, shared by the heads), then each head's RMSNorm over its
    d_v (`head_norm`, one gain shared by the heads) times (1 - lambda_init). lambda_init is the spec's number, or,
    left to the depth, `depth_lambda`, the method's input the stack's loop fills (ops.lambda_init)."""
    half, init = stack.d_k // 2, kind.normalizer.lambda_init
    if init is None:
        if depth_lambda is None:
            raise ValueError("differential attention's lambda_init by depth is an input of the method (depth_input)")
        init = depth_lambda
    (q1, q2), (k1, k2) = _halves(b, q, half, "q"), _halves(b, k, half, "k")
    first = _one_map(b, arch, stack, q1, k1, v, kind, mask, padded, None, bias, differential=True)
    second = _one_map(b, arch, stack, q2, k2, v, kind, _own_mask(b, mask), padded, None, bias, differential=True)
    lambdas = [b.param(name, Param((half,), "normal")) for name in LAMBDAS]
    lam = b.call(ops.differential_lambda, *lambdas, init, name="lambda_full", shape=())
    heads = b.call(torch.sub, first, b.call(torch.mul, second, lam, name="heads"), name="heads")
    heads = b.leaf("head_norm", norm("rmsnorm", stack.d_v, arch.norm_eps), heads, name="heads")
    kept = 1 - init if depth_lambda is None else b.call(operator.sub, 1, init, name="head_scale")
    return b.call(torch.mul, heads, kept, name="heads", shape=heads.meta.get("shape"))


def depth_input(b: Builder, kind: nodes.Attention | None) -> Node | None:
    """An attention's lambda_init where the spec leaves it to the layer's depth (nodes.follows_depth): an input of
    its method, after the positions, which its layer hands on from the stack's loop (ops.lambda_init)."""
    return b.input("lambda_init") if nodes.follows_depth(kind) else None


def _output(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, heads: Node, x: Node,
            kind: nodes.Attention) -> Node:
    """W^O of the merged heads; with `gate = true`, the heads first gated by sigmoid(W^G x), a gate per
    head dimension made from the query's input (Qwen3-Next's gated attention)."""
    merged = merge_heads(b, heads)
    if parts_of(kind).gate:
        width = stack.heads * stack.d_v
        gate = b.leaf("gate_proj", linear(x.meta["shape"][-1], width, arch.bias.of("q")), x, name="gate")
        merged = b.call(torch.mul, merged, b.call(torch.sigmoid, gate, name="gate"), name="heads")
    proj = linear(stack.heads * stack.d_v, stack.d_model, arch.bias.of("o"))
    return b.leaf("o_proj", proj, merged, name="out")


def _mask(b: Builder, stack: nodes.Stack, x: Node, padding: Node | None, causal: bool) -> Node | None:
    """The keys a query may not see: padding, the future (causal), or beyond a local window."""
    if isinstance(stack.attention, nodes.Local):
        length = b.size(x, 1)
        device = b.call(getattr, x, "device", name="device")
        band = b.call(ops.band_mask, length, stack.attention.window, causal, device, name="mask")
        band.meta["mask"] = "causal band" if causal else "band"
        if padding is None:
            return band
        both = b.call(ops.either, band, padding, name="mask")
        both.meta["mask"] = f"{band.meta['mask']} + {padding.meta['mask']}"
        return both
    if causal:
        device = b.call(getattr, x, "device", name="device")
        mask = b.call(ops.causal_mask, b.size(x, 1), device, name="mask")
        mask.meta["mask"] = "causal"
        return mask
    return padding


def _prefix_mask(b: Builder, x: Node, prefix: Node) -> Node:
    """A prefix LM's mask (`mask = prefix`): each row's prefix seen both ways, causal after it (ops.prefix_mask)."""
    device = b.call(getattr, x, "device", name="device")
    mask = b.call(ops.prefix_mask, b.size(x, 1), prefix, device, name="mask")
    mask.meta["mask"] = "prefix"
    return mask


def _padding(b: Builder, length: str) -> Node:
    """The padding mask input (True = a padding key, hidden)."""
    padding = b.input("padding_mask", ("batch", 1, 1, length))
    padding.meta["mask"] = "padding"
    return padding


def _heads_shape(x: Node, heads: int, dim: int) -> tuple | None:
    shape = x.meta.get("shape")
    return None if shape is None else (shape[0], heads, shape[1], dim)


HANDS, READS = "hands", "reads"  # a layer's part in key/value sharing (share_kv): it computes k, v and hands them
# on, or it reads another layer's (and has no k/v projections); "" without share_kv
KV_ROLE_DOCS = {HANDS: ", handing its keys and values on to the layers that share them (share_kv)",
                READS: ", with the keys and values of an earlier layer (share_kv): no k/v projections of its own"}


def kv_role(stack: nodes.Stack, i: int) -> str:
    """Layer i's part in key/value sharing: HANDS (layer N * (i // N) computes them), READS, or ""."""
    if stack.share_kv == 1:
        return ""
    return HANDS if stack.kv_source(i) == i else READS


def self_attention(ctx, stack: nodes.Stack, causal: bool, role: str = "") -> Unit:
    """An encoder's self-attention (`causal=False`: padding mask, or a band), or a decoder's (`step` too).
    With key/value sharing (`role`), HANDS returns (out, k, v), k and v as its cache keeps them; READS takes
    them as its last inputs, `shared_k`, `shared_v`, and projects only q."""
    arch = ctx.arch
    unit = Unit(("SharedKV" if role == READS else "") + NAMES["causal" if causal else "self"],
                "Multi-head self-attention" + ("" if not causal else " over the keys up to each query (causal)"
                                               if stack.mask == "causal" else " over the row's prefix both ways and "
                                               "the keys up to each query after it (a prefix LM)") +
                KV_ROLE_DOCS.get(role, ""))
    kind, d = stack.attention, stack.d_model
    length = "tgt_len" if causal else "src_len"
    b = Builder(unit, "forward")
    x = b.input("x", ("batch", length, d))
    padding = None if causal else _padding(b, length)
    prefix = b.input("prefix", ("batch",)) if causal and stack.mask == "prefix" else None
    positions = position_input(b, arch, stack, length, length)
    rope = positions if isinstance(arch.positions, nodes.Rope) else None
    lambda_init = depth_input(b, kind)
    if isinstance(kind, nodes.Latent):  # q, k, v in reading order
        q = latent_q(b, arch, stack, kind, x, rope)
        k, v = latent_kv(b, stack, kind, *latent_compress(b, arch, stack, kind, x, rope))
    elif role == READS:  # (verify refuses share_kv with latent attention)
        q = project_q(b, ctx, stack, kind, x, rope)
        k, v = _shared_kv(b, stack, length)
    else:
        q = project_q(b, ctx, stack, kind, x, rope)
        k, v = project_kv(b, ctx, stack, kind, x, d, rope)
    handed = (k, v) if role == HANDS else ()
    v, first = _value_residual(b, stack, v, length)  # (verify refuses it with latent attention, and share_kv)
    k, v = repeat_kv(b, k, stack), repeat_kv(b, v, stack)
    mask = _mask(b, stack, x, padding, causal) if prefix is None else _prefix_mask(b, x, prefix)
    bias = positions if isinstance(arch.positions, (nodes.ALiBi, nodes.Buckets)) else None
    if isinstance(arch.positions, nodes.Buckets) and arch.positions.per_layer:  # indices into this layer's table
        bias = layer_bucket_bias(b, stack, arch.positions, positions)
    heads = attend(b, arch, stack, q, k, v, kind, mask, padded=padding is not None, positions=positions, bias=bias,
                   lambda_init=lambda_init)
    out = _output(b, arch, stack, heads, x, kind)
    b.output((out, first) if stack.value_residual else (out, *handed) if handed else out)
    if causal:
        _self_attention_step(ctx, unit, stack, role)
        if role != READS:
            _empty_cache(unit, stack)
    unit.reorder(MEMBERS)
    return unit


def _shared_kv(b: Builder, stack: nodes.Stack, length) -> tuple[Node, Node]:
    """The keys and values a READS layer attends with, (B, kv_heads, T, d): its method's last inputs."""
    return (b.input("shared_k", ("batch", stack.key_value_heads, length, stack.d_k)),
            b.input("shared_v", ("batch", stack.key_value_heads, length, stack.d_v)))


def _self_attention_step(ctx, unit: Unit, stack: nodes.Stack, role: str = "") -> None:
    """step(x, k, v[, rope]) -> (out, k, v): one new position per sentence; the keys and values of the
    positions before it arrive as the cache's k and v, and go back extended by the new ones (with a
    sliding window, only the last `window` of them: the cache stays bounded). A READS layer's step(x, k, v[, rope])
    -> out attends with the keys and values its HANDS layer's step returned (the new position's among them)."""
    arch = ctx.arch
    d, kvh = stack.d_model, stack.key_value_heads
    b = Builder(unit, "step", decoding=True)
    x = b.input("x", ("batch", 1, d))
    if role == READS:
        past_k, past_v = _shared_kv(b, stack, "cache_len")
    elif isinstance(stack.attention, nodes.Latent):  # its compressed cache: c^KV and k^R (attncomp.lower.cache)
        past_k = b.input("past_latent", ("batch", 1, "cache_len", stack.attention.kv_rank))
        past_v = b.input("past_k_rope", ("batch", 1, "cache_len", stack.attention.rope_dims))
    else:
        past_k = b.input("past_k", ("batch", kvh, "cache_len", stack.d_k))
        past_v = b.input("past_v", ("batch", kvh, "cache_len", stack.d_v))
    rope = b.input("rope", (2, 1, rotary_dims(arch, stack))) if isinstance(arch.positions, nodes.Rope) \
        else None
    buckets = arch.positions if isinstance(arch.positions, nodes.Buckets) else None
    given_bias = None if buckets is None else b.input("position_bias", (1, "k_len") if buckets.per_layer else
                                                      (stack.heads, 1, "k_len"))
    lambda_init = depth_input(b, stack.attention)
    if isinstance(stack.attention, nodes.Latent):
        _latent_step(b, arch, stack, stack.attention, x, past_k, past_v, rope)
        return
    q = project_q(b, ctx, stack, stack.attention, x, rope)
    if role == READS:  # verify refuses share_kv with a window: the keys handed on are every key the query sees
        k, v, first = past_k, past_v, None
    else:
        k_new, v_new = project_kv(b, ctx, stack, stack.attention, x, d, rope)
        v_new, first = _value_residual(b, stack, v_new, 1)
        k = b.call(torch.cat, (past_k, k_new), 2, name="k")
        v = b.call(torch.cat, (past_v, v_new), 2, name="v")
    kept_k, kept_v = k, v
    if isinstance(stack.attention, nodes.Local):
        # the cache holds the last `window` keys at most, so k is the query's window: itself and the
        # window before it; the next step needs the last `window` of them
        keep = (slice(None), slice(None), slice(-stack.attention.window, None))
        kept_k = b.call(operator.getitem, k, keep, name="kept_k")
        kept_v = b.call(operator.getitem, v, keep, name="kept_v")
        if given_bias is not None:  # the stack's bias covers the longest cache of its layers: (h, 1, k_len),
            # or bucket indices (1, k_len)
            window = (slice(None), slice(None), slice(-(stack.attention.window + 1), None))
            given_bias = b.call(operator.getitem, given_bias, window[1:] if buckets.per_layer else window,
                                name="position_bias")
    if buckets is not None and buckets.per_layer:
        given_bias = layer_bucket_bias(b, stack, buckets, given_bias)
    seen_k, seen_v = repeat_kv(b, k, stack), repeat_kv(b, v, stack)
    positions = decode_bias(b, arch, stack, x, seen_k)
    heads = attend(b, arch, stack, q, seen_k, seen_v, stack.attention, positions=positions,
                   bias=positions if isinstance(arch.positions, nodes.ALiBi) else given_bias, lambda_init=lambda_init)
    out = _output(b, arch, stack, heads, x, stack.attention)
    b.output(out if role == READS else (out, kept_k, kept_v) + ((first,) if stack.value_residual else ()))


def _value_residual(b: Builder, stack: nodes.Stack, v: Node, length) -> tuple[Node, Node | None]:
    """With `value_residual`: the values mixed with the first layer's (`first_v`, an input the last of the
    method's; None in the first layer), l_1 V_n + l_2 V_1 (`value_weights`, from 0.5), and V_1 for the next layer."""
    if not stack.value_residual:
        return v, None
    first = b.input("first_v", ("batch", stack.key_value_heads, length, stack.d_v))
    weights = b.param("value_weights", Param((2,), 0.5))
    mixed = b.call(ops.value_residual, v, first, weights, name="mixed")
    return b.item(mixed, 0, "v", shape=v.meta.get("shape")), b.item(mixed, 1, "first_v", shape=v.meta.get("shape"))


def _latent_step(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, kind: nodes.Latent, x: Node,
                 past_latent: Node, past_k_rope: Node, rope: Node) -> None:
    """A latent attention's step: the cache holds c^KV and k^R (attncomp.lower.cache), extended by the new
    position's; every key and value is made again from them (the weights are not absorbed)."""
    q = latent_q(b, arch, stack, kind, x, rope)
    latent_new, k_rope_new = latent_compress(b, arch, stack, kind, x, rope)
    latent = b.call(torch.cat, (past_latent, latent_new), 2, name="latent")
    k_rope = b.call(torch.cat, (past_k_rope, k_rope_new), 2, name="k_rope")
    k, v = latent_kv(b, stack, kind, latent, k_rope)
    heads = attend(b, arch, stack, q, k, v, kind)
    b.output((_output(b, arch, stack, heads, x, kind), latent, k_rope))


def _empty_cache(unit: Unit, stack: nodes.Stack) -> None:
    """empty_cache(like, batch) -> (k, v): no position yet, `batch` rows of like's dtype and device (a latent
    attention's: c^KV and k^R, one head wide)."""
    b = Builder(unit, "empty_cache", decoding=True)
    like, batch = b.input("like"), b.input("batch")
    batch.meta["value"] = "batch"
    kvh, d_k, d_v = stack.key_value_heads, stack.d_k, stack.d_v
    if isinstance(stack.attention, nodes.Latent):
        kvh, d_k, d_v = 1, stack.attention.kv_rank, stack.attention.rope_dims
    k = b.method("new_zeros", like, (batch, kvh, 0, d_k), name="k")
    v = b.method("new_zeros", like, (batch, kvh, 0, d_v), name="v")
    b.output((k, v))


def cross_attention(ctx, stack: nodes.Stack, d_memory: int) -> Unit:
    """Encoder-decoder attention: queries from the decoder, keys and values from the memory."""
    arch = ctx.arch
    unit = Unit(NAMES["cross"], "Encoder-decoder attention: queries from the decoder, keys and values from "
                "the encoder's output")
    kind = stack.cross_attention
    b = Builder(unit, "forward")
    x = b.input("x", ("batch", "tgt_len", stack.d_model))
    memory = b.input("memory", ("batch", "src_len", d_memory))
    padding = _padding(b, "src_len")
    lambda_init = depth_input(b, kind)
    q = project_q(b, ctx, stack, kind, x)
    k, v = project_kv(b, ctx, stack, kind, memory, d_memory)
    heads = attend(b, arch, stack, q, repeat_kv(b, k, stack), repeat_kv(b, v, stack), kind, padding, padded=True,
                   lambda_init=lambda_init)
    b.output(_output(b, arch, stack, heads, x, kind))

    b = Builder(unit, "kv", decoding=True)  # once per sentence, at the start of decoding
    memory = b.input("memory", ("batch", "src_len", d_memory))
    b.output(project_kv(b, ctx, stack, kind, memory, d_memory))

    b = Builder(unit, "step", decoding=True)
    x = b.input("x", ("batch", 1, stack.d_model))
    k = b.input("k", ("batch", stack.key_value_heads, "src_len", stack.d_k))
    v = b.input("v", ("batch", stack.key_value_heads, "src_len", stack.d_v))
    padding = _padding(b, "src_len")
    lambda_init = depth_input(b, kind)
    q = project_q(b, ctx, stack, kind, x)
    heads = attend(b, arch, stack, q, repeat_kv(b, k, stack), repeat_kv(b, v, stack), kind, padding, padded=True,
                   lambda_init=lambda_init)
    b.output(_output(b, arch, stack, heads, x, kind))
    unit.reorder(MEMBERS)
    return unit
