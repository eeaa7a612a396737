"""Lowering of the Transformer's pieces into torch.fx nodes, written the paper's way.

Attention is explicit — projections, q @ k^T, scale, mask, softmax, dropout, @ v — and every op has
one spelling (the table below), so the passes can match it reliably:

    linear layer          call_module(q_proj, x)              tied output: F.linear(x, embed.weight)
    split heads           torch.unflatten(x, -1, (h, d)) -> torch.transpose(x, 1, 2)
    merge heads           torch.transpose(x, 1, 2) -> torch.flatten(x, -2)
    scores                torch.matmul(q, torch.transpose(k, -2, -1)) -> torch.mul(s, 1/sqrt(d_k))
    positional bias       torch.add(s, bias)  (ALiBi, relative positions; before the mask)
    mask (True = hidden)  torch.masked_fill(s, mask, -inf)
    weights               torch.softmax(s, -1) -> torch.masked_fill(w, rows, 0.0) for padding masks
    dropout               F.dropout(x, p=p, training=self.training), only where p > 0
    residual              torch.add(x, y)
    rotary positions      ops.rotate(q, ops.rope_table(positions, dims, base, dtype)), q and k after split_heads
    grouped k/v heads     torch.repeat_interleave(k, heads // kv_heads, 1), right before the scores
    gated feed-forward    torch.mul(act(gate(x)), fc1(x))
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import fx

from attncomp.ir import nodes
from attncomp.lower import ops

Node = fx.Node


class Builder:
    """An fx.Graph under construction, with helpers that emit the canonical spellings."""

    def __init__(self) -> None:
        self.graph = fx.Graph()
        self._training: Node | None = None

    def input(self, name: str) -> Node:
        return self.graph.placeholder(name)

    def module(self, target: str, *args: Any) -> Node:
        return self.graph.call_module(target, args)

    def call(self, fn: Callable, *args: Any, **kwargs: Any) -> Node:
        return self.graph.call_function(fn, args, kwargs)

    def method(self, name: str, *args: Any, **kwargs: Any) -> Node:
        return self.graph.call_method(name, args, kwargs)

    def param(self, target: str) -> Node:
        return self.graph.get_attr(target)

    def training(self) -> Node:
        if self._training is None:
            self._training = self.graph.get_attr("training")
        return self._training

    def dropout(self, x: Node, p: float) -> Node:
        return x if p == 0.0 else self.call(F.dropout, x, p=p, training=self.training())

    def add(self, x: Node, y: Node) -> Node:
        return self.call(torch.add, x, y)

    def output(self, value: Any) -> None:
        self.graph.output(value)


# --- attention --------------------------------------------------------------------------------


def split_heads(b: Builder, x: Node, heads: int, dim: int) -> Node:
    """(B, T, h * dim) -> (B, h, T, dim)."""
    return b.call(torch.transpose, b.call(torch.unflatten, x, -1, (heads, dim)), 1, 2)


def merge_heads(b: Builder, x: Node) -> Node:
    """(B, h, T, dim) -> (B, T, h * dim)."""
    return b.call(torch.flatten, b.call(torch.transpose, x, 1, 2), -2)


def scores(b: Builder, prefix: str, q: Node, k: Node, kind: str, d_k: int) -> Node:
    """Attention logits (B, h, Tq, Tk): scaled dot products, or the additive score v^T tanh(q + k)."""
    if kind == "additive":
        summed = b.call(torch.add, b.call(torch.unsqueeze, q, 3), b.call(torch.unsqueeze, k, 2))
        energy = b.param(f"{prefix}.energy")
        return b.call(torch.einsum, "bhqkd,hd->bhqk", b.call(torch.tanh, summed), energy)
    logits = b.call(torch.matmul, q, b.call(torch.transpose, k, -2, -1))
    return b.call(torch.mul, logits, 1.0 / math.sqrt(d_k))


def attend(b: Builder, prefix: str, q: Node, k: Node, v: Node, mask: Node | None, rows: Node | None,
           kind: str, d_k: int, p: float, bias: Any = None) -> Node:
    """softmax(mask(scores)) @ v, explicitly; `rows` marks queries that see no key (output 0). A positional
    `bias` (attncomp.lower.positions.ScoreBias: ALiBi, relative) is added to the scores before the mask."""
    s = scores(b, prefix, q, k, kind, d_k)
    if bias is not None:
        s = b.call(torch.add, s, bias.logits(prefix, q))
    if mask is not None:
        s = b.call(torch.masked_fill, s, mask, -math.inf)
    weights = b.call(torch.softmax, s, -1)
    if rows is not None:
        weights = b.call(torch.masked_fill, weights, rows, 0.0)
    weights = b.dropout(weights, p)
    out = b.call(torch.matmul, weights, v)
    if bias is not None:
        out = bias.values(prefix, weights, out)
    out.meta["attention"] = prefix  # which module's attention this is, kept through the passes
    return out


def project_kv(b: Builder, prefix: str, source: Node, stack: nodes.Stack,
               rope: Node | None = None) -> tuple[Node, Node]:
    """Keys and values (B, kv_heads, T, d), keys rotated when the model has rotary positions."""
    k = split_heads(b, b.module(f"{prefix}.k_proj", source), stack.key_value_heads, stack.d_k)
    v = split_heads(b, b.module(f"{prefix}.v_proj", source), stack.key_value_heads, stack.d_v)
    if rope is not None:
        k = b.call(ops.rotate, k, rope)
    return k, v


def repeat_kv(b: Builder, x: Node, stack: nodes.Stack) -> Node:
    """Grouped-query attention (Ainslie et al. 2023): (B, kv_heads, T, d) -> (B, heads, T, d), query
    head i reading key/value head i // (heads / kv_heads); nothing to do when kv_heads = heads."""
    groups = stack.heads // stack.key_value_heads
    return x if groups == 1 else b.call(torch.repeat_interleave, x, groups, 1)


