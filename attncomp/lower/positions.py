"""Positions: added to the embeddings (sinusoidal, learned), or acting in self-attention (rotary,
ALiBi, relative), lowered once per stack call and handed to its layers.

    sinusoidal, learned   x + PE(positions): the stack adds them to its embedded tokens
    rope                  a table of angles (2, T, dims): q and k of every self-attention are rotated
    alibi                 a bias -m_h |i - j| (h, Tq, Tk) added to the self-attention scores
    relative              indices clip(j - i, -k, k) + k (Tq, Tk) into each self-attention's own tables:
                          the logit term q_i . a^K_ij / sqrt(d_k) is added to the scores; with
                          `values = true` the output adds sum_j w_ij a^V_ij, which SDPA cannot take

The stack computes the tensor its self-attentions read (one for every layer) and passes it to each as
`positions`; a decode step computes the bias of its own keys (the last Tq of k_len positions, after
a local window cuts the cache). Only self-attention gets positions: source and target do not line up.

In the explicit scores the bias is added before the mask hides keys (`ops.hide`, a masked_fill that
passes no gradient to hidden scores); fuse_attention folds both into SDPA's float attn_mask.
"""

from __future__ import annotations

import operator

import torch
from torch import fx

from attncomp.ir import nodes
from attncomp.lower import ops
from attncomp.lower.units import Builder, embedding, inv_sqrt_const

Node = fx.Node


def acts_on_scores(arch: nodes.ModelSpec) -> bool:
    """Whether the positions reach self-attention (rope, ALiBi, relative) rather than the embeddings."""
    return isinstance(arch.positions, (nodes.Rope, nodes.ALiBi, nodes.Relative, nodes.Buckets))


def made_by_stack_in_step(arch: nodes.ModelSpec) -> bool:
    """Whether a decode step's positions come from the stack (a rope table, T5's bias from the stack's
    table) rather than from each attention's own keys (ALiBi, relative)."""
    return isinstance(arch.positions, (nodes.Rope, nodes.Buckets))


def _input_shape(arch: nodes.ModelSpec, stack: nodes.Stack, q_len, k_len) -> tuple:
    pos = arch.positions
    if isinstance(pos, nodes.Rope):
        return (2, q_len, rotary_dims(arch, stack))
    if isinstance(pos, nodes.Buckets) and pos.per_layer:
        return (q_len, k_len)  # bucket indices
    if isinstance(pos, (nodes.ALiBi, nodes.Buckets)):
        return (stack.heads, q_len, k_len)
    return (q_len, k_len)


