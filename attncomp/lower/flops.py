"""Training FLOPs per target token, counted from a compiled model's graphs and their nodes' shapes.

Nothing runs: the lowering records every value's symbolic shape (attncomp.lower.shapes), so each
matrix product of the `forward` entry point is counted from its operands' shapes, with the size names
(`batch`, `src_len`, `tgt_len`, and a unit's own, such as a feed-forward net's `seq_len`) bound to
numbers where a unit is called. What is counted is what `torch.utils.flop_counter` counts when the
forward and backward run (tests/lower/test_flops.py checks both): the matrix products, nothing else
(biases, norms, softmax, masks and the other elementwise work are not counted).

- a linear map (nn.Linear, F.linear) of N rows costs 2 N d_in d_out forward; a matmul or an einsum
  twice the product of its sizes (out and contracted); an attention kernel (SDPA, FlexAttention) over
  Tq queries and Tk keys 2 B h Tq Tk (d_k + d_v), as its two products written out would;
- a mixture of experts runs top_k experts per token (and its router and shared expert on every token);
- backward costs twice the forward (the gradients of both operands of every product): training
  costs 3 x forward.

A layer kind's body is counted once for each distinct binding of its sizes (however many layers it has).
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx
from torch.utils.flop_counter import FlopCounterMode

from attncomp.lower import loops, ops
from attncomp.lower.family import family_of
from attncomp.lower.program import CompiledModel
from attncomp.lower.shapes import infer
from attncomp.lower.units import Leaf, Unit, UnitList

FLOP_BATCH, FLOP_LENGTH = 8, 64  # the build report's sentences: 8 of 64 source and 64 target tokens

Sizes = dict[str, int]
_NAME = re.compile(r"[A-Za-z_]\w*")


class UncountedError(ValueError):
    """A matrix product whose operands' shapes the lowering did not record."""


def _number(dim: Any, sizes: Sizes) -> int | None:
    """A symbolic dimension's value: an int, a size name, or a sum of products of them (`cache_len + 1`)."""
    if isinstance(dim, int):
        return dim
    total = 0
    for term in str(dim).split(" + "):
        product = 1
        for factor in term.split("*"):
            factor = factor.strip()
            if factor.isdigit():
                product *= int(factor)
            elif factor in sizes:
                product *= sizes[factor]
            else:
                return None
        total += product
    return total


def _shape(node: Any, sizes: Sizes) -> tuple[int, ...] | None:
    """A node's shape in numbers. A size name first seen on this node (a unit's `tokens`) is bound to what
    the node's op gives (flatten: `batch*seq_len`)."""
    shape = node.meta.get("shape") if isinstance(node, fx.Node) else None
    if shape is None:
        return None
    got = [_number(d, sizes) for d in shape]
    if None in got:
        derived = infer(node) if node.op in ("call_function", "call_method") else None
        if derived is None or len(derived) != len(shape):
            return None
        for i, (name, value) in enumerate(zip(shape, derived)):
            if got[i] is None and isinstance(name, str) and _NAME.fullmatch(name):
                got[i] = sizes[name] = _number(value, sizes)
        if None in got:
            return None
    return tuple(got)


def _bind(unit: Unit, method: str, shapes: list[tuple[int, ...] | None]) -> Sizes:
    """The callee's size names bound to the numbers of the caller's arguments' shapes."""
    sizes: Sizes = {}
    placeholders = [n for n in unit.methods[method].graph.nodes if n.op == "placeholder"]
    for node, shape in zip(placeholders, shapes):
        named = node.meta.get("shape")
        if named is None or shape is None or len(named) != len(shape):
            continue
        for name, value in zip(named, shape):
            if isinstance(name, str) and _NAME.fullmatch(name):
                sizes.setdefault(name, value)
    return sizes


def _needed(node: fx.Node, *shapes: tuple[int, ...] | None) -> None:
    if any(s is None for s in shapes):
        raise UncountedError(f"{node.format_node()}: a matrix product without its operands' shapes")