def attention(b: Builder, prefix: str, x: Node, k: Node, v: Node, mask: Node | None, rows: Node | None,
              kind: str, stack: nodes.Stack, p: float, bias: Any = None, rope: Node | None = None) -> Node:
    """Multi-head attention of queries from x over given keys and values, with its output projection;
    `rope`: rotary angles for q (k arrives rotated), `bias`: a positional term on the scores."""
    q = split_heads(b, b.module(f"{prefix}.q_proj", x), stack.heads, stack.d_k)
    if rope is not None:
        q = b.call(ops.rotate, q, rope)
    k, v = repeat_kv(b, k, stack), repeat_kv(b, v, stack)
    out = attend(b, prefix, q, k, v, mask, rows, kind, stack.d_k, p, bias)
    return b.module(f"{prefix}.o_proj", merge_heads(b, out))


# --- feed-forward, residual sub-layers --------------------------------------------------------


GATES = {"swiglu": F.silu, "geglu": F.gelu}  # gated feed-forwards (Shazeer 2020): the gate's activation


def feed_forward(b: Builder, prefix: str, x: Node, stack: nodes.Stack, p_activation: float) -> Node:
    """FFN(x) = fc2(dropout(act(fc1(x)))); gated: fc2(dropout(act(gate(x)) * fc1(x)))."""
    if stack.gated:
        gate = b.call(GATES[stack.activation], b.module(f"{prefix}.gate", x))
        act = b.call(torch.mul, gate, b.module(f"{prefix}.fc1", x))
        return b.module(f"{prefix}.fc2", b.dropout(act, p_activation))
    hidden = b.module(f"{prefix}.fc1", x)
    if stack.activation == "silu":
        act = b.call(F.silu, hidden)
    else:
        act = b.call(torch.relu, hidden) if stack.activation == "relu" else b.call(F.gelu, hidden)
    return b.module(f"{prefix}.fc2", b.dropout(act, p_activation))


def sublayer(b: Builder, x: Node, norm: str, placement: str, p: float, body: Callable[[Node], Node]) -> Node:
    """post: LayerNorm(x + Dropout(body(x)));  pre: x + Dropout(body(LayerNorm(x)))."""
    if placement == "pre":
        return b.add(x, b.dropout(body(b.module(norm, x)), p))
    return b.module(norm, b.add(x, b.dropout(body(x), p)))


# --- embeddings and positions -----------------------------------------------------------------


def positions(b: Builder, model: nodes.Model, stack_name: str, x: Node, start: Node | int, length: Node) -> Node:
    """Positional encodings for positions start .. start + length - 1, shape (T, d_model)."""
    device = b.call(getattr, x, "device")
    end = length if start == 0 else b.call(operator.add, start, length)
    pos = b.call(torch.arange, start, end, device=device)
    if isinstance(model.positions, nodes.Learned):
        return b.module(f"{stack_name}.pos", pos)
    d_model = getattr(model, stack_name).d_model
    table = ops.sinusoidal_halves if model.positions.layout == "halves" else ops.sinusoidal
    return b.call(table, pos, d_model, b.call(getattr, x, "dtype"))


def embed(b: Builder, model: nodes.Model, table: str, stack_name: str, tokens: Node, start: Node | int = 0) -> Node:
    """Dropout(Embedding(tokens) * sqrt(d_model) + PE): the input of a stack."""
    d_model = getattr(model, stack_name).d_model
    x = b.module(table, tokens)
    if model.scale_embeddings:
        x = b.call(torch.mul, x, math.sqrt(d_model))
    if isinstance(model.positions, (nodes.Sinusoidal, nodes.Learned)):  # ALiBi, relative: on the scores
        length = b.method("size", tokens, 1)
        x = b.add(x, positions(b, model, stack_name, x, start, length))
    if model.embedding_norm:
        x = b.module(f"{stack_name}.embed_norm", x)
    return b.dropout(x, model.dropout.embedding)


def rope_table(b: Builder, model: nodes.Model, stack: nodes.Stack, x: Node, tokens: Node,
               start: Node | int = 0) -> Node | None:
    """The rotary angles of positions start .. start + T - 1 for one stack's heads (x: the embedded
    tokens, for device and dtype), or None when the model has no rotary positions."""
    rope = model.positions
    if not isinstance(rope, nodes.Rope):
        return None
    length = b.method("size", tokens, 1)
    end = length if start == 0 else b.call(operator.add, start, length)
    pos = b.call(torch.arange, start, end, device=b.call(getattr, x, "device"))
    return b.call(ops.rope_table, pos, rope.dims(stack.d_k), rope.base, b.call(getattr, x, "dtype"))


def project_out(b: Builder, target: str, is_linear: bool, x: Node, bias: bool = False) -> Node:
    """Hidden states -> vocabulary logits, through `output` or a tied embedding (+ output_bias)."""
    if is_linear:
        out = b.module(target, x)
    else:
        out = b.call(F.linear, x, b.param(f"{target}.weight"))
    return b.add(out, b.param("output_bias")) if bias else out


def head(b: Builder, model: nodes.Model, x: Node) -> Node:
    """The prediction-head transform before the output projection: LayerNorm(act(dense(x))), or x."""
    if not isinstance(model.head, nodes.DenseHead):
        return x
    dense = b.module("head.dense", x)
    act = b.call(torch.relu, dense) if model.head.activation == "relu" else b.call(F.gelu, dense)
    return b.module("head.norm", act)