def rotary_dims(arch: nodes.ModelSpec, stack: nodes.Stack) -> int:
    """How many of a head's query/key dims the rotary table turns: a latent attention's decoupled rope_dims,
    else rope's fraction of d_k (of d_k / 2 for differential attention, whose halves turn each on their own)."""
    if isinstance(stack.attention, nodes.Latent):
        return stack.attention.rope_dims
    if isinstance(getattr(stack.attention, "normalizer", None), nodes.Differential):  # each half of q and k rotated on its own
        return arch.positions.dims(stack.d_k // 2)
    return arch.positions.dims(stack.d_k)


def input_name(arch: nodes.ModelSpec) -> str:
    return {"rope": "rope", "alibi": "alibi", "relative": "relative", "buckets": "position_bias"}[arch.positions.kind]


def rotation(seen: nodes.Stack) -> tuple:
    """(base, scaling) of a layer's rotary angles (`seen`: the layer as its stack's plan resolved it,
    nodes.Stack.layer_plan(positions): its kind's, its stack's or positions' rotation)."""
    if seen.rope_base is None:
        raise ValueError("a layer's rotation is read from its resolved plan: layer_plan(arch.positions)")
    return seen.rope_base, seen.rope_scaling


def rope_bases(arch: nodes.ModelSpec, stack: nodes.Stack) -> tuple[tuple, ...]:
    """The rotations (base, scaling) of a stack's layers, each once, in the order its layers first use them:
    one for most stacks, more when layer kinds set their own `rope_base` or `rope_scaling` (ModernBERT's and
    Gemma 3's global layers)."""
    if not isinstance(arch.positions, nodes.Rope):
        return ()
    bases: list[tuple] = []
    for _, seen in stack.layer_plan(arch.positions):
        if rotation(seen) not in bases:
            bases.append(rotation(seen))
    return tuple(bases)


def rope_names(bases: tuple) -> list[str]:
    """The rotary tables a stack hands its layers: rope, rope_2, ... one per rotation."""
    return ["rope" if i == 0 else f"rope_{i + 1}" for i in range(len(bases))]


def position_input(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, q_len, k_len,
                   bases: tuple = ()) -> Node | None:
    """The placeholder of what the stack hands a self-attention about positions, or None. With several
    rotations in the stack, a layer takes every table (all layers are called alike) and reads its own."""
    if not acts_on_scores(arch):
        return None
    if len(bases) > 1:
        shape = _input_shape(arch, stack, q_len, k_len)
        tables = [b.input(name, shape) for name in rope_names(bases)]
        return tables[bases.index(rotation(stack))]
    return b.input(input_name(arch), _input_shape(arch, stack, q_len, k_len))


def rope_table(b: Builder, positions: Node, dims: int, rotation_: tuple, dtype: Node, name: str) -> Node:
    """The (2, T, dims) angles of one rotation: ops.rope_table, or ops.scaled_rope_table with the scaling's
    arguments as keywords (those it leaves unset out)."""
    base, scaling = rotation_
    if scaling is None:
        return b.call(ops.rope_table, positions, dims, base, dtype, name=name)
    arguments = {k: v for k, v in scaling.model_dump().items() if k != "kind" and v is not None}
    return b.call(ops.scaled_rope_table, positions, dims, base, dtype, scaling.kind, **arguments, name=name)


def _range(b: Builder, x: Node, start: Node | int) -> Node:
    """Positions start .. start + T - 1 of x's T new tokens; `start` is 0, or a decode step's position
    (a 0-d tensor: the cache's position field, attncomp.lower.cache)."""
    length = b.size(x, 1)
    device = b.call(getattr, x, "device", name="device")
    positions = b.call(torch.arange, 0, length, device=device, name="positions")
    return positions if start == 0 else b.call(torch.add, positions, start, name="positions")


def add_to_embeddings(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, x: Node, start: Node | int) -> Node:
    """x + PE for sinusoidal or learned positions (at the embeddings' width, d_embed or d_model); x for
    the others."""
    pos = arch.positions
    if not isinstance(pos, (nodes.Sinusoidal, nodes.Learned)):
        return x
    positions = _range(b, x, start)
    if isinstance(pos, nodes.Learned):
        if pos.offset:  # OPT: position p reads row p + offset of a table max_len + offset long
            positions = b.call(operator.add, positions, pos.offset, name="positions")
        pe = b.leaf("pos", embedding(pos.max_len + pos.offset, arch.d_embed or stack.d_model), positions, name="pe")
    else:
        if pos.offset:
            positions = b.call(operator.add, positions, pos.offset, name="positions")
        table = ops.sinusoidal_tensor2tensor if pos.timescales == "tensor2tensor" else \
            ops.sinusoidal_halves if pos.layout == "halves" else ops.sinusoidal
        dtype = b.call(getattr, x, "dtype", name="dtype")
        pe = b.call(table, positions, arch.d_embed or stack.d_model, dtype, name="pe")
    return b.add(x, pe)


def for_layers(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, x: Node, start: Node | int,
               past: Node | int = 0) -> tuple:
    """What the stack's self-attentions read about positions (see the module docstring): nothing, one
    tensor, or one rotary table per base of its layers (`rope_bases`). `start`: the position of x's first
    token; `past`: in a decode step, the keys before it that the layer keeping the most of them holds
    (T5's bias covers them; a windowed layer takes its last columns)."""
    pos = arch.positions
    if isinstance(pos, nodes.Rope):
        positions = _range(b, x, start)
        dtype = b.call(getattr, x, "dtype", name="dtype")
        bases = rope_bases(arch, stack)
        return tuple(rope_table(b, positions, rotary_dims(arch, stack), rotation_, dtype, name)
                     for rotation_, name in zip(bases, rope_names(bases)))
    if isinstance(pos, (nodes.ALiBi, nodes.Relative)):
        length = b.size(x, 1)
        return (score_bias(b, arch, stack, x, length, length),)
    if isinstance(pos, nodes.Buckets):
        length = b.size(x, 1)
        return (bucket_bias(b, stack, pos, x, length, length if past == 0 else b.call(operator.add, past, length,
                                                                                      name="k_len")),)
    return ()


def bucket_bias(b: Builder, stack: nodes.Stack, pos: nodes.Buckets, like: Node, q_len, k_len) -> Node:
    """T5's bias (h, Tq, Tk) from the stack's one table (`relative_bias`, a scalar per bucket and head),
    for queries that are the last q_len of k_len positions: bidirectional buckets in an encoder,
    causal in a decoder. A decode step's k_len is the cache length plus one."""
    device = b.call(getattr, like, "device", name="device")
    index = b.call(ops.bucket_index, q_len, k_len, pos.count, pos.max_distance, isinstance(stack, nodes.EncoderSpec),
                   device, name="buckets")
    if pos.per_layer:  # umT5: each self-attention looks the indices up in its own table (`layer_bucket_bias`)
        return index
    return layer_bucket_bias(b, stack, pos, index)


def layer_bucket_bias(b: Builder, stack: nodes.Stack, pos: nodes.Buckets, index: Node) -> Node:
    """T5's bias (h, Tq, Tk) of bucket indices (Tq, Tk) from a table `relative_bias` of the unit being built:
    the stack's (one per stack), or a self-attention's (`per_layer`)."""
    table = b.leaf("relative_bias", embedding(pos.count, stack.heads), index, name="position_bias")
    return b.call(ops.bucket_bias, table, name="position_bias")


def score_bias(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, like: Node, q_len: Node, k_len: Node) -> Node:
    """ALiBi's bias, or relative-position indices, for queries that are the last q_len of k_len positions."""
    device = b.call(getattr, like, "device", name="device")
    if isinstance(arch.positions, nodes.ALiBi):
        dtype = b.call(getattr, like, "dtype", name="dtype")
        return b.call(ops.alibi_bias, stack.heads, q_len, k_len, device, dtype, name="alibi")
    return b.call(ops.relative_positions, q_len, k_len, arch.positions.max_distance, device, name="relative")


def decode_bias(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, x: Node, k: Node) -> Node | None:
    """In a decode step: the bias (or indices) of x's queries over the keys k attends to."""
    if not isinstance(arch.positions, (nodes.ALiBi, nodes.Relative)):
        return None
    return score_bias(b, arch, stack, x, b.size(x, 1), b.size(k, 2))


def bias_logits(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, q: Node, index: Node) -> Node:
    """Relative positions' logit term q_i . a^K_ij / sqrt(d_k), (B, h, Tq, Tk)."""
    rows = 2 * arch.positions.max_distance + 1
    table = b.leaf("relative_k", embedding(rows, stack.d_k), index, name="relative_k")
    term = b.call(torch.einsum, "bhqd,qkd->bhqk", q, table, name="relative_scores")
    return b.call(torch.mul, term, inv_sqrt_const(stack.d_k), name="relative_scores")


def relative_values(b: Builder, arch: nodes.ModelSpec, stack: nodes.Stack, weights: Node, out: Node,
                    index: Node) -> Node:
    """out + sum_j w_ij a^V_ij where the spec asks for the value term, else out."""
    if not arch.positions.values:
        return out
    rows = 2 * arch.positions.max_distance + 1
    table = b.leaf("relative_v", embedding(rows, stack.d_v), index, name="relative_v")
    return b.add(out, b.call(torch.einsum, "bhqk,qkd->bhqd", weights, table, name="relative_heads"), name="heads")
