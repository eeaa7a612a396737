"""Rewrite rules as data: a pattern and its replacement, both plain Python functions, traced once.

    def pattern(q, k, v, scale):      return torch.matmul(torch.softmax(torch.mul(q @ k^T, scale), -1), v)
    def replacement(q, k, v, scale):  return F.scaled_dot_product_attention(q, k, v, scale=scale)

A pattern matches a graph where its ops appear with the same targets and the same literal arguments,
each of its inner values read by nothing else (so the match can be replaced whole). Its parameters
bind to whatever the graph has there — a node or a literal (a scale is a number in the graph) — and
a parameter used twice must bind the same thing twice. The replacement is traced with the same
parameters and copied into the graph with them bound (torch.fx's subgraph_rewriter does the same for
node-only bindings; a bound literal is what this adds, as Inductor's pattern matcher has KeywordArg).

The helpers of attncomp.lower.ops stay single calls in patterns (traced as leaves), as in the graphs.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from torch import fx

from attncomp.lower import ops


def trace(fn: Callable) -> fx.Graph:
    """The graph of a pattern or replacement function, attncomp's ops as single calls."""
    return fx.Tracer(autowrap_modules=(math, ops)).trace(fn)


@dataclass
class Rule:
    """One pattern and its replacement; `guard(bindings)` may refuse a match."""

    name: str
    pattern: Callable
    replacement: Callable
    guard: Callable[[dict[str, Any]], bool] = lambda bindings: True
    _graphs: tuple[fx.Graph, fx.Graph] | None = field(default=None, repr=False)

    def graphs(self) -> tuple[fx.Graph, fx.Graph]:
        if self._graphs is None:
            self._graphs = (trace(self.pattern), trace(self.replacement))
        return self._graphs

    def match(self, node: fx.Node) -> dict[str, Any] | None:
        """The parameters' bindings where the pattern's output is `node`, or None."""
        pattern = self.graphs()[0]
        (out,) = [n for n in pattern.nodes if n.op == "output"]
        bindings: dict[str, Any] = {}
        if not _match(out.args[0], node, bindings, top=True):
            return None
        return bindings if self.guard(bindings) else None

    def replace(self, node: fx.Node, bindings: dict[str, Any]) -> fx.Node:
        """Insert the replacement before `node`, make every use of `node` use it; returns it."""
        replacement = self.graphs()[1]
        values: dict[fx.Node, Any] = {n: bindings.get(n.target) for n in replacement.nodes if n.op == "placeholder"}
        graph = node.graph
        with graph.inserting_before(node):
            for n in replacement.nodes:
                if n.op in ("placeholder", "output"):
                    continue
                values[n] = graph.node_copy(n, lambda x: values[x])
        (out,) = [n for n in replacement.nodes if n.op == "output"]
        new = values[out.args[0]]
        new.meta.update({k: v for k, v in node.meta.items() if k in ("var", "shape")})
        node.replace_all_uses_with(new)
        return new


def _match(p: Any, g: Any, bindings: dict[str, Any], top: bool = False) -> bool:
    if isinstance(p, fx.Node) and p.op == "placeholder":
        if p.target in bindings:
            return bindings[p.target] is g or (not isinstance(g, fx.Node) and bindings[p.target] == g)
        bindings[p.target] = g
        return True
    if isinstance(p, fx.Node):
        if not isinstance(g, fx.Node) or g.op != p.op or g.target != p.target:
            return False
        if not top and len(g.users) != 1:  # an inner value read elsewhere: the match cannot go
            return False
        if len(g.args) != len(p.args) or not set(g.kwargs) <= set(p.kwargs):
            return False
        defaults = _defaults(p.target) if set(g.kwargs) != set(p.kwargs) else {}
        if any(k not in defaults or not _same_literal(p.kwargs[k], defaults[k]) for k in set(p.kwargs) - set(g.kwargs)):
            return False  # a keyword the graph leaves out matches only the function's own default
        return all(_match(a, b, bindings) for a, b in zip(p.args, g.args)) and \
            all(_match(p.kwargs[k], g.kwargs[k], bindings) for k in g.kwargs)
    if isinstance(p, (tuple, list)):
        return isinstance(g, (tuple, list)) and len(p) == len(g) and all(_match(a, b, bindings) for a, b in zip(p, g))
    return _same_literal(p, g)


def _defaults(fn: Any) -> dict[str, Any]:
    """The keyword defaults of a function (tracing records `F.dropout(x, p, training, inplace=False)`)."""
    try:
        return {k: v.default for k, v in inspect.signature(fn).parameters.items() if v.default is not v.empty}
    except (TypeError, ValueError):
        return {}


def _same_literal(p: Any, g: Any) -> bool:
    """Equal literals of one type (True is not 1); a float equals a float subclass (attncomp's Const)."""
    if isinstance(g, fx.Node) or p != g:
        return False
    return type(p) is type(g) or (isinstance(p, float) and isinstance(g, float))


def rewrite(graph: fx.Graph, rules: list[Rule]) -> list[tuple[Rule, fx.Node]]:
    """Apply the first rule that matches at each node, in graph order; returns what was replaced."""
    done = []
    for node in list(graph.nodes):
        if node.op not in ("call_function", "call_method", "call_module") or not node.users:
            continue
        for rule in rules:
            bindings = rule.match(node)
            if bindings is not None:
                done.append((rule, rule.replace(node, bindings)))
                break
    return done
