"""Symbolic shapes of the values a lowering emits: `(batch, src_len, 512)`.

The lowering knows every size when it emits a node: the inputs' sizes are named (`batch`,
`src_len`, `tgt_len`, `cache_len`) and the rest follow from the op. Each op the lowering or a pass
emits has a rule here (a table, one small function per op), `infer` applies it, and the result is
kept in `node.meta["shape"]`: a tuple of dimensions, each an int or a size name (or a sum such as
`cache_len + 1`). Codegen prints them as shape comments; nothing runs to find them.

A node whose op has no rule gets no shape (`None`), and a rule that cannot tell gives None too: a
comment is left out rather than guessed.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import fx

from attncomp.lower import ops

Dim = int | str
Shape = tuple[Dim, ...]


def dim_text(dim: Dim) -> str:
    return str(dim)


def _size(x: Any) -> Dim | None:
    """The value of a size: an int, or the name the `size` node carries."""
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    if isinstance(x, fx.Node):
        return x.meta.get("value")
    return None


def _shape(x: Any) -> Shape | None:
    return x.meta.get("shape") if isinstance(x, fx.Node) else None


def add_dims(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if b == 0:
        return a
    if a == 0:
        return b
    return f"{a} + {b}"


def mul_dims(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return f"{a}*{b}"


def broadcast(*shapes: Shape | None) -> Shape | None:
    present = [s for s in shapes if s is not None]
    if len(present) != len(shapes) or not present:
        return None
    rank = max(len(s) for s in present)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in present if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _dim(shape: Shape, d: int) -> int:
    return d % len(shape)


# --- the rules: (args, kwargs) -> shape or None -------------------------------------------------------


def _same(args, kwargs) -> Shape | None:
    return _shape(args[0])


def _elementwise(args, kwargs) -> Shape | None:
    return broadcast(*(_shape(a) if isinstance(a, fx.Node) else () for a in args[:2]))


def _linear(args, kwargs) -> Shape | None:
    x, w = _shape(args[0]), _shape(args[1])
    return None if x is None or w is None else x[:-1] + (w[0],)


def _unflatten(args, kwargs) -> Shape | None:
    x, d, sizes = _shape(args[0]), args[1], args[2]
    if x is None:
        return None
    d = _dim(x, d)
    return x[:d] + tuple(sizes) + x[d + 1 :]


def _transpose(args, kwargs) -> Shape | None:
    x = _shape(args[0])
    if x is None:
        return None
    a, b = _dim(x, args[1]), _dim(x, args[2])
    out = list(x)
    out[a], out[b] = out[b], out[a]
    return tuple(out)


def _flatten(args, kwargs) -> Shape | None:
    x = _shape(args[0])
    if x is None:
        return None
    start = _dim(x, args[1] if len(args) > 1 else kwargs.get("start_dim", 0))
    end = _dim(x, args[2] if len(args) > 2 else kwargs.get("end_dim", -1))
    merged: Dim = 1
    for d in x[start : end + 1]:
        merged = mul_dims(merged, d) if merged != 1 else d
    return x[:start] + (merged,) + x[end + 1 :]


def _matmul(args, kwargs) -> Shape | None:
    a, b = _shape(args[0]), _shape(args[1])
    if a is None or b is None:
        return None
    batch = broadcast(a[:-2], b[:-2])
    return None if batch is None else batch + (a[-2], b[-1])


def _sdpa(args, kwargs) -> Shape | None:
    q, v = _shape(args[0]), _shape(args[2])
    return None if q is None or v is None else q[:-1] + (v[-1],)


def _cat(args, kwargs) -> Shape | None:
    parts = [_shape(t) for t in args[0]]
    if any(p is None for p in parts):
        return None
    d = _dim(parts[0], args[1] if len(args) > 1 else kwargs.get("dim", 0))
    total: Dim = 0
    for p in parts:
        total = add_dims(total, p[d])
    return parts[0][:d] + (total,) + parts[0][d + 1 :]


def _embedding_module(dim: int) -> Callable:
    return lambda args, kwargs: None if _shape(args[0]) is None else _shape(args[0]) + (dim,)


def _padding_mask(args, kwargs) -> Shape | None:
    x = _shape(args[0])
    return None if x is None else (x[0], 1, 1, x[1])


def _square(args, kwargs) -> Shape | None:
    n = _size(args[0])
    return None if n is None else (n, n)


def _prefix_mask(args, kwargs) -> Shape | None:
    n = _size(args[0])
    return None if n is None else (n, n) if args[1] is None else ("batch", 1, n, n)


def _either(args, kwargs) -> Shape | None:
    return broadcast(*(_shape(a) for a in args if a is not None)) if args[1] is not None else _shape(args[0])


def _rows(args, kwargs) -> Shape | None:
    x = _shape(args[0])
    return None if x is None else x[:-1] + (1,)


def _arange(args, kwargs) -> Shape | None:
    start, end = _size(args[0]), _size(args[1]) if len(args) > 1 else None
    if len(args) == 1:
        return None if start is None else (start,)
    if start == 0 or args[0] == 0:
        return None if end is None else (end,)
    length = _size(args[1].args[1]) if isinstance(args[1], fx.Node) and args[1].target is operator.add else None
    return None if length is None else (length,)


def _table(width_arg: int) -> Callable:
    return lambda args, kwargs: None if _shape(args[0]) is None else (_shape(args[0])[0], args[width_arg])


def _rope_table(args, kwargs) -> Shape | None:
    pos = _shape(args[0])
    return None if pos is None else (2, pos[0], args[1])


def _alibi(args, kwargs) -> Shape | None:
    q, k = _size(args[1]), _size(args[2])
    return None if q is None or k is None else (args[0], q, k)


def _relative_positions(args, kwargs) -> Shape | None:
    q, k = _size(args[0]), _size(args[1])
    return None if q is None or k is None else (q, k)


def _bucket_bias(args, kwargs) -> Shape | None:
    table = _shape(args[0])
    return None if table is None else (table[2], table[0], table[1])


def _repeat(args, kwargs) -> Shape | None:
    x = _shape(args[0])
    if x is None:
        return None
    out = list(x)
    d = _dim(x, args[2])
    out[d] = mul_dims(x[d], args[1])
    return tuple(out)


def _select(args, kwargs) -> Shape | None:
    x = _shape(args[0])
    return None if x is None else x[: _dim(x, args[1])] + x[_dim(x, args[1]) + 1 :]


def _unsqueeze(args, kwargs) -> Shape | None:
    x = _shape(args[0])
    if x is None:
        return None
    d = args[1] % (len(x) + 1)
    return x[:d] + (1,) + x[d:]


def _squeeze(args, kwargs) -> Shape | None:
    x = _shape(args[0])
    if x is None or len(args) < 2 or x[_dim(x, args[1])] != 1:
        return None
    return x[: _dim(x, args[1])] + x[_dim(x, args[1]) + 1 :]


def _expand(args, kwargs) -> Shape | None:
    x, sizes = _shape(args[0]), [_size(d) if d != -1 else -1 for d in args[1:]]
    if x is None or len(sizes) != len(x) or None in sizes:
        return None
    return tuple(d if size == -1 else size for d, size in zip(x, sizes))


def _new_zeros(args, kwargs) -> Shape | None:
    dims = tuple(_size(d) for d in args[1])
    return None if any(d is None for d in dims) else dims


def _einsum(args, kwargs) -> Shape | None:
    spec, *operands = args
    inputs, out = spec.split("->")
    letters: dict[str, Dim] = {}
    for names, operand in zip(inputs.split(","), operands):
        shape = _shape(operand)
        if shape is None:
            return None
        for letter, d in zip(names, shape):
            if letters.get(letter, 1) == 1:
                letters[letter] = d
    return tuple(letters[c] for c in out)


RULES: dict[Any, Callable[[tuple, dict], Shape | None]] = {
    torch.add: _elementwise, torch.mul: _elementwise, torch.sub: _elementwise, operator.add: _elementwise,
    torch.tanh: _same, torch.sigmoid: _same, torch.relu: _same, F.gelu: _same, F.silu: _same, torch.softmax: _same,
    F.dropout: _same, torch.masked_fill: _same, ops.hide: _same, ops.zero_rows: _same, ops.rotate: _same,
    torch.logical_not: _same, ops.attend: _same, torch.clamp: _same, torch.square: _same,
    F.linear: _linear, torch.unflatten: _unflatten, torch.transpose: _transpose, torch.flatten: _flatten,
    torch.matmul: _matmul, F.scaled_dot_product_attention: _sdpa, torch.cat: _cat,
    ops.padding_mask: _padding_mask, ops.causal_mask: _square, ops.band_mask: _square, ops.either: _either,
    ops.prefix_mask: _prefix_mask,
    ops.fully_masked_rows: _rows, torch.arange: _arange, ops.sinusoidal: _table(1),
    ops.sinusoidal_halves: _table(1), ops.rope_table: _rope_table, ops.scaled_rope_table: _rope_table,
    ops.alibi_bias: _alibi,
    ops.relative_positions: _relative_positions, ops.additive_mask: _elementwise,
    ops.bucket_index: _relative_positions, ops.bucket_bias: _bucket_bias, ops.softcap: _same,
    ops.sink_softmax: _same, ops.sigmoid_weights: _same, ops.flex_attend: _sdpa,
    torch.repeat_interleave: _repeat, torch.select: _select, torch.einsum: _einsum,
    torch.unsqueeze: _unsqueeze, torch.squeeze: _squeeze,
}
METHOD_RULES: dict[str, Callable[[tuple, dict], Shape | None]] = {"new_zeros": _new_zeros, "expand": _expand}


def _parts(node: fx.Node) -> list[Shape] | None:
    """The shapes of torch.split's pieces along the last dimension."""
    x, sizes = _shape(node.args[0]), node.args[1]
    if x is None or not isinstance(sizes, (tuple, list)) or node.args[2] not in (-1, len(x) - 1):
        return None
    return [x[:-1] + (size,) for size in sizes]


