"""The Printer: a unit's graphs -> the Python source of its class, for the generated module.

Each method of a unit is printed statement by statement from its fx.Graph, in graph order:

- a value takes the name the lowering gave it (`q`, `scores`, `weights`; node.meta["var"]), or, where a
  pass made it, the name of what it replaced; a name is reused once its old value is dead, so the code
  reads `x = self.norm(x)`, and gets a number (`k2`) only while the old value is still needed;
- members are read as attributes (`self.q_proj.weight`, `self.training`), never bound to temporaries;
- a call whose result is taken apart by index is printed as one unpacking (`out, k, v = ...`);
- the loops over a stack's layers (attncomp.lower.loops) are printed as `for` loops;
- constants are written as the lowering wrote them (`1 / math.sqrt(64)`);
- each statement carries its value's symbolic shape as a comment where the line has room.

No line is longer than WIDTH: long calls are broken after the opening parenthesis.
"""

from __future__ import annotations

import builtins
import inspect
import keyword
import math
import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx

from attncomp.lower import loops, ops
from attncomp.lower.cache import CACHE_TYPES
from attncomp.lower.units import Const, Unit

WIDTH = 120
INDENT = "        "  # a statement in a method body
BINARY = {torch.add: "+", operator.add: "+", torch.sub: "-", operator.sub: "-", torch.mul: "*", operator.mul: "*",
          torch.div: "/", operator.truediv: "/", torch.matmul: "@", operator.matmul: "@"}
CHAINED = {torch.transpose: "transpose", torch.flatten: "flatten", torch.unflatten: "unflatten",
           torch.unsqueeze: "unsqueeze"}  # shape changes written as a method chain on the value they reshape
MADE_BY_PASSES = {ops.attend: "mask", ops.additive_mask: "mask"}  # names of values passes make
RESERVED = {"self", "torch", "F", "nn", "math", "ops", "Tensor", *dir(builtins), *keyword.kwlist,
            *(t.__name__ for t in CACHE_TYPES)}


class PrintError(ValueError):
    """A graph the printer cannot write as Python (an internal error of the compiler)."""


@dataclass
class CallText:
    """A call expression, kept apart so a long one can be broken over lines."""

    head: str
    args: list[str]

    def __str__(self) -> str:
        return f"{self.head}({', '.join(self.args)})"


def constant(value: Any) -> str:
    """A literal argument as Python source."""
    if isinstance(value, Const):
        return value.text
    if isinstance(value, float):
        if math.isinf(value):
            return "math.inf" if value > 0 else "-math.inf"
        if math.isnan(value):
            raise PrintError("a NaN constant")
        return repr(value)
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return repr(value)
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, slice):
        parts = ["" if p is None else constant(p) for p in (value.start, value.stop)]
        return ":".join(parts) + ("" if value.step is None else f":{constant(value.step)}")
    raise PrintError(f"cannot write the constant {value!r}")


def _is_helper(fn: Any) -> bool:
    """A function attncomp.lower.ops names (defined there, or, as softcap, below the compiler and named there)."""
    return getattr(ops, fn.__name__, None) is fn


def function_name(fn: Any) -> str:
    """How the generated module names a function the graphs call."""
    name = getattr(fn, "__name__", None)
    if name and getattr(F, name, None) is fn:
        return f"F.{name}"
    if name and getattr(torch, name, None) is fn:
        return f"torch.{name}"
    if inspect.isfunction(fn) and _is_helper(fn):
        return f"ops.{name}"
    if fn in CACHE_TYPES:
        return fn.__name__
    raise PrintError(f"the graphs call {fn!r}, which the generated module cannot name")


def helpers_called(units: list[Unit]) -> list[Any]:
    """The functions of attncomp.lower.ops the units' graphs call, in the order of ops.py (each calls no
    other helper: the generated module holds them as static methods)."""
    nodes = [node for unit in units for method in unit.methods.values() for node in method.graph.nodes
             if node.op == "call_function"]
    used = {node.target for node in nodes if inspect.isfunction(node.target) and _is_helper(node.target)}
    if any(node.target in loops.LOOPS and any(node.kwargs.get(k) is not None for k in ("unet", "x_weights"))
           for node in nodes):  # connections across layers
        used.add(ops.joined)
    if any(node.target in loops.LOOPS and node.kwargs.get("depth_lambda") for node in nodes):
        used.add(ops.lambda_init)  # each layer's lambda_init by its depth
    return [fn for fn in vars(ops).values() if inspect.isfunction(fn) and fn in used]


