"""Training FLOPs per target token, counted from the IR alone, without building or running anything.

It counts what `torch.utils.flop_counter` counts when the optimised forward and backward run on
meta tensors (the build report's figure; equal for every shipped spec and variant, tested in
tests/ir/test_flops.py): the matrix products, nothing else (biases, norms, softmax, masks and
the other elementwise work are not counted).

- a projection x W^T with N rows costs 2 N d_in d_out forward, and as much again for each of the
  two gradients (of x and of W): 6 N d_in d_out;
- an attention over Tq queries and Tk keys costs 2 B h Tq Tk (d_k + d_v) forward (scores, then
  weights @ values; the additive score's product with v_a costs what q @ k^T does) and twice that
  backward (both operands of both products): 6 B h Tq Tk (d_k + d_v).

Counted for `batch` sentences of `length` source and `length` target tokens, per target token.
"""

from __future__ import annotations

from attncomp.ir import nodes

FLOP_BATCH, FLOP_LENGTH = 8, 64  # the build report's sentences


def _projection(rows: int, d_in: int, d_out: int) -> int:
    return 6 * rows * d_in * d_out


def _attention(stack: nodes.Stack, batch: int, t_q: int, t_k: int, d_memory: int, kind) -> int:
    """One attention sublayer: q from the stack's states, k and v from `d_memory`-wide states."""
    h, d = stack.heads, stack.d_model
    rows_q, rows_k = batch * t_q, batch * t_k
    gate = _projection(rows_q, d, h * stack.d_v) if isinstance(kind, nodes.DotProduct) and kind.gate else 0
    if isinstance(kind, nodes.Latent):  # gate: gate_proj, from the query's input
        return _latent(stack, kind, batch, t_q, t_k) + gate
    count = _projection(rows_q, d, h * stack.d_k) + _projection(rows_q, h * stack.d_v, d) + gate  # q_proj, o_proj
    kv = stack.key_value_heads  # grouped-query attention projects fewer key/value heads; every query head still attends
    count += _projection(rows_k, d_memory, kv * stack.d_k) + _projection(rows_k, d_memory, kv * stack.d_v)
    return count + 6 * batch * h * t_q * t_k * (stack.d_k + stack.d_v)


def _latent(stack: nodes.Stack, kind: nodes.Latent, batch: int, t_q: int, t_k: int) -> int:
    """Multi-head latent attention (self-attention): the down and up projections of the query (or W^Q) and of
    the key/value latent, W^O, and the attention over d_k + d_v."""
    h, d = stack.heads, stack.d_model
    rows_q, rows_k = batch * t_q, batch * t_k
    query = _projection(rows_q, d, kind.q_rank) + _projection(rows_q, kind.q_rank, h * stack.d_k) if kind.q_rank \
        else _projection(rows_q, d, h * stack.d_k)
    latent = _projection(rows_k, d, kind.kv_rank + kind.rope_dims) + \
        _projection(rows_k, kind.kv_rank, h * (stack.d_k - kind.rope_dims + stack.d_v))
    return query + latent + _projection(rows_q, h * stack.d_v, d) + 6 * batch * h * t_q * t_k * (stack.d_k + stack.d_v)


def _relative(stack: nodes.Stack, positions, batch: int, length: int) -> int:
    """Relative positions' products in self-attention: q . a^K (and weights . a^V), as the attention's own."""
    if not isinstance(positions, nodes.Relative):
        return 0
    return 6 * batch * stack.heads * length * length * (stack.d_k + (stack.d_v if positions.values else 0))


def _layer(stack: nodes.Stack, batch: int, length: int, d_memory: int | None, positions=None) -> int:
    count = _attention(stack, batch, length, length, stack.d_model, stack.attention) + \
        _relative(stack, positions, batch, length)
    if d_memory is not None:  # cross-attention: memory of `length` source tokens
        count += _attention(stack, batch, length, length, d_memory, stack.cross_attention)
    rows = batch * length
    inner = 2 if stack.gated else 1  # a gated feed-forward has two inner projections, fc1 and gate
    ffns = sum(part.kind == "ffn" for part in stack.sublayers(d_memory is not None))  # macaron: two
    net = inner * _projection(rows, stack.d_model, stack.d_ff) + _projection(rows, stack.d_ff, stack.d_model)
    moe = stack.ffn
    if isinstance(moe, nodes.MoE):  # each token runs its top_k experts, the router, and a shared expert
        shared = inner * _projection(rows, stack.d_model, moe.shared) + _projection(rows, moe.shared, stack.d_model)
        net = moe.top_k * net + _projection(rows, stack.d_model, moe.experts) + \
            (shared + (_projection(rows, stack.d_model, 1) if moe.shared_gate else 0) if moe.shared else 0)
    return count + ffns * net


def training_flops(spec: nodes.Spec, batch: int = FLOP_BATCH, length: int = FLOP_LENGTH) -> float:
    """Forward and backward FLOPs of one training step, per target token (the build report's figure)."""
    m = spec.model
    enc, dec = m.encoder, m.decoder
    total = 0
    if enc is not None:  # each layer as its kind sees the stack (nodes.Stack.layer_plan)
        total += sum(_layer(seen, batch, length, None, m.positions) for _, seen in enc.layer_plan())
    if dec is not None:
        d_memory = enc.d_model if enc is not None else None
        total += sum(_layer(seen, batch, length, d_memory, m.positions) for _, seen in dec.layer_plan())
    rows = batch * length
    for stack in m.stacks:  # a narrower d_embed: each stack's embed_proj
        if m.d_embed is not None and m.d_embed != stack.d_model:
            total += _projection(rows, m.d_embed, stack.d_model)
    top = dec if dec is not None else enc
    width = m.d_embed or top.d_model  # what the pre-softmax linear reads
    if isinstance(m.head, nodes.DenseHead):
        total += _projection(rows, top.d_model, width)  # the head's dense layer
    elif width != top.d_model:
        total += _projection(rows, top.d_model, width)  # output_proj
    total += _projection(rows, width, m.tgt_vocab)  # the pre-softmax linear
    return total / (batch * length)
