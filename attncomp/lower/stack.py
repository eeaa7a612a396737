"""Stack units: the encoder and the decoder. A stack takes embedded tokens, scales them by
sqrt(d_model), adds positions (section 3.5), applies its embedding norm and dropout, runs its layers
in a loop (attncomp.lower.loops) and closes with its final norm.

    Encoder.forward(x, padding_mask) -> memory
    Decoder.forward(x[, memory, padding_mask]) -> states  (a prefix LM: forward(x, prefix))
    Decoder.step(x, caches[, padding_mask], start) -> (states, caches)   x: the newest token, at position
                                                                         `start` (a 0-d tensor)
    Decoder.init_cache(memory) -> caches      (decoder-only: init_cache(like, batch))
"""

from __future__ import annotations

import math

import torch
from torch import fx

from attncomp.ir import nodes
from attncomp.lower import loops, positions
from attncomp.lower.attention import kv_role
from attncomp.lower.layer import decoder_layer, encoder_layer
from attncomp.lower.norms import apply_norm
from attncomp.lower.units import Builder, Param, Unit, linear, sqrt_const

Node = fx.Node
MEMBERS = ("pos", "relative_bias", "embed_norm", "embed_proj", "layers", "unet_weights", "reinject_x", "reinject_x0",
           "norm")


def width(arch: nodes.ModelSpec, stack: nodes.Stack) -> int:
    """The width of the embeddings a stack reads: d_embed, or its d_model."""
    return arch.d_embed or stack.d_model


def _embedded(b: Builder, ctx, stack: nodes.Stack, x: Node, start: Node | int = 0) -> Node:
    """Dropout(Norm(x * sqrt(d_model) + PE)), the norm only with embedding_norm; with a narrower d_embed
    all of it at that width, then embed_proj (with a bias, as ALBERT's and ELECTRA's) to d_model."""
    arch = ctx.arch
    if arch.scale_embeddings:
        x = b.call(torch.mul, x, sqrt_const(stack.d_model), name="x")
    x = positions.add_to_embeddings(b, arch, stack, x, start)
    if arch.embedding_norm:
        x = apply_norm(b, ctx, "embed_norm", stack.normalization, width(arch, stack), x, name="x")
    x = b.dropout(x, arch.dropout.embedding, name="x")
    if arch.d_embed is not None and arch.d_embed != stack.d_model:
        x = b.leaf("embed_proj", linear(arch.d_embed, stack.d_model, True), x, name="x")
    return x


def _closed(b: Builder, ctx, stack: nodes.Stack, x: Node) -> Node:
    if not stack.final_norm:
        return x
    return apply_norm(b, ctx, "norm", stack.normalization, stack.d_model, x, name="x")