class Printer:
    """Prints the methods of one unit (see the module docstring)."""

    def __init__(self, unit: Unit):
        self.unit = unit

    def method(self, name: str) -> list[str]:
        """The method's lines, indented for a class body."""
        graph = self.unit.methods[name].graph
        self.nodes = list(graph.nodes)
        self.position = {node: i for i, node in enumerate(self.nodes)}
        self.names: dict[fx.Node, str] = {}
        self.bound: dict[str, fx.Node | None] = {}
        self.lines: list[str] = []
        self.folded: list[fx.Node] = []  # values printed inside the statement that reads them
        params = []
        for node in self.nodes:
            if node.op != "placeholder":
                continue
            self._bind(node, node.target)
            default = node.args[0] if node.args else inspect.Signature.empty
            params.append(node.target if default is inspect.Signature.empty else f"{node.target}={constant(default)}")
        head = f"    def {name}(self, {', '.join(params)}):" if params else f"    def {name}(self):"
        for node in self.nodes:
            if node.op == "placeholder" or node in self.names or self._inline(node):
                continue
            if self._foldable(node):
                self.folded.append(node)
            elif node.op == "output":
                self._emit("return", node)
            else:
                self.statement(node)
        return [head, *self.lines]

    def _foldable(self, node: fx.Node) -> bool:
        """A call read once, by the statement right after it, is written inside that statement
        (`hidden = torch.relu(self.fc1(x))`), one call deep, and never into a loop or an unpacking."""
        users = list(node.users)
        if len(users) != 1 or node.op not in ("call_module", "call_method", "call_function") or \
                node.target in BINARY or node.target in CHAINED or self._parts(node) is not None or \
                (node.target in loops.LOOPS and node.target is not loops.each_layer_cache):
            return False
        (user,) = users
        if user.op != "output" and any(arg in self.folded for arg in node.all_input_nodes):
            return False
        if user.op == "call_function" and (user.target in loops.LOOPS or user.target is operator.getitem):
            return False
        while node.op == "call_module" and self._inline(user) and len(user.users) == 1:
            (user,) = user.users  # a projection read through a chain: `self.k_proj(x).unflatten(...)`
        following = next(n for n in self.nodes[self.position[node] + 1:] if not self._inline(n))
        return following is user

    # values

    def value(self, arg: Any) -> str:
        if isinstance(arg, fx.Node):
            if arg in self.names:
                return self.names[arg]
            if self._inline(arg) or arg in self.folded:
                return str(self.expression(arg))
            raise PrintError(f"{arg.name} is read before it is computed")
        if isinstance(arg, (tuple, list)):
            items = [self.value(a) for a in arg]
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        return constant(arg)

    def _inline(self, node: fx.Node) -> bool:
        """Members and fields are read where they are used: `self.q_proj.weight`, `cache.self_attn`; a
        value whose one reader reshapes it under the same name is written in that reader's chain:
        `k = k.unflatten(-1, (8, 64)).transpose(1, 2)`."""
        if node.op == "get_attr" or (node.op == "call_function" and node.target is getattr):
            return True
        if node.op == "call_function" and node.target is operator.getitem and isinstance(node.args[1], int) \
                and isinstance(node.args[0], fx.Node) and self._inline(node.args[0]):
            return True  # cache.layers[0]
        users = list(node.users)
        if node.op == "call_function" and node.target in CACHE_TYPES and len(users) == 1 \
                and users[0].op == "call_function" and users[0].target in CACHE_TYPES:
            return True  # LayerCache(KV(k, v), ...)
        return (len(users) == 1 and users[0].op == "call_function" and users[0].target in CHAINED
                and node.op == "call_function" and node.target in CHAINED
                and users[0].args[0] is node and _var(users[0]) == _var(node)
                and self._parts(node) is None)

    def _arguments(self, node: fx.Node, skip: int = 0) -> list[str]:
        args = [self.value(a) for a in node.args[skip:]]
        return args + [f"{k}={self.value(v)}" for k, v in node.kwargs.items()]

    def expression(self, node: fx.Node) -> str | CallText:
        if node.op == "get_attr":
            return f"self.{node.target}"
        if node.op == "call_module":
            return CallText(f"self.{node.target}", self._arguments(node))
        if node.op == "call_method":
            owner = node.args[0]
            if isinstance(owner, fx.Node) and owner.op == "get_attr":  # a child unit's method
                return CallText(f"self.{owner.target}.{node.target}", self._arguments(node, 1))
            return CallText(f"{self.value(owner)}.{node.target}", self._arguments(node, 1))
        fn, args = node.target, node.args
        if fn is getattr:
            return f"{self.value(args[0])}.{args[1]}"
        if fn is operator.getitem:
            index = args[1]
            inside = ", ".join(self.value(i) if isinstance(i, fx.Node) else constant(i) for i in index) \
                if isinstance(index, tuple) else self.value(index)
            return f"{self.value(args[0])}[{inside}]"
        if fn in CHAINED and isinstance(args[0], fx.Node):
            return CallText(f"{self.value(args[0])}.{CHAINED[fn]}", self._arguments(node, 1))
        if fn in BINARY and len(args) == 2 and not node.kwargs:
            a, b = (f"({c.text})" if isinstance(c, Const) and not c.text.startswith("math.") else self.value(c)
                    for c in args)
            return f"{a} {BINARY[fn]} {b}"
        if fn is loops.each_layer_cache:
            inputs = ", ".join(self.value(a) for a in args[1:])
            sets = node.kwargs.get("share")
            layers = self.value(args[0]) if not sets else f"[{self.value(args[0])}[s] for s in {constant(sets)}]"
            return f"tuple(layer.init_cache({inputs}) for layer in {layers})"
        return CallText(function_name(fn), self._arguments(node))

    # statements

    def statement(self, node: fx.Node) -> None:
        if node.op == "call_function" and node.target is loops.each_layer:
            return self._loop(node)
        if node.op == "call_function" and node.target is loops.each_layer_step:
            return self._step_loop(node)
        self._emit(None, node)

    def _emit(self, target: str | None, node: fx.Node) -> None:
        """A statement computing `node` (`return ...` when target is "return"), the values folded into
        it written in place; where that makes the line too long, they are printed on lines of their own."""
        folded = [arg for arg in _reads(node) if arg in self.folded]
        if folded:
            text = self._line(target, node, check=True)
            if text is not None:
                self.folded = [n for n in self.folded if n not in folded]
                self.lines.extend(text)
                return
            self.folded = [n for n in self.folded if n not in folded]
            for arg in folded:
                self._emit(None, arg)
        self.lines.extend(self._line(target, node))

    def _line(self, target: str | None, node: fx.Node, check: bool = False) -> list[str] | None:
        if target == "return":
            value = node.args[0]
            text = ", ".join(self.value(v) for v in value) if isinstance(value, tuple) else self.value(value)
            line = f"{INDENT}return {text}"
            return None if check and len(line) > WIDTH else [line]
        expression = self.expression(node)
        parts = self._parts(node)
        if check:
            line = f"{INDENT}{_var(node)} = {expression}"
            if len(line) > WIDTH:
                return None
        if parts is not None:
            target = ", ".join(self._bind(part, _var(part), at=node) if part is not None else "_" for part in parts)
            return self._assign(target, expression, None)
        return self._assign(self._bind(node, _var(node)), expression, _shape(node))

    def _loop(self, node: fx.Node) -> None:
        """x through every layer: `for layer in self.layers: x = layer(x, ...)`; with connections across
        layers, each layer's input joined first (`x = ops.joined(i, ...)`) and each output kept."""
        layers, x, *inputs = node.args
        name = self._bind(node, _var(node))
        if self.value(x) != name:
            self.lines.append(f"{INDENT}{name} = {self.value(x)}")
        first = ["first_v"] if node.kwargs.get("value_residual") else []
        call = CallText("layer", [name, *(self.value(a) for a in inputs), *_depth(node), *first])
        joined = self._joins(node, name, layers)
        self._share(node)
        n = node.kwargs.get("share_kv")
        numbered = joined or n is not None or _depth(node)
        self.lines.append(f"{INDENT}for {'i, layer' if numbered else 'layer'} in "
                          f"{f'enumerate({self._layers(node)})' if numbered else self._layers(node)}:")
        self.lines.extend(joined)
        if n is not None:  # layer i computes keys and values where i % n == 0, the layers after it read them
            self.lines.append(f"{INDENT}    if i % {n} == 0:  # share_kv: this layer computes k, v")
            self.lines.extend(self._assign(f"{name}, *kv", call, None, INDENT + "        "))
            self.lines.append(f"{INDENT}    else:")
            call.args.append("*kv")
            self.lines.extend(self._assign(name, call, _shape(node), INDENT + "        "))
        else:
            self.lines.extend(self._assign(", ".join([name, *first]), call, None if first else _shape(node),
                                           INDENT + "    "))
        if joined:
            self.lines.append(f"{INDENT}    outputs.append({name})")

    def _joins(self, node: fx.Node, name: str, layers: fx.Node) -> list[str]:
        """The line joining layer i's input (ops.joined), after `x0, outputs = x, []` before the loop; none
        where the stack has no connections across layers."""
        if node.kwargs.get("value_residual"):
            self.lines.append(f"{INDENT}first_v = None  # the first layer's values, which every layer after reads")
        if node.kwargs.get("unet") is None and node.kwargs.get("x_weights") is None:
            return []
        self.lines.append(f"{INDENT}x0, outputs = {name}, []")
        count = len(node.kwargs["share"]) if node.kwargs.get("share") else f"len({self.value(layers)})"
        args = ["i", str(count), name, "x0", "outputs",
                *(self.value(node.kwargs.get(k)) for k in ("unet", "x_weights", "x0_weights"))]
        return self._assign(name, CallText("ops.joined", args), None, INDENT + "    ")

    def _step_loop(self, node: fx.Node) -> None:
        """One decoding step through every layer, each reading and returning its own cache."""
        layers, x, caches, *inputs = node.args
        parts = self._parts(node) or [None, None]
        stepped = self._bind(None, "stepped", at=node)
        self.lines.append(f"{INDENT}{stepped} = []")
        name = self._bind(parts[0], _var(parts[0]), at=node) if parts[0] is not None else "x"
        if self.value(x) != name:
            self.lines.append(f"{INDENT}{name} = {self.value(x)}")
        joined = self._joins(node, name, layers)
        self._share(node)
        n = node.kwargs.get("share_kv")
        pairs = f"zip({self._layers(node)}, {self.value(caches)})"
        numbered = joined or n is not None or _depth(node)
        self.lines.append(f"{INDENT}for i, (layer, cache) in enumerate({pairs}):" if numbered else
                          f"{INDENT}for layer, cache in {pairs}:")
        self.lines.extend(joined)
        first = ["first_v"] if node.kwargs.get("value_residual") else []
        call = CallText("layer.step", [name, "cache", *(self.value(a) for a in inputs), *_depth(node), *first])
        if n is not None:  # a layer that reads keys and values steps with its computing layer's new ones
            self.lines.append(f"{INDENT}    if i % {n} == 0:  # share_kv: this layer computes k, v")
            self.lines.extend(self._assign(f"{name}, cache", call, None, INDENT + "        "))
            self.lines.append(f"{INDENT}        kv = cache.self_attn")
            self.lines.append(f"{INDENT}    else:")
            call = CallText(call.head, [*call.args, "*kv"])
            self.lines.extend(self._assign(f"{name}, cache", call, None, INDENT + "        "))
        else:
            self.lines.extend(self._assign(", ".join([name, "cache", *first]), call, None, INDENT + "    "))
        if joined:
            self.lines.append(f"{INDENT}    outputs.append({name})")
        self.lines.append(f"{INDENT}    {stepped}.append(cache)")
        if parts[1] is not None:
            self.lines.append(f"{INDENT}{self._bind(parts[1], _var(parts[1]), at=node)} = tuple({stepped})")

    def _layers(self, node: fx.Node) -> str:
        """What a loop runs: `self.layers`, or with `share` each layer's parameter set, `self.layers[s]`."""
        layers = self.value(node.args[0])
        return layers if not node.kwargs.get("share") else f"[{layers}[s] for s in sets]"

    def _share(self, node: fx.Node) -> None:
        """Before a loop over shared parameter sets: `sets`, the set each layer runs."""
        if node.kwargs.get("share"):
            line = f"{INDENT}sets = {constant(node.kwargs['share'])}"
            comment = "  # share: layer i runs the parameter set self.layers[sets[i]]"
            self.lines.append(line + comment if len(line + comment) <= WIDTH else line)

    def _parts(self, node: fx.Node) -> list[fx.Node | None] | None:
        """The getitem users of a value taken apart by constant index, or None."""
        users = list(node.users)
        if not users or not all(u.op == "call_function" and u.target is operator.getitem
                                and isinstance(u.args[1], int) for u in users):
            return None
        by_index = {u.args[1]: u for u in users}
        if len(by_index) != len(users) or min(by_index) < 0:
            return None
        return [by_index.get(i) for i in range(max(by_index) + 1)]

    def _assign(self, target: str, expression: str | CallText, shape: str | None, indent: str = INDENT) -> list[str]:
        line = f"{indent}{target} = {expression}"
        comment = f"  # {shape}" if shape else ""
        if len(line) + len(comment) <= WIDTH:
            return [line + comment]
        if len(line) <= WIDTH or not isinstance(expression, CallText):
            return [line]
        lines, row = [f"{indent}{target} = {expression.head}("], indent + "    "  # break after the parenthesis
        for i, arg in enumerate(expression.args):
            piece = arg + (")" if i == len(expression.args) - 1 else ", ")
            if len(row + piece.rstrip()) > WIDTH and row.strip():
                lines.append(row.rstrip())
                row = indent + "    "
            row += piece
        return [*lines, row.rstrip()]

    # names

    def _bind(self, node: fx.Node | None, name: str, at: fx.Node | None = None) -> str:
        """A name for node's value (computed at `at`, by default the node itself): its own, unless that
        name holds a value still needed (then numbered)."""
        base, n, at = name, 1, at if at is not None else node
        while name in RESERVED or (name in self.bound and self._live(self.bound[name], at)):
            n += 1
            name = f"{base}{n}"
        self.bound[name] = node
        if node is not None:
            self.names[node] = name
        return name

    def _live(self, held: fx.Node | None, at: fx.Node | None) -> bool:
        """Whether `held` is read after `at` (by a statement after it, or by the output)."""
        if held is None or at is None:
            return True
        if self._parts(held) is not None:  # a taken-apart value lives on in its parts
            return False
        here = self.position[at]
        return any(self._read_at(user) > here for user in held.users if user is not at)

    def _read_at(self, node: fx.Node) -> int:
        """Where a value is read: an inlined one where its readers are."""
        if self._inline(node) and node.users:
            return max(self._read_at(user) for user in node.users)
        return self.position[node]


