"""Layer units: sublayers, each with its norm and a residual connection (section 3.1, 5.4).

    post (the paper)   x = Norm(x + Dropout(Sublayer(x)))
    pre                x = x + Dropout(Sublayer(Norm(x)))
    output (OLMo 2)    x = x + Dropout(Norm(Sublayer(x)))
    sandwich (Gemma 2) x = x + Dropout(Norm'(Sublayer(Norm(x))))

With `block = parallel(norms = 1 | 2)` self-attention and the feed-forward net read one input, one norm
of it or one each, and both outputs are added to it (GPT-J, PaLM, GPT-NeoX, Falcon):

    parallel           x = x + Dropout(Attn(Norm(x))) + Dropout(FFN(Norm(x)))

An encoder layer is self-attention then the feed-forward net; a decoder layer puts cross-attention
between them when the model has an encoder. A decoder layer also has `step` (one new position, reading
and extending its LayerCache) and `init_cache` (empty self-attention keys and values, the memory's
cross-attention keys and values projected once).
"""

from __future__ import annotations

from typing import Callable

from torch import fx

from attncomp.ir import nodes
from attncomp.lower.attention import cross_attention, self_attention
from attncomp.lower.cache import KV, LayerCache
from attncomp.lower.feed_forward import feed_forward
from attncomp.lower.positions import acts_on_scores, input_name, made_by_stack_in_step, position_input
from attncomp.lower.norms import apply_norm
from attncomp.lower.units import Builder, Unit

Node = fx.Node
MEMBERS = ("norm", "self_attn", "self_attn_norm", "self_attn_output_norm", "cross_attn", "cross_attn_norm",
           "cross_attn_output_norm", "ffn", "ffn_norm", "ffn_output_norm")


def sublayer(b: Builder, ctx, stack: nodes.Stack, x: Node, norm_name: str, body: Callable[[Node], Node]) -> Node:
    """post: Norm(x + Dropout(F(x)));  pre: x + Dropout(F(Norm(x)));  output: x + Dropout(Norm(F(x)));
    sandwich: x + Dropout(Norm'(F(Norm(x)))), Norm' being `<sublayer>_output_norm`."""
    if stack.norm == "post":
        return _norm(b, ctx, stack, norm_name, b.add(x, b.dropout(body(x), ctx.arch.dropout.residual)), "x")
    h = _norm(b, ctx, stack, norm_name, x, "h") if stack.norm in ("pre", "sandwich") else x
    return b.add(x, _output(b, ctx, stack, norm_name, body(h)))


def sublayers(b: Builder, ctx, stack: nodes.Stack, x: Node, parts: list[tuple[str, Callable[[Node], Node]]]) -> Node:
    """The layer's sub-layers, (norm name, body) each, in sequence or (block = parallel) side by side."""
    if not isinstance(stack.block, nodes.Parallel):
        for norm_name, body in parts:
            x = sublayer(b, ctx, stack, x, norm_name, body)
        return x
    before = stack.norm in ("pre", "sandwich")  # verify refuses post
    shared = _norm(b, ctx, stack, "norm", x, "h") if before and stack.block.norms == 1 else None
    outs = []
    for norm_name, body in parts:
        h = shared if shared is not None else _norm(b, ctx, stack, norm_name, x, "h") if before else x
        outs.append(_output(b, ctx, stack, norm_name, body(h)))
    for out in outs:
        x = b.add(x, out)
    return x


def _norm(b: Builder, ctx, stack: nodes.Stack, member: str, x: Node, name: str | None) -> Node:
    return apply_norm(b, ctx, member, stack.normalization, stack.d_model, x, name=name)


def _output(b: Builder, ctx, stack: nodes.Stack, norm_name: str, out: Node) -> Node:
    """A sub-layer's output as the residual adds it: normed (output, sandwich), then dropped out."""
    if stack.norm in ("output", "sandwich"):
        name = norm_name if stack.norm == "output" else norm_name.replace("_norm", "_output_norm")
        out = _norm(b, ctx, stack, name, out, out.meta.get("var"))
    return b.dropout(out, ctx.arch.dropout.residual)


def _joined(stack: nodes.Stack) -> str:
    return " beside the feed-forward net" if isinstance(stack.block, nodes.Parallel) else ", then the feed-forward net"


def _kind(stack: nodes.Stack, kind: str) -> tuple[str, str]:
    """(class-name prefix, doc prefix) of a layer kind ("" is the stack's own layers)."""
    if not kind:
        return "", ""
    return nodes.LayerKind(name=kind).class_prefix, f"A {kind} layer: "


def encoder_layer(ctx, stack: nodes.Stack, kind: str = "") -> Unit:
    """forward(x, padding_mask[, positions])."""
    arch, length = ctx.arch, "src_len"
    prefix, doc = _kind(stack, kind)
    unit = Unit(f"{prefix}EncoderLayer", (doc or "An encoder layer: ") + "self-attention" + _joined(stack))
    attn, ffn = ctx.unit(self_attention, stack, False), ctx.unit(feed_forward, stack)
    b = Builder(unit, "forward")
    x = b.input("x", ("batch", length, stack.d_model))
    padding = b.input("padding_mask", ("batch", 1, 1, length))
    positions = position_input(b, arch, stack, length, length)
    extra = () if positions is None else (positions,)
    x = sublayers(b, ctx, stack, x, [
        ("self_attn_norm", lambda h: b.sub("self_attn", attn, "forward", h, padding, *extra, name="attended",
                                           shape=h.meta["shape"])),
        ("ffn_norm", lambda h: b.sub("ffn", ffn, "forward", h, name="fed", shape=h.meta["shape"]))])
    b.output(x)
    unit.reorder(MEMBERS)
    return unit


