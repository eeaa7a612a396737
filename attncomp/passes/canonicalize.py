"""canonicalize: rewrite the many spellings of attention's ops into the one the matchers know.

attncomp's own lowering already emits canonical spellings; this pass is for graphs from elsewhere
(symbolically traced hand-written modules), so that `fuse_attention` can fuse them too. The rules
are data: (what it matches, what it becomes), one small function each.

    q @ k, torch.bmm, Tensor.matmul/bmm             -> torch.matmul
    Tensor.transpose, x.transpose(-1, -2)          -> torch.transpose(x, -2, -1)
    Tensor.softmax, F.softmax, upcast softmax       -> torch.softmax(x, -1)
    x / c, torch.div(x, c), x * c, Tensor.mul       -> torch.mul(x, c)         (c a number)
    (q * c) @ k^T                                   -> torch.mul(q @ k^T, c)
    masked_fill(x, m, -inf or finite "minus inf")   -> ops.hide(x, m)
    masked_fill(w, fully_masked_rows(m), 0)         -> ops.zero_rows(w, m)
    x + y, Tensor.add                               -> torch.add(x, y)
    F.dropout(x, p, training), nn.Dropout module    -> F.dropout(x, p=p, training=t)
"""

from __future__ import annotations

import math
import operator
from numbers import Number
from typing import Callable

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.fx.passes.infra.pass_base import PassResult

from attncomp.lower import ops

MINUS_INFINITY_BELOW = -1e4  # masked_fill values at or below this hide a key as -inf does


def _is(node: fx.Node, targets: tuple, op: str = "call_function") -> bool:
    return node.op == op and node.target in targets


def _replace(node: fx.Node, target: Callable, args: tuple, kwargs: dict | None = None) -> None:
    with node.graph.inserting_before(node):
        new = node.graph.call_function(target, args, kwargs or {})
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)
    node.graph.erase_node(node)


def _arg(node: fx.Node, index: int, name: str, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


# --- the rules ----------------------------------------------------------------------------------


def matmul(node: fx.Node) -> bool:
    batched = _is(node, (torch.bmm,)) or _is(node, ("bmm",), "call_method")
    if not (batched or _is(node, (operator.matmul,)) or _is(node, ("matmul",), "call_method")):
        return False
    a, b = node.args[:2]
    if batched and isinstance(b, fx.Node) and _is(b, (torch.transpose,)) and tuple(b.args[1:]) == (1, 2):
        b.args = (b.args[0], -2, -1)  # bmm operands are 3-D: dims 1, 2 are the last two
    _replace(node, torch.matmul, (a, b))
    return True


def transpose(node: fx.Node) -> bool:
    if not (_is(node, ("transpose",), "call_method") or _is(node, (torch.transpose,))):
        return False
    x, a, b = node.args[0], _arg(node, 1, "dim0"), _arg(node, 2, "dim1")
    if (a, b) == (-1, -2):
        a, b = -2, -1
    if node.op == "call_function" and tuple(node.args) == (x, a, b) and not node.kwargs:
        return False
    _replace(node, torch.transpose, (x, a, b))
    return True


def _softmax_dim(node: fx.Node) -> int | None:
    dim = _arg(node, 1, "dim")
    meta = node.args[0].meta.get("tensor_meta") if isinstance(node.args[0], fx.Node) else None
    if isinstance(dim, int) and dim >= 0 and meta is not None and dim == len(meta.shape) - 1:
        return -1
    return dim


def softmax(node: fx.Node) -> bool:
    spelled = _is(node, (F.softmax, torch.softmax)) or _is(node, ("softmax",), "call_method")
    if not spelled:
        return False
    x, dim = node.args[0], _softmax_dim(node)
    upcast = isinstance(x, fx.Node) and _is(x, ("float",), "call_method") and len(x.users) == 1
    if upcast:
        x = x.args[0]
    if node.op == "call_function" and node.target is torch.softmax and node.args == (x, dim) and not node.kwargs:
        return False
    cast = node.args[0]
    _replace(node, torch.softmax, (x, dim))
    if upcast and not cast.users:
        cast.graph.erase_node(cast)
    return True


def drop_cast_back(node: fx.Node) -> bool:
    """softmax(x).type_as(x) / .to(dtype) after an upcast softmax: the cast goes with the upcast."""
    if not (_is(node, ("type_as", "to"), "call_method") and isinstance(node.args[0], fx.Node)):
        return False
    inner = node.args[0]
    if not (_is(inner, (torch.softmax,)) and len(inner.users) == 1):
        return False
    node.replace_all_uses_with(inner)
    node.graph.erase_node(node)
    return True


def scale(node: fx.Node) -> bool:
    """Division or multiplication by a number -> torch.mul(x, c)."""
    divides = _is(node, (operator.truediv, torch.div)) or _is(node, ("div",), "call_method")
    multiplies = _is(node, (operator.mul, torch.mul)) or _is(node, ("mul",), "call_method")
    if not (divides or multiplies) or len(node.args) != 2 or node.kwargs:
        return False
    x, c = node.args
    if multiplies and isinstance(x, Number) and isinstance(c, fx.Node):
        x, c = c, x
    if not isinstance(c, Number) or isinstance(c, bool) or not isinstance(x, fx.Node):
        return False
    if divides:
        _replace(node, torch.mul, (x, 1.0 / c))
        return True
    if node.target is torch.mul and node.args == (x, c):
        return False
    _replace(node, torch.mul, (x, c))
    return True


def scale_after_matmul(node: fx.Node) -> bool:
    """(q * c) @ k^T -> (q @ k^T) * c, so the scale sits where the attention matcher looks."""
    if not _is(node, (torch.matmul,)):
        return False
    q, kt = node.args[:2]
    if not (isinstance(q, fx.Node) and _is(q, (torch.mul,)) and len(q.users) == 1 and isinstance(q.args[1], Number)):
        return False
    if not (isinstance(kt, fx.Node) and _is(kt, (torch.transpose,))):
        return False
    c = q.args[1]
    with node.graph.inserting_after(node):
        scaled = node.graph.call_function(torch.mul, (node, c))
    node.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)
    node.args = (q.args[0], kt)
    node.graph.erase_node(q)
    return True