def infer(node: fx.Node) -> Shape | None:
    """The shape of a call node from its inputs' shapes, by the op's rule (None if it has none)."""
    if node.op == "call_function" and node.target is operator.getitem and isinstance(node.args[0], fx.Node):
        parts = node.args[0].meta.get("parts")
        return parts[node.args[1]] if parts is not None and isinstance(node.args[1], int) else None
    if node.op == "call_function" and node.target is torch.split:
        parts = _parts(node)
        if parts is not None:
            node.meta["parts"] = parts
        return None
    if node.op == "call_function":
        rule = RULES.get(node.target)
    elif node.op == "call_method":
        rule = METHOD_RULES.get(node.target)
    else:
        return None
    try:
        return rule(node.args, node.kwargs) if rule is not None else None
    except (IndexError, TypeError, ValueError, AttributeError):
        return None


def set_shape(node: fx.Node, shape: Shape | None = None) -> fx.Node:
    """Record `shape` (or the op's rule's shape) on the node."""
    shape = infer(node) if shape is None else shape
    if shape is not None:
        node.meta["shape"] = tuple(shape)
    return node


def describe(shape: Shape | None) -> str | None:
    return None if shape is None else "(" + ", ".join(dim_text(d) for d in shape) + ")"


__all__ = ["Dim", "Shape", "add_dims", "broadcast", "describe", "infer", "set_shape"]