def _joins(b: Builder, stack: nodes.Stack) -> dict:
    """The learned weights of the connections across the stack's layers, as the loops take them: U-net skips
    (`unet_weights`, one per skip, from 1) and the re-injected input (`reinject_x`, `reinject_x0`, one each per
    layer after the first, from 1 and 0)."""
    joins = {}
    if stack.unet:
        joins["unet"] = b.param("unet_weights", Param((stack.layers // 2,), 1.0))
    if stack.reinject:
        joins["x_weights"] = b.param("reinject_x", Param((stack.layers - 1,), 1.0))
        joins["x0_weights"] = b.param("reinject_x0", Param((stack.layers - 1,), "zeros"))
    if stack.value_residual:  # each layer reads and hands on the first layer's values
        joins["value_residual"] = True
    if stack.depth_lambda:  # each layer reads its depth's differential lambda_init (ops.lambda_init)
        joins["depth_lambda"] = True
    return {**joins, **_shared(stack), **_shared_kv(stack)}


def _layer_list(ctx, stack: nodes.Stack, rule, *args) -> list[Unit]:
    """One unit per layer kind (nodes.Stack.layer_plan), listed per parameter set (per layer without `share`;
    a set's layers are of one kind, its first layer's): a kind is lowered once. With `depth_lambda` every layer
    takes its depth's lambda_init as an input, whether its own attentions read it or not (the loop hands it to all)."""
    bases = positions.rope_bases(ctx.arch, stack)
    plan, sets = stack.layer_plan(ctx.arch.positions), stack.parameter_sets()
    firsts = [sets.index(s) for s in range(max(sets) + 1)]
    depth = stack.depth_lambda  # once: it reads the whole plan (a list per layer made it quadratic in the depth)
    return [ctx.unit(rule, plan[i][1], *args, plan[i][0], bases, kv_role(stack, i), depth) for i in firsts]


def _shared(stack: nodes.Stack) -> dict:
    """The loops' `share`: the parameter set of each layer, where the stack shares them (attncomp.lower.loops)."""
    return {} if isinstance(stack.share, nodes.NoSharing) else {"share": stack.parameter_sets()}


def _shared_kv(stack: nodes.Stack) -> dict:
    """The loops' `share_kv`, where layers share keys and values (attncomp.lower.loops)."""
    return {} if stack.share_kv == 1 else {"share_kv": stack.share_kv}


def encoder(ctx, stack: nodes.Stack) -> Unit:
    unit = Unit("Encoder", f"The encoder: {stack.layers} layers over the embedded source")
    b = Builder(unit, "forward")
    x = b.input("x", ("batch", "src_len", width(ctx.arch, stack)))
    padding = b.input("padding_mask", ("batch", 1, 1, "src_len"))
    x = _embedded(b, ctx, stack, x)
    extra = positions.for_layers(b, ctx.arch, stack, x, 0)
    layers = b.layers("layers", _layer_list(ctx, stack, encoder_layer))
    x = b.call(loops.each_layer, layers, x, padding, *extra, name="x",
               shape=x.meta.get("shape"), **_joins(b, stack))
    b.output(_closed(b, ctx, stack, x))
    unit.reorder(MEMBERS)
    return unit


def _longest_cache(b: Builder, stack: nodes.Stack, caches: Node) -> Node:
    """In a decode step, the length of the cache that keeps the most keys: a layer without a window (its
    cache holds every position before the step), else one with the widest window (it holds the last
    `window` positions, fewer at first)."""
    plan = stack.layer_plan()
    kept = [seen.attention.window if isinstance(seen.attention, nodes.Local) else math.inf for _, seen in plan]
    longest = b.item(caches, kept.index(max(kept)), "longest")
    return b.size(b.field(b.field(longest, "self_attn"), "k"), 2, "cache_len")


def decoder(ctx, stack: nodes.Stack, d_memory: int | None) -> Unit:
    cross = d_memory is not None
    unit = Unit("Decoder", f"The decoder: {stack.layers} layers over the embedded target" +
                (", attending to the encoder's output" if cross else ""))
    arch = ctx.arch

    b = Builder(unit, "forward")
    x = b.input("x", ("batch", "tgt_len", width(arch, stack)))
    memory = (b.input("memory", ("batch", "src_len", d_memory)), b.input("padding_mask", ("batch", 1, 1, "src_len"))) \
        if cross else ()
    if stack.mask == "prefix":  # a prefix LM: the rows' prefix lengths (None: causal), for every self-attention
        memory = (b.input("prefix", ("batch",)),)
    x = _embedded(b, ctx, stack, x)
    extra = positions.for_layers(b, arch, stack, x, 0)
    layers = b.layers("layers", _layer_list(ctx, stack, decoder_layer, d_memory))
    x = b.call(loops.each_layer, layers, x, *memory, *extra, name="x",
               shape=x.meta.get("shape"), **_joins(b, stack))
    b.output(_closed(b, ctx, stack, x))

    b = Builder(unit, "step", decoding=True)
    x = b.input("x", ("batch", 1, width(arch, stack)))
    caches = b.input("caches")
    padding = (b.input("padding_mask", ("batch", 1, 1, "src_len")),) if cross else ()
    start = b.input("start", ())
    x = _embedded(b, ctx, stack, x, start)
    past = _longest_cache(b, stack, caches) if isinstance(arch.positions, nodes.Buckets) else 0
    rope = positions.for_layers(b, arch, stack, x, start, past) if positions.made_by_stack_in_step(arch) else ()
    layers = b.layers("layers", _layer_list(ctx, stack, decoder_layer, d_memory))
    out = b.call(loops.each_layer_step, layers, x, caches, *padding, *rope, name="stepped", **_joins(b, stack))
    x = b.item(out, 0, "x", shape=x.meta.get("shape"))
    b.output((_closed(b, ctx, stack, x), b.item(out, 1, "caches")))

    b = Builder(unit, "init_cache", decoding=True)
    inputs = (b.input("memory", ("batch", "src_len", d_memory)),) if cross else (b.input("like"), b.input("batch"))
    layers = b.layers("layers", _layer_list(ctx, stack, decoder_layer, d_memory))
    b.output(b.call(loops.each_layer_cache, layers, *inputs, name="caches", **_shared(stack)))
    unit.reorder(MEMBERS)
    return unit