def decoder_layer(ctx, stack: nodes.Stack, d_memory: int | None, kind: str = "") -> Unit:
    """forward(x[, memory, padding_mask][, positions]), step(x, cache[, padding_mask][, rope]) and
    init_cache(memory) (decoder-only: init_cache(like, batch): a tensor of the model's dtype and device)."""
    arch = ctx.arch
    cross = d_memory is not None
    prefix, doc = _kind(stack, kind)
    unit = Unit(f"{prefix}DecoderLayer", (doc or "A decoder layer: ") + "causal self-attention" +
                (", attention over the encoder's output" if cross else "") + _joined(stack))
    attn, ffn = ctx.unit(self_attention, stack, True), ctx.unit(feed_forward, stack)
    cross_attn = ctx.unit(cross_attention, stack, d_memory) if cross else None
    shape = ("batch", "tgt_len", stack.d_model)
    call = lambda member, target, method, *args: (  # noqa: E731 - a sublayer body: a child's method
        lambda h: b.sub(member, target, method, h, *args, name="attended", shape=h.meta.get("shape")))

    b = Builder(unit, "forward")
    x = b.input("x", shape)
    memory = b.input("memory", ("batch", "src_len", d_memory)) if cross else None
    padding = b.input("padding_mask", ("batch", 1, 1, "src_len")) if cross else None
    positions = position_input(b, arch, stack, "tgt_len", "tgt_len")
    parts = [("self_attn_norm", call("self_attn", attn, "forward", *(() if positions is None else (positions,))))]
    if cross:
        parts.append(("cross_attn_norm", call("cross_attn", cross_attn, "forward", memory, padding)))
    parts.append(("ffn_norm", lambda h: b.sub("ffn", ffn, "forward", h, name="fed", shape=h.meta["shape"])))
    x = sublayers(b, ctx, stack, x, parts)
    b.output(x)

    _step(ctx, unit, stack, attn, cross_attn, ffn)
    _init_cache(unit, stack, attn, cross_attn, d_memory)
    unit.reorder(MEMBERS)
    return unit


def _step(ctx, unit: Unit, stack: nodes.Stack, attn: Unit, cross_attn: Unit | None, ffn: Unit) -> None:
    arch = ctx.arch
    b = Builder(unit, "step", decoding=True)
    x = b.input("x", ("batch", 1, stack.d_model))
    cache = b.input("cache")
    padding = b.input("padding_mask", ("batch", 1, 1, "src_len")) if cross_attn is not None else None
    rope = b.input(input_name(arch)) if made_by_stack_in_step(arch) else None  # a rope table or T5's bias
    own = b.field(cache, "self_attn")
    past_k, past_v = b.field(own, "k"), b.field(own, "v")
    new: dict[str, Node] = {}

    def self_step(h: Node) -> Node:
        out = b.sub("self_attn", attn, "step", h, past_k, past_v, *(() if rope is None else (rope,)), name="step")
        new["k"], new["v"] = b.item(out, 1, "k"), b.item(out, 2, "v")
        return b.item(out, 0, "attended", shape=h.meta.get("shape"))

    def cross_step(h: Node) -> Node:
        new["memory"] = memory_kv = b.field(cache, "cross_attn")
        k, v = b.field(memory_kv, "k"), b.field(memory_kv, "v")
        return b.sub("cross_attn", cross_attn, "step", h, k, v, padding, name="attended", shape=h.meta.get("shape"))

    parts = [("self_attn_norm", self_step)] + ([("cross_attn_norm", cross_step)] if cross_attn is not None else [])
    parts.append(("ffn_norm", lambda h: b.sub("ffn", ffn, "forward", h, name="fed", shape=h.meta["shape"])))
    x = sublayers(b, ctx, stack, x, parts)
    memory_kv = new.get("memory")
    own_kv = b.call(KV, new["k"], new["v"], name="self_kv")
    b.output((x, b.call(LayerCache, own_kv, memory_kv, name="cache")))


def _init_cache(unit: Unit, stack: nodes.Stack, attn: Unit, cross_attn: Unit | None, d_memory: int | None) -> None:
    b = Builder(unit, "init_cache", decoding=True)
    if cross_attn is not None:  # the memory gives the batch size, dtype and device
        like = b.input("memory", ("batch", "src_len", d_memory))
        batch = b.size(like, 0, "batch")
    else:  # a tensor of the model's dtype and device, and the batch size
        like, batch = b.input("like"), b.input("batch")
        batch.meta["value"] = "batch"
    empty = b.sub("self_attn", attn, "empty_cache", like, batch, name="empty")
    own = b.call(KV, b.item(empty, 0, "k"), b.item(empty, 1, "v"), name="self_kv")
    memory_kv = None
    if cross_attn is not None:
        kv = b.sub("cross_attn", cross_attn, "kv", like, name="memory_kv")
        memory_kv = b.call(KV, b.item(kv, 0, "k"), b.item(kv, 1, "v"), name="cross_kv")
    b.output(b.call(LayerCache, own, memory_kv, name="cache"))


def layer_inputs(arch: nodes.ModelSpec) -> str | None:
    """The name of the positions input a stack hands its layers, if any."""
    return input_name(arch) if acts_on_scores(arch) else None