def _depth(loop: fx.Node) -> list[str]:
    """What a loop hands each layer after the inputs where it gives them their depth's lambda_init (depth_lambda)."""
    return ["ops.lambda_init(i)"] if loop.kwargs.get("depth_lambda") else []


def _reads(node: fx.Node) -> list[fx.Node]:
    """The values a statement reads, through the members, fields and chains written inside it."""
    found = []
    for arg in node.all_input_nodes:
        inline = arg.op == "get_attr" or (arg.op == "call_function" and (arg.target is getattr or arg.target in CHAINED
                                                                          or arg.target is operator.getitem))
        found += [arg, *(_reads(arg) if inline else ())]
    return found


def _var(node: fx.Node) -> str:
    """The name the lowering gave a value, or, for one a pass made, the name of the value it read."""
    if "var" in node.meta:
        return node.meta["var"]
    if node.op == "call_function" and node.target in MADE_BY_PASSES:
        return MADE_BY_PASSES[node.target]
    for arg in node.all_input_nodes:
        if arg.op != "get_attr" and "var" in arg.meta:
            return arg.meta["var"]
    return "y"


def _shape(node: fx.Node) -> str | None:
    shape = node.meta.get("shape")
    if not isinstance(shape, tuple) or not all(isinstance(d, (int, str)) for d in shape):
        return None
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
