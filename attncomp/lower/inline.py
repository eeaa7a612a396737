"""The inlining pass: an entry point's graph with every unit call replaced by the callee's body.

Units keep their calls (a layer body is lowered, optimised and printed once); a whole-model view —
one flat graph per entry point, every layer unrolled, as torch.fx's own tracer would give — is made
on demand, as MLIR's Toy tutorial inlines only when asked. The build report's counts, tests that
look at a whole entry point, and passes run on a whole program use it.

    call_module(child)              -> the child's forward graph, its members' paths prefixed
    call_method(child, name)        -> the child's method graph
    loops.each_layer(_step, _cache) -> the layer's body once per layer, `layers.<i>.` prefixed (with `share`,
                                       `layers.<s>.`, s the layer's parameter set; with `depth_lambda`, its
                                       depth's lambda_init a number)
    getitem of a tuple an inlined body returned -> that element (no node)
"""

from __future__ import annotations

import operator
from typing import Any

from torch import fx

from attncomp.lower import loops, ops
from attncomp.lower.units import Unit, UnitList


class _Inliner:
    def __init__(self):
        self.graph = fx.Graph()

    def body(self, unit: Unit, method: str, args: list[Any], prefix: str) -> Any:
        """Copy unit.method's graph into self.graph with its placeholders bound to `args`; its output."""
        values: dict[fx.Node, Any] = {}
        placeholders = [n for n in unit.methods[method].graph.nodes if n.op == "placeholder"]
        for i, node in enumerate(placeholders):
            values[node] = args[i] if i < len(args) else node.args[0] if node.args else None
        for node in unit.methods[method].graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                return fx.node.map_arg(node.args[0], lambda n: values[n])
            values[node] = self.node(unit, node, values, prefix)
        raise AssertionError("a graph without output")

    def node(self, unit: Unit, node: fx.Node, values: dict, prefix: str) -> Any:
        args = fx.node.map_arg(node.args, lambda n: values[n])
        kwargs = fx.node.map_arg(node.kwargs, lambda n: values[n])
        if node.op == "get_attr":
            member = unit.members.get(node.target)
            if isinstance(member, (Unit, UnitList)):
                return (member, prefix + node.target)  # a child, for the call that follows
            target = node.target if node.target == "training" else prefix + node.target
            return self._copy(node, self.graph.get_attr(target))
        if node.op == "call_module":
            member = unit.members[node.target]
            if isinstance(member, Unit):
                return self.body(member, "forward", list(args), f"{prefix}{node.target}.")
            return self._copy(node, self.graph.call_module(prefix + node.target, args, kwargs))
        if node.op == "call_method" and isinstance(args[0], tuple) and isinstance(args[0][0], Unit):
            child, path = args[0]
            return self.body(child, node.target, list(args[1:]), f"{path}.")
        if node.op == "call_function" and node.target in loops.LOOPS:
            return self.loop(node.target, args, kwargs)
        if node.op == "call_function" and node.target is operator.getitem and isinstance(args[0], (tuple, list)):
            return args[0][args[1]]
        made = self.graph.create_node(node.op, node.target, args, kwargs)
        return self._copy(node, made)

    def loop(self, fn, args: tuple, joins: dict) -> Any:
        (layers, path), *rest = args
        sets = joins.get("share") or range(len(layers.units))  # each layer's parameter set: its module's index
        units = [layers.units[s] for s in sets]
        if fn is loops.each_layer:
            x, *inputs = rest
            x0, outputs, first = x, [], [None] if joins.get("value_residual") else []
            n, kv = joins.get("share_kv"), []
            for i, layer in enumerate(units):
                x = self._joined(i, len(units), x, x0, outputs, joins)
                reads = n is not None and i % n != 0
                x = self.body(layer, "forward", [x, *inputs, *_depth(i, joins), *first, *(kv if reads else ())],
                              f"{path}.{sets[i]}.")
                if first:
                    x, first[0] = x
                elif n is not None and not reads:
                    x, *kv = x
                outputs.append(x)
            return x
        if fn is loops.each_layer_step:
            x, caches, *inputs = rest
            x0, outputs, new, first = x, [], [], [None] if joins.get("value_residual") else []
            n, kv = joins.get("share_kv"), []
            for i, layer in enumerate(units):
                cache = caches[i] if isinstance(caches, (tuple, list)) else \
                    self.graph.call_function(operator.getitem, (caches, i))
                x = self._joined(i, len(units), x, x0, outputs, joins)
                reads = n is not None and i % n != 0
                x, cache, *first = self.body(layer, "step", [x, cache, *inputs, *_depth(i, joins), *first,
                                                             *(kv if reads else ())], f"{path}.{sets[i]}.")
                if n is not None and not reads:
                    own = self.graph.call_function(getattr, (cache, "self_attn"))
                    kv = [self.graph.call_function(getattr, (own, "k")), self.graph.call_function(getattr, (own, "v"))]
                outputs.append(x)
                new.append(cache)
            return x, tuple(new)
        return tuple(self.body(layer, "init_cache", list(rest), f"{path}.{sets[i]}.") for i, layer in enumerate(units))

    def _joined(self, i: int, layers: int, x: Any, x0: Any, outputs: list, joins: dict) -> Any:
        """Layer i's input with the connections across layers (ops.joined), where the loop has them."""
        if not any(joins.get(k) is not None for k in ("unet", "x_weights")):
            return x
        args = (i, layers, x, x0, list(outputs), joins.get("unet"), joins.get("x_weights"), joins.get("x0_weights"))
        joined = self.graph.call_function(ops.joined, args)
        joined.meta.update({"var": "x", "shape": getattr(x, "meta", {}).get("shape")})
        return joined

    @staticmethod
    def _copy(old: fx.Node, new: fx.Node) -> fx.Node:
        new.meta.update({k: v for k, v in old.meta.items() if k in ("var", "shape", "value")})
        return new


def _depth(i: int, joins: dict) -> list:
    """Layer i's lambda_init where the loop hands each layer its depth's (`depth_lambda`): a number in the flat
    graph."""
    return [ops.lambda_init(i)] if joins.get("depth_lambda") else []


def inline(root: Unit, method: str) -> fx.Graph:
    """The flat graph of root.method: every unit call inlined, every layer unrolled (values a body
    computed and its caller dropped stay; run eliminate_dead_code on the GraphModule to drop them)."""
    inliner = _Inliner()
    inputs = [inliner.graph.placeholder(n.target) for n in root.methods[method].graph.nodes if n.op == "placeholder"]
    out = inliner.body(root, method, inputs, "")
    inliner.graph.output(out)
    inliner.graph.lint()
    return inliner.graph