def masked_fill(node: fx.Node) -> bool:
    """masked_fill with "minus infinity" hides keys: ops.hide; with 0 where a row sees no key: ops.zero_rows."""
    if not (_is(node, (torch.masked_fill,)) or _is(node, ("masked_fill", "masked_fill_"), "call_method")):
        return False
    x, mask, value = node.args[0], _arg(node, 1, "mask"), _arg(node, 2, "value")
    if isinstance(value, Number) and value <= MINUS_INFINITY_BELOW:
        _replace(node, ops.hide, (x, mask))
        return True
    if value == 0 and isinstance(mask, fx.Node) and _is(mask, (ops.fully_masked_rows,)):
        _replace(node, ops.zero_rows, (x, mask.args[0]))
        return True
    if node.op == "call_function" and node.args == (x, mask, value) and not node.kwargs:
        return False
    _replace(node, torch.masked_fill, (x, mask, value))
    return True


def _size(node) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_method" and node.target == "size"


def add(node: fx.Node) -> bool:
    """Tensor sums as torch.add; a sum of sizes (decode_step's `cache length + new tokens`) is integer
    arithmetic and stays a Python sum, which torch.export and dynamic shapes keep symbolic."""
    if _is(node, (operator.add,)) or _is(node, ("add",), "call_method"):
        if any(_size(a) for a in node.args):
            return False
        if len(node.args) == 2 and not node.kwargs and all(isinstance(a, fx.Node) for a in node.args):
            _replace(node, torch.add, tuple(node.args))
            return True
    return False


def dropout(node: fx.Node) -> bool:
    module = node.graph.owning_module
    if node.op == "call_module" and isinstance(module.get_submodule(node.target), nn.Dropout):
        p = module.get_submodule(node.target).p
        with node.graph.inserting_before(node):
            training = node.graph.create_node("get_attr", "training")  # the module's own flag
        _replace(node, F.dropout, (node.args[0],), {"p": p, "training": training})
        return True
    if _is(node, (F.dropout,)) and (len(node.args) > 1 or "training" not in node.kwargs):
        p, training = _arg(node, 1, "p", 0.5), _arg(node, 2, "training", True)
        _replace(node, F.dropout, (node.args[0],), {"p": p, "training": training})
        return True
    return False


RULES: list[Callable[[fx.Node], bool]] = [
    matmul, transpose, softmax, drop_cast_back, scale, scale_after_matmul, masked_fill, add, dropout,
]


def _sweep(graph: fx.Graph) -> bool:
    for node in list(graph.nodes):
        if any(rule(node) for rule in RULES):
            return True
    return False


def canonicalize(gm: fx.GraphModule) -> PassResult:
    """Apply every rule until none applies."""
    modified = False
    while _sweep(gm.graph):  # a rule may erase nodes: start over after each rewrite
        modified = True
    if modified:
        gm.graph.lint()
        gm.recompile()
    return PassResult(gm, modified)