class _Counter:
    """Forward matrix-product FLOPs of units' methods, memoised by (unit, method, sizes)."""

    def __init__(self):
        self.memo: dict[tuple, int] = {}

    def method(self, unit: Unit, name: str, sizes: Sizes) -> int:
        key = (id(unit), name, tuple(sorted(sizes.items())))
        if key not in self.memo:
            sizes = dict(sizes)  # a name bound inside the body stays inside it
            self.memo[key] = sum(self.node(unit, node, sizes) for node in unit.methods[name].graph.nodes)
        return self.memo[key]

    def call(self, unit: Unit, name: str, args: tuple, sizes: Sizes) -> int:
        return self.method(unit, name, _bind(unit, name, [_shape(a, sizes) for a in args]))

    def node(self, unit: Unit, node: fx.Node, sizes: Sizes) -> int:
        if node.op == "call_module":
            member = unit.members[node.target]
            if isinstance(member, Unit):
                return self.call(member, "forward", node.args, sizes)
            return self.leaf(member, node, sizes)
        if node.op == "call_method" and isinstance(node.args[0], fx.Node) and node.args[0].op == "get_attr":
            member = unit.members.get(node.args[0].target)
            return self.call(member, node.target, node.args[1:], sizes) if isinstance(member, Unit) else 0
        if node.op != "call_function":
            return 0
        if node.target in loops.LOOPS:
            return self.loop(unit, node, sizes)
        if node.target is ops.mix_experts:
            return self.experts(unit, node, sizes)
        return _product(node, sizes)

    def leaf(self, leaf: Leaf, node: fx.Node, sizes: Sizes) -> int:
        if leaf.kind != "Linear":
            return 0
        x = _shape(node.args[0], sizes)
        _needed(node, x)
        return 2 * math.prod(x[:-1]) * leaf.args[0] * leaf.args[1]

    def loop(self, unit: Unit, node: fx.Node, sizes: Sizes) -> int:
        """A stack's layers: each layer's body with the loop's inputs (a decoding step's caches aside)."""
        layers: UnitList = unit.members[node.args[0].target]
        method = {loops.each_layer: "forward", loops.each_layer_step: "step",
                  loops.each_layer_cache: "init_cache"}[node.target]
        args = node.args[1:]
        if node.target is loops.each_layer_step:  # (x, caches, *inputs): each layer gets its own cache
            args = (args[0], None, *args[2:])
        sets = node.kwargs.get("share") or range(len(layers.units))  # a shared set computes once per layer using it
        return sum(self.call(layers.units[s], method, args, sizes) for s in sets)

    def experts(self, unit: Unit, node: fx.Node, sizes: Sizes) -> int:
        """ops.mix_experts(experts, tokens, weights, chosen): each of N tokens runs its top_k experts."""
        layers: UnitList = unit.members[node.args[0].target]
        tokens, weights = _shape(node.args[1], sizes), _shape(node.args[2], sizes)
        _needed(node, tokens, weights)
        (expert,) = set(layers.units)  # every expert is one unit
        return weights[-1] * self.method(expert, "forward", _bind(expert, "forward", [(tokens[0], 1, tokens[1])]))


def _product(node: fx.Node, sizes: Sizes) -> int:
    """Forward FLOPs of one call_function node: its matrix products (0 for any other op)."""
    target = node.target
    if target is F.linear:
        x, w = _shape(node.args[0], sizes), _shape(node.args[1], sizes)
        _needed(node, x, w)
        return 2 * math.prod(x[:-1]) * w[0] * w[1]
    if target is torch.matmul:
        a, out = _shape(node.args[0], sizes), _shape(node, sizes)
        _needed(node, a, out)
        return 2 * math.prod(out) * a[-1]
    if target is torch.einsum:
        return _einsum(node, sizes)
    if target in (F.scaled_dot_product_attention, ops.flex_attend):
        q, k, v = (_shape(a, sizes) for a in node.args[:3])
        _needed(node, q, k, v)
        return 2 * math.prod(q[:-1]) * k[-2] * (q[-1] + v[-1])
    return 0


def _einsum(node: fx.Node, sizes: Sizes) -> int:
    """Twice the product of every size an einsum names, once each (output and contracted)."""
    equation, *operands = node.args
    letters: dict[str, int] = {}
    for names, operand in zip(equation.split("->")[0].split(","), operands):
        shape = _shape(operand, sizes)
        _needed(node, shape)
        for letter, d in zip(names, shape):
            letters[letter] = max(letters.get(letter, 1), d)  # a size of 1 broadcasts
    return 2 * math.prod(letters.values())


def forward_flops(root: Unit, batch: int, src_len: int, tgt_len: int) -> int:
    """Matrix-product FLOPs of one `forward` of the model unit `root`."""
    return _Counter().method(root, "forward", {"batch": batch, "src_len": src_len, "tgt_len": tgt_len})


def output_tokens(root: Unit, batch: int, src_len: int, tgt_len: int) -> int:
    """How many tokens `forward` predicts: the logits' rows (target tokens; an encoder-only model's input)."""
    (out,) = [n for n in root.methods["forward"].graph.nodes if n.op == "output"]
    return math.prod(_shape(out.args[0], {"batch": batch, "src_len": src_len, "tgt_len": tgt_len})[:-1])


def training_flops(model: CompiledModel, batch: int = FLOP_BATCH, src_len: int = FLOP_LENGTH,
                   tgt_len: int = FLOP_LENGTH) -> float:
    """Forward and backward FLOPs of one training step per target token (the build report's figure), for
    `batch` sentences of `src_len` source and `tgt_len` target tokens."""
    root = model.program
    return 3 * forward_flops(root, batch, src_len, tgt_len) / output_tokens(root, batch, src_len, tgt_len)


def counted_on_meta(model: CompiledModel, batch: int = FLOP_BATCH, src_len: int = FLOP_LENGTH,
                    tgt_len: int = FLOP_LENGTH) -> float:
    """What training_flops counts, measured instead: torch's FlopCounterMode over the forward and backward
    on meta tensors (seconds, growing with the layers: the tests' reference, never the report's figure)."""
    if not next(model.parameters()).is_meta:
        raise ValueError("counted_on_meta expects a model built on the meta device")
    src = torch.full((batch, src_len), 5, dtype=torch.long, device="meta")
    tgt = torch.full((batch, tgt_len), 5, dtype=torch.long, device="meta")
    with FlopCounterMode(display=False) as counter:
        out = model(*family_of(model.spec.model).forward_inputs(src, tgt))
        out.float().sum().backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / math.prod(out.shape[:-1])


__all__ = ["FLOP_BATCH", "FLOP_LENGTH", "UncountedError", "counted_on_meta", "forward_flops", "output_tokens",
           "training_flops"]
