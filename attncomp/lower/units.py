"""Units: the kinds of module a compiled model is made of, each lowered once.

A `Unit` is one class of the compiled program — an attention, a feed-forward net, a layer, a stack,
the model itself — with its members (parameters, torch.nn leaf modules, child units, lists of child
units, in the order they are registered) and its methods, each an fx.Graph over the unit: a graph
reaches a member by its name relative to the unit (`q_proj`, `self_attn`) and calls a child unit with
`call_module` (its forward) or `call_method` (another method). Layers of one kind share one unit, so
a layer body is lowered, optimised and printed once, however many layers a stack has.

A `Builder` writes one method's graph: it emits the canonical spelling of each op (see
attncomp.lower.attention), declares the members it reads as it reads them (so the parameter plan is
written where the op is, once), names values after their meaning (`q`, `scores`, `weights`) and
records each value's symbolic shape (attncomp.lower.shapes).
"""

from __future__ import annotations

import inspect
import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch import fx, nn

from attncomp.lower.shapes import Shape, set_shape

Node = fx.Node


class Const(float):
    """A float constant that remembers how the paper writes it (`1 / math.sqrt(64)`), for codegen."""

    text: str

    def __new__(cls, value: float, text: str) -> "Const":
        made = super().__new__(cls, value)
        made.text = text
        return made

    def __reduce__(self):
        return Const, (float(self), self.text)

    def __deepcopy__(self, memo) -> "Const":
        return self


def sqrt_const(n: int) -> Const:
    return Const(math.sqrt(n), f"math.sqrt({n})")


def inv_sqrt_const(n: int) -> Const:
    return Const(1.0 / math.sqrt(n), f"1 / math.sqrt({n})")


