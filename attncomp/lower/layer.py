"""Layer units: sublayers, each with its norm and a residual connection (section 3.1, 5.4).

    post (the paper)   x = Norm(x + Dropout(Sublayer(x)))
    pre                x = x + Dropout(Sublayer(Norm(x)))
    output (OLMo 2)    x = x + Dropout(Norm(Sublayer(x)))
    sandwich (Gemma 2) x = x + Dropout(Norm'(Sublayer(Norm(x))))

With `block = parallel(norms = 1 | 2)` self-attention and the feed-forward net read one input, one norm
of it or one each, and both outputs are added to it (GPT-J, PaLM, GPT-NeoX, Falcon):

    parallel           x = x + Dropout(Attn(Norm(x))) + Dropout(FFN(Norm(x)))

and, written out (`parallel(attention(norm = sandwich), ffn(norm = none, scale = 0.5))`), each sub-layer
with its own norm place (pre, output, sandwich, none) and scale on what it adds.

An encoder layer is self-attention then the feed-forward net; a decoder layer puts cross-attention
between them when the model has an encoder. A decoder layer also has `step` (one new position, reading
and extending its LayerCache) and `init_cache` (empty self-attention keys and values, the memory's
cross-attention keys and values projected once).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import fx

from attncomp.ir import nodes
from attncomp.lower.attention import HANDS, READS, cross_attention, self_attention
from attncomp.lower.cache import KV, LayerCache
from attncomp.lower.feed_forward import feed_forward
from attncomp.lower.positions import (acts_on_scores, input_name, made_by_stack_in_step, position_input, rope_names,
                                      rotation)
from attncomp.lower.norms import apply_norm
from attncomp.lower.units import Builder, Param, Unit

Node = fx.Node
MEMBERS = ("norm", "self_attn", "self_attn_norm", "self_attn_output_norm", "cross_attn", "cross_attn_norm",
           "cross_attn_output_norm", "ffn", "ffn_norm", "ffn_output_norm")


def sublayer(b: Builder, ctx, stack: nodes.Stack, x: Node, part: nodes.Sublayer, member: str,
             body: Callable[[Node], Node], decoder: bool = False) -> Node:
    """post: Norm(x + s Dropout(F(x)));  pre: x + s Dropout(F(Norm(x)));  output: x + s Dropout(Norm(F(x)));
    sandwich: x + s Dropout(Norm'(F(Norm(x)))), Norm' being `<member>_output_norm`;  none: x + s Dropout(F(x)).
    s is the sub-layer's scale (1 unless written: 0.5 for a macaron half feed-forward) times its learned gain
    (LayerScale, ReZero); the skip x is alpha x (a number, DeepNorm) or Norm(x) where the spec says.
    A norm-only step (`norm`) is x = Norm(x)."""
    norm_name = f"{member}_norm"
    if isinstance(part, nodes.Stream):
        return _norm(b, ctx, stack, member, x, "x", part)
    if part.norm == "post":
        out = _scaled(b, part, member, b.dropout(body(x), ctx.arch.dropout.residual))
        return _norm(b, ctx, stack, norm_name, b.add(_skip(b, ctx, part, member, x, x, decoder), out), "x", part)
    h = _norm(b, ctx, stack, norm_name, x, "h", part) if part.norm in ("pre", "sandwich") else x
    out = _scaled(b, part, member, _output(b, ctx, stack, part, norm_name, body(h)))
    return b.add(_skip(b, ctx, part, member, x, h, decoder), out)


DEEPNORM_BETA = ("v_proj", "o_proj", "fc1", "fc2", "gate")  # the projections DeepNorm's beta scales (not W^Q, W^K)


def _skip(b: Builder, ctx, part: nodes.Sublayer, member: str, x: Node, h: Node, decoder: bool) -> Node:
    """What the residual path carries: x, alpha x (`skip = 0.5`; DeepNorm's alpha, its beta on the sub-layer's
    projections' initial weights) or the normed input h (`skip = normed`)."""
    if isinstance(part.skip, nodes.NormedSkip):
        return h
    if isinstance(part.skip, nodes.DeepNorm):
        arch = ctx.arch
        alpha, beta = nodes.DeepNorm.constants(arch.encoder and arch.encoder.layers,
                                               arch.decoder and arch.decoder.layers, decoder)
        child = b.unit.members[member]  # the sub-layer's unit, declared by its body
        for name in DEEPNORM_BETA:
            if name in child.members:
                b.unit.init_gains[f"{member}.{name}"] = beta
        return b.call(torch.mul, x, alpha, name="skip", shape=x.meta.get("shape"))
    if isinstance(part.skip, nodes.ScaleBy):
        return b.call(torch.mul, x, part.skip.value, name="skip", shape=x.meta.get("shape"))
    return x


def sublayers(b: Builder, ctx, stack: nodes.Stack, x: Node, bodies: dict[str, Callable[[str, Node], Node]],
              cross: bool = False, decoder: bool = False) -> Node:
    """The layer's sub-layers (nodes.Stack.sublayers), in sequence or (block = parallel) side by side.
    `bodies` maps a sub-layer kind to its body, called with the member's name and the input: the first
    feed-forward is `ffn`, the next `ffn_2`, ... (self_attn and cross_attn appear once)."""
    parts = stack.sublayers(cross)
    members = _members(parts)
    if not isinstance(stack.block, nodes.Parallel):
        for part, member in zip(parts, members):
            x = sublayer(b, ctx, stack, x, part, member, lambda h, m=member, k=part.kind: bodies[k](m, h), decoder)
        return x
    # each sub-layer's own norm and scale (verify refuses post); norms = 1: the sub-layers that norm their
    # input read one norm of it, `norm`; norms = 2: each its own, `<member>_norm`
    before = [part.norm in ("pre", "sandwich") for part in parts]
    shared = _norm(b, ctx, stack, "norm", x, "h") if any(before) and stack.block.norms == 1 else None
    outs = []
    for part, member, normed in zip(parts, members, before):
        h = (shared if shared is not None else _norm(b, ctx, stack, f"{member}_norm", x, "h", part)) if normed else x
        out = _output(b, ctx, stack, part, f"{member}_norm", bodies[part.kind](member, h))
        outs.append(_scaled(b, part, member, out))
    for out in outs:
        x = b.add(x, out)
    return x


SUBLAYER_MEMBERS = {"attention": "self_attn", "cross_attention": "cross_attn", "ffn": "ffn", "norm": "stream_norm"}


def _members(parts: tuple) -> list[str]:
    """Each sub-layer's member name: self_attn, cross_attn, ffn, then ffn_2, ffn_3 for further feed-forwards."""
    seen: dict[str, int] = {}
    names = []
    for part in parts:
        base = SUBLAYER_MEMBERS[part.kind]
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}_{seen[base]}")
    return names


def _norm(b: Builder, ctx, stack: nodes.Stack, member: str, x: Node, name: str | None,
          part: nodes.Sublayer | None = None) -> Node:
    """A norm of the layer: the sub-layer's own `normalization` where it writes one, else the stack's."""
    kind = part.normalization if part is not None and part.normalization is not None else stack.normalization
    return apply_norm(b, ctx, member, kind, stack.d_model, x, name=name)


def _output(b: Builder, ctx, stack: nodes.Stack, part: nodes.Sublayer, norm_name: str, out: Node) -> Node:
    """A sub-layer's output as the residual adds it: normed (output, sandwich), then dropped out."""
    if part.norm in ("output", "sandwich"):
        name = norm_name if part.norm == "output" else norm_name.replace("_norm", "_output_norm")
        out = _norm(b, ctx, stack, name, out, out.meta.get("var"), part)
    return b.dropout(out, ctx.arch.dropout.residual)


def _scaled(b: Builder, part: nodes.Sublayer, member: str, out: Node) -> Node:
    """What the residual adds: the output times the sub-layer's scale and its learned gain, `<member>_gain`
    (LayerScale: d_model entries from `init`; ReZero: one, from 0)."""
    if part.scale != 1.0:
        out = b.call(torch.mul, out, part.scale, name=out.meta.get("var"), shape=out.meta.get("shape"))
    if part.gain is None:
        return out
    shape = out.meta["shape"]
    param = Param((shape[-1],), part.gain.init) if isinstance(part.gain, nodes.LayerScale) else Param((1,), "zeros")
    gain = b.param(f"{member}_gain", param, name=f"{member}_gain")
    return b.call(torch.mul, out, gain, name=out.meta.get("var"), shape=shape)


def _order(stack: nodes.Stack, cross: bool) -> tuple[str, ...]:
    """The state dict's order of a layer's members: MEMBERS, then further feed-forwards with their norms."""
    more = [m for m in _members(stack.sublayers(cross)) if m not in MEMBERS]
    return MEMBERS + tuple(name for m in more for name in (m, f"{m}_norm", f"{m}_output_norm"))


def _joined(stack: nodes.Stack) -> str:
    return " beside the feed-forward net" if isinstance(stack.block, nodes.Parallel) else ", then the feed-forward net"


WRITTEN = {"attention": "self-attention", "cross_attention": "attention over the encoder's output",
           "ffn": "a feed-forward net", "norm": "a norm of the stream"}


def _described(stack: nodes.Stack, paper: str) -> str:
    """What a layer does, for its docstring: the paper's words, or its written-out sub-layers in order."""
    if not stack.block.sublayers:
        return paper + _joined(stack)
    first = paper.split(",")[0]  # self-attention, or the decoder's causal self-attention
    words = [(first if s.kind == "attention" else WRITTEN[s.kind]) +
             (f" (x {s.scale:g})" if getattr(s, "scale", 1.0) != 1.0 else "") for s in stack.block.sublayers]
    if isinstance(stack.block, nodes.Parallel):
        return " beside ".join(words)
    return ", ".join(words[:-1]) + ", then " + words[-1]


def _kind(stack: nodes.Stack, kind: str, role: str = "") -> tuple[str, str]:
    """(class-name prefix, doc prefix) of a layer kind ("" is the stack's own layers), and its part in key/value
    sharing (a READS layer's class is SharedKV...)."""
    shared = "SharedKV" if role == READS else ""
    reads = " that attends with an earlier layer's keys and values (share_kv)" if role == READS else ""
    if not kind:
        return shared, f"A layer{reads}: " if reads else ""
    return nodes.LayerKind(name=kind).class_prefix + shared, f"A {kind} layer{reads}: "


def encoder_layer(ctx, stack: nodes.Stack, kind: str = "", bases: tuple = (), role: str = "",
                  depth: bool = False) -> Unit:
    """forward(x, padding_mask[, positions][, lambda_init]); with share_kv (`role`), HANDS returns (x, k, v) and
    READS takes the k, v as its last inputs (attncomp.lower.loops); with `depth`, lambda_init is the layer's depth's
    (`_depth_input`)."""
    arch, length = ctx.arch, "src_len"
    prefix, doc = _kind(stack, kind, role)
    unit = Unit(f"{prefix}EncoderLayer", (doc or "An encoder layer: ") + _described(stack, "self-attention"))
    attn, ffn = ctx.unit(self_attention, stack, False, role), ctx.unit(feed_forward, stack)
    b = Builder(unit, "forward")
    x = b.input("x", ("batch", length, stack.d_model))
    padding = b.input("padding_mask", ("batch", 1, 1, length))
    positions = position_input(b, arch, stack, length, length, bases)
    extra = () if positions is None else (positions,)
    lam = _depth_input(b, depth)
    first = _first_values(b, stack, length)
    shared, handed = _kv_inputs(b, stack, role, length), []
    inputs = (padding, *extra, *_read(lam, stack.attention), *first, *shared)
    x = sublayers(b, ctx, stack, x, {
        "attention": lambda m, h: _handed(b, _attended(b, b.sub(m, attn, "forward", h, *inputs, name="attended",
                                                                shape=h.meta["shape"]), first, h), handed, h, role),
        "ffn": lambda m, h: b.sub(m, ffn, "forward", h, name="fed", shape=h.meta["shape"])})
    b.output((x, first[1]) if first else (x, *handed) if handed else x)
    unit.reorder(_order(stack, False))
    return unit


def _depth_input(b: Builder, depth: bool) -> list:
    """With `depth` (nodes.Stack.depth_lambda), the layer's depth's differential lambda_init, [lambda_init]: an input
    after the positions, which the stack's loop gives (attncomp.lower.loops)."""
    return [b.input("lambda_init")] if depth else []


def _read(lam: list, attention: nodes.Attention | None) -> list:
    """What of the layer's lambda_init an attention reads: all of it where its lambda_init follows the depth."""
    return lam if nodes.follows_depth(attention) else []


def _kv_inputs(b: Builder, stack: nodes.Stack, role: str, length) -> list:
    """A READS layer's last inputs: the keys and values it attends with, [shared_k, shared_v]."""
    if role != READS:
        return []
    return [b.input("shared_k", ("batch", stack.key_value_heads, length, stack.d_k)),
            b.input("shared_v", ("batch", stack.key_value_heads, length, stack.d_v))]


def _handed(b: Builder, out: Node, handed: list, h: Node, role: str) -> Node:
    """A HANDS layer's self-attention returned (output, k, v): k and v are appended to `handed` for the layer to
    return."""
    if role != HANDS:
        return out
    out.meta.pop("shape", None)
    handed += [b.item(out, 1, "k"), b.item(out, 2, "v")]
    return b.item(out, 0, "attended", shape=h.meta.get("shape"))


def decoder_layer(ctx, stack: nodes.Stack, d_memory: int | None, kind: str = "", bases: tuple = (),
                  role: str = "", depth: bool = False) -> Unit:
    """forward(x[, memory, padding_mask | prefix][, positions][, lambda_init]), step(x, cache[, padding_mask][, rope]
    [, lambda_init]) and
    init_cache(memory) (decoder-only: init_cache(like, batch): a tensor of the model's dtype and device).
    With share_kv (`role`): HANDS's forward returns (x, k, v); READS's forward and step take the keys and values
    as their last inputs, and its cache holds none (LayerCache(None, cross_attn))."""
    arch = ctx.arch
    cross = d_memory is not None
    prefix, doc = _kind(stack, kind, role)
    unit = Unit(f"{prefix}DecoderLayer", (doc or "A decoder layer: ") + _described(
        stack, "causal self-attention" + (", attention over the encoder's output" if cross else "")))
    attn, ffn = ctx.unit(self_attention, stack, True, role), ctx.unit(feed_forward, stack)
    cross_attn = ctx.unit(cross_attention, stack, d_memory) if cross else None
    shape = ("batch", "tgt_len", stack.d_model)
    call = lambda target, method, *args: (  # noqa: E731 - a sublayer body: a child's method
        lambda member, h: b.sub(member, target, method, h, *args, name="attended", shape=h.meta.get("shape")))
    first: list = []

    b = Builder(unit, "forward")
    x = b.input("x", shape)
    memory = b.input("memory", ("batch", "src_len", d_memory)) if cross else None
    padding = b.input("padding_mask", ("batch", 1, 1, "src_len")) if cross else None
    prefix = (b.input("prefix", ("batch",)),) if stack.mask == "prefix" else ()  # a prefix LM's row lengths
    positions = position_input(b, arch, stack, "tgt_len", "tgt_len", bases)
    lam = _depth_input(b, depth)
    first += _first_values(b, stack, "tgt_len")
    shared, handed = _kv_inputs(b, stack, role, "tgt_len"), []
    own = call(attn, "forward", *prefix, *(() if positions is None else (positions,)), *_read(lam, stack.attention),
               *first[:1], *shared)
    bodies = {"attention": lambda m, h: _handed(b, _attended(b, own(m, h), first, h), handed, h, role),
              "ffn": lambda m, h: b.sub(m, ffn, "forward", h, name="fed", shape=h.meta["shape"])}
    if cross:
        bodies["cross_attention"] = call(cross_attn, "forward", memory, padding, *_read(lam, stack.cross_attention))
    x = sublayers(b, ctx, stack, x, bodies, cross, decoder=True)
    b.output((x, first[1]) if first else (x, *handed) if handed else x)

    _step(ctx, unit, stack, attn, cross_attn, ffn, bases, role, depth)
    _init_cache(unit, stack, attn, cross_attn, d_memory, role)
    unit.reorder(_order(stack, cross))
    return unit


def _step(ctx, unit: Unit, stack: nodes.Stack, attn: Unit, cross_attn: Unit | None, ffn: Unit, bases: tuple,
          role: str = "", depth: bool = False) -> None:
    arch = ctx.arch
    b = Builder(unit, "step", decoding=True)
    x = b.input("x", ("batch", 1, stack.d_model))
    cache = b.input("cache")
    padding = b.input("padding_mask", ("batch", 1, 1, "src_len")) if cross_attn is not None else None
    rope = None  # what the stack hands a step: a rotary table (this layer's own base) or T5's bias
    if isinstance(arch.positions, nodes.Rope):  # one table per rotary base of the stack; this layer reads its own
        tables = [b.input(name) for name in rope_names(bases or (rotation(stack),))]
        rope = tables[bases.index(rotation(stack)) if len(bases) > 1 else 0]
    elif made_by_stack_in_step(arch):
        rope = b.input(input_name(arch))
    lam = _depth_input(b, depth)
    own_lam, cross_lam = _read(lam, stack.attention), _read(lam, getattr(stack, "cross_attention", None))
    first = _first_values(b, stack, 1)
    shared = _kv_inputs(b, stack, role, "cache_len")
    if shared:  # the keys and values of the layer that computes them, the new position's among them
        past_k, past_v = shared
    else:
        own = b.field(cache, "self_attn")
        past_k, past_v = b.field(own, "k"), b.field(own, "v")
    new: dict[str, Node] = {}

    def self_step(member: str, h: Node) -> Node:
        if shared:
            return b.sub(member, attn, "step", h, past_k, past_v, *(() if rope is None else (rope,)), *own_lam,
                         name="attended", shape=h.meta.get("shape"))
        out = b.sub(member, attn, "step", h, past_k, past_v, *(() if rope is None else (rope,)), *own_lam, *first,
                    name="step")
        new["k"], new["v"] = b.item(out, 1, "k"), b.item(out, 2, "v")
        if first:
            first.append(b.item(out, 3, "first_v"))
        return b.item(out, 0, "attended", shape=h.meta.get("shape"))

    def cross_step(member: str, h: Node) -> Node:
        new["memory"] = memory_kv = b.field(cache, "cross_attn")
        k, v = b.field(memory_kv, "k"), b.field(memory_kv, "v")
        return b.sub(member, cross_attn, "step", h, k, v, padding, *cross_lam, name="attended",
                     shape=h.meta.get("shape"))

    bodies = {"attention": self_step, "cross_attention": cross_step,
              "ffn": lambda m, h: b.sub(m, ffn, "forward", h, name="fed", shape=h.meta["shape"])}
    x = sublayers(b, ctx, stack, x, bodies, cross_attn is not None, decoder=True)
    memory_kv = new.get("memory")
    own_kv = None if shared else b.call(KV, new["k"], new["v"], name="self_kv")
    b.output((x, b.call(LayerCache, own_kv, memory_kv, name="cache"), *first[1:]))


def _first_values(b: Builder, stack: nodes.Stack, length) -> list:
    """With `value_residual`, the first layer's values a layer reads, [first_v] (its method's last input; None
    in the first layer), to which the self-attention appends the first layer's values it hands on."""
    if not stack.value_residual:
        return []
    return [b.input("first_v", ("batch", stack.key_value_heads, length, stack.d_v))]


def _attended(b: Builder, out: Node, first: list, h: Node) -> Node:
    """The self-attention's output; with `value_residual` it returned (output, the first layer's values): the
    values are appended to `first` for the layer to return."""
    if not first:
        return out
    out.meta.pop("shape", None)
    first.append(b.item(out, 1, "first_v"))
    return b.item(out, 0, "attended", shape=h.meta.get("shape"))


def _init_cache(unit: Unit, stack: nodes.Stack, attn: Unit, cross_attn: Unit | None, d_memory: int | None,
                role: str = "") -> None:
    b = Builder(unit, "init_cache", decoding=True)
    if cross_attn is not None:  # the memory gives the batch size, dtype and device
        like = b.input("memory", ("batch", "src_len", d_memory))
        batch = b.size(like, 0, "batch")
    else:  # a tensor of the model's dtype and device, and the batch size
        like, batch = b.input("like"), b.input("batch")
        batch.meta["value"] = "batch"
    own = None  # a READS layer caches no keys and values of its own (share_kv)
    if role != READS:
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