# --- members ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    """A torch.nn module a unit owns: nn.Linear, nn.LayerNorm, nn.RMSNorm or nn.Embedding."""

    kind: str
    args: tuple
    kwargs: tuple = ()  # sorted (name, value) pairs

    def make(self) -> nn.Module:
        if self.kind == "Embedding" and torch.get_default_device().type == "meta":
            # on meta without the N(0, 1) fill, which imports torch._dynamo (seconds, once a process)
            return nn.Embedding(*self.args, _weight=torch.empty(*self.args))
        return getattr(nn, self.kind)(*self.args, **dict(self.kwargs))

    def source(self) -> str:
        """The constructor call as generated code writes it: `nn.Linear(512, 2048)`."""
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"nn.{self.kind}({', '.join(parts)})"

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The parameters it holds, by name."""
        if self.kind == "Linear":
            d_in, d_out = self.args
            return {"weight": (d_out, d_in), **({"bias": (d_out,)} if dict(self.kwargs).get("bias", True) else {})}
        if self.kind == "Embedding":
            return {"weight": tuple(self.args)}
        (dim,) = self.args
        if not dict(self.kwargs).get("elementwise_affine", True):
            return {}
        if self.kind == "LayerNorm":
            return {"weight": (dim,), "bias": (dim,)} if dict(self.kwargs).get("bias", True) else {"weight": (dim,)}
        return {"weight": (dim,)}


def linear(d_in: int, d_out: int, bias: bool) -> Leaf:
    return Leaf("Linear", (d_in, d_out), () if bias else (("bias", False),))


def norm(kind, dim: int, eps: float) -> Leaf:
    """nn.LayerNorm (Ba et al. 2016) or nn.RMSNorm (Zhang & Sennrich 2019) for a normalization of the IR
    (or its kind's name); eps only where not torch's default. RMSNorm with an offset gain is a unit of its
    own (attncomp.lower.norms)."""
    name = "RMSNorm" if getattr(kind, "kind", kind) == "rmsnorm" else "LayerNorm"
    kwargs = (("eps", eps),) if name == "RMSNorm" or eps != 1e-5 else ()
    if not getattr(kind, "gain", True):
        kwargs += (("elementwise_affine", False),)
    elif name == "LayerNorm" and not getattr(kind, "bias", True):
        kwargs += (("bias", False),)
    return Leaf(name, (dim,), tuple(sorted(kwargs)))


def embedding(rows: int, dim: int) -> Leaf:
    return Leaf("Embedding", (rows, dim))


@dataclass(frozen=True)
class Param:
    """A tensor a unit owns directly (not through a leaf module)."""

    shape: tuple[int, ...]
    init: str | float  # "zeros", "normal" (std 1/sqrt(the last dimension)), or a number every entry starts at


@dataclass(frozen=True)
class UnitList:
    """A stack's layers: an nn.ModuleList of units (one unit per layer kind, shared)."""

    units: tuple["Unit", ...]


@dataclass(eq=False)
class Method:
    graph: fx.Graph
    decoding: bool = False  # runs once per generated token (decode_step and what it calls)


@dataclass(eq=False)
class Unit:
    """One class of the compiled program (see the module docstring)."""

    name: str
    doc: str
    members: dict[str, Leaf | Param | Unit | UnitList] = field(default_factory=dict)
    methods: dict[str, Method] = field(default_factory=dict)
    init_gains: dict[str, float] = field(default_factory=dict)  # a Linear member's path -> a factor on its initial
    # weights (DeepNorm's beta on the projections of a sub-layer)

    def declare(self, name: str, member: Leaf | Param | Unit | UnitList) -> None:
        """Add a member, or check that the one of that name is the same."""
        known = self.members.get(name)
        if known is None:
            self.members[name] = member
        elif known is not member and known != member:
            raise ValueError(f"{self.name}.{name} declared twice differently: {known} and {member}")

    def __repr__(self) -> str:
        return f"Unit({self.name})"

    def reorder(self, names: tuple[str, ...]) -> None:
        """Register the members named (those it has) first, in this order: the state dict's order."""
        first = {name: self.members[name] for name in names if name in self.members}
        self.members = {**first, **{k: v for k, v in self.members.items() if k not in first}}

    def children(self) -> Iterator["Unit"]:
        for member in self.members.values():
            if isinstance(member, Unit):
                yield member
            elif isinstance(member, UnitList):
                yield from member.units

    def walk(self) -> list["Unit"]:
        """This unit and every unit below it, each once, children before parents."""
        seen: dict[int, Unit] = {}

        def visit(unit: Unit) -> None:
            if id(unit) in seen:
                return
            for child in unit.children():
                visit(child)
            seen[id(unit)] = unit

        visit(self)
        return list(seen.values())


# --- the builder ------------------------------------------------------------------------------------


class Builder:
    """One method of a unit under construction: an fx.Graph over the unit's members."""

    def __init__(self, unit: Unit, method: str, decoding: bool = False):
        self.unit, self.name = unit, method
        self.graph = fx.Graph()
        self.decoding = decoding
        self._training: Node | None = None

    # inputs and outputs

    def input(self, name: str, shape: Shape | None = None, default: Any = inspect.Signature.empty) -> Node:
        node = self.graph.placeholder(name, default_value=default)
        node.meta["var"] = name
        if shape is not None:
            node.meta["shape"] = tuple(shape)
        return node

    def output(self, value: Any) -> None:
        self.graph.output(value)
        self.unit.methods[self.name] = Method(self.graph, self.decoding)

    # ops

    def call(self, fn: Callable, *args: Any, name: str | None = None, shape: Shape | None = None,
             **kwargs: Any) -> Node:
        node = self.graph.create_node("call_function", fn, args, kwargs, name=name)
        return self._named(set_shape(node, shape), name)

    def method(self, method: str, *args: Any, name: str | None = None, shape: Shape | None = None,
               **kwargs: Any) -> Node:
        node = self.graph.create_node("call_method", method, args, kwargs, name=name)
        return self._named(set_shape(node, shape), name)

    def size(self, x: Node, dim: int, value: str | int | None = None) -> Node:
        """x.size(dim); `value` names it (`batch`, `src_len`), else it is read off x's shape."""
        shape = x.meta.get("shape")
        value = value if value is not None else (shape[dim] if shape is not None else None)
        node = self.method("size", x, dim, name=value if isinstance(value, str) else "length")
        node.meta["value"] = value
        return node

    def field(self, value: Node, attribute: str, shape: Shape | None = None) -> Node:
        """value.attribute (a field of a cache)."""
        return self.call(getattr, value, attribute, name=attribute, shape=shape)

    def item(self, value: Node, index: int, name: str, shape: Shape | None = None) -> Node:
        return self.call(operator.getitem, value, index, name=name, shape=shape)

    def add(self, x: Node, y: Node, name: str = "x") -> Node:
        return self.call(torch.add, x, y, name=name)

    def training(self) -> Node:
        if self._training is None:
            self._training = self.graph.get_attr("training")
        return self._training

    def dropout(self, x: Node, p: float, name: str | None = None) -> Node:
        if p == 0.0:
            return x
        return self.call(F.dropout, x, p=p, training=self.training(), name=name or x.meta.get("var", x.name),
                         shape=x.meta.get("shape"))

    # members

    def leaf(self, member: str, leaf: Leaf, x: Node, name: str | None = None) -> Node:
        """Call a leaf module the unit owns (declared here): nn.Linear, a norm, an embedding."""
        self.unit.declare(member, leaf)
        node = self.graph.call_module(member, (x,))
        shape = x.meta.get("shape")
        if shape is not None:
            node.meta["shape"] = shape + (leaf.args[1],) if leaf.kind == "Embedding" else \
                shape[:-1] + (leaf.args[1],) if leaf.kind == "Linear" else shape
        return self._named(node, name or member)

    def param(self, member: str, param: Param | None = None, name: str | None = None) -> Node:
        """A tensor the unit owns (`param` declares it), or a leaf's tensor (`embed.weight`)."""
        if param is not None:
            self.unit.declare(member, param)
        node = self.graph.get_attr(member)
        if param is not None:
            node.meta["shape"] = param.shape
        else:
            owner, _, tensor = member.rpartition(".")
            leaf = self.unit.members.get(owner)
            if isinstance(leaf, Leaf):
                node.meta["shape"] = leaf.shapes()[tensor]
        return self._named(node, name or member.replace(".", "_"))

    def sub(self, member: str, unit: "Unit", method: str, *args: Any, name: str | None = None,
            shape: Shape | None = None) -> Node:
        """Call a method of a child unit (declared here)."""
        self.unit.declare(member, unit)
        if method == "forward":
            node = self.graph.call_module(member, args)
        else:
            node = self.graph.call_method(method, (self.graph.get_attr(member), *args))
        if shape is not None:
            node.meta["shape"] = tuple(shape)
        return self._named(node, name or member)

    def layers(self, member: str, units: list["Unit"]) -> Node:
        """The stack's layers (an nn.ModuleList), for a loop over them."""
        self.unit.declare(member, UnitList(tuple(units)))
        return self._named(self.graph.get_attr(member), member)

    @staticmethod
    def _named(node: Node, name: str | None) -> Node:
        if name:
            node.meta["var"] = name
        return node
