"""Shape comments for generated code: each tensor an entry point computes, as `(batch, src_len, 512)`.

Every entry point's graph runs twice on empty tensors (the meta device costs no memory and no
arithmetic) with different sequence sizes, RUNS; a dimension equal in both runs is a constant of the
model, one that moved is named after the size it follows:

    batch       sentences in the batch             src_len     source tokens (src)
    tgt_len     target tokens (tgt_in, or a decoder-only model's tokens)
    cache_len   positions already in a decoder's key/value cache (decode_step)

A dimension is written `k*name` or `name + c` when both runs agree on that form, `batch*tgt_len` for
a product; a node with a dimension no form explains gets no comment rather than a wrong one. Each node
of a graph gets `node.meta["shape"]`, which attncomp.codegen.printer prints after the node's line.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx

from attncomp.codegen.printer import STACKS, signature
from attncomp.codegen.regions import find_regions
from attncomp.lower import lower

SIZES = ("batch", "src_len", "tgt_len", "cache_len")
RUNS = ({"batch": 2, "src_len": 3, "tgt_len": 5, "cache_len": 7},
        {"batch": 3, "src_len": 13, "tgt_len": 105, "cache_len": 1007})
MAX_OFFSET = 4  # `name + c` only for |c| up to this (cache_len + 1, a window's end)
ORDER = ("encode", "init_cache", "decode_step")  # each reads what the one before returned


class ShapeError(ValueError):
    """An entry point's graph does not run on example inputs (an internal error of the compiler)."""


def _same_as_first_layer(graph: fx.Graph) -> dict[fx.Node, fx.Node]:
    """Each node of layer i >= 1 -> the node of layer 0 that computes the same (layers are alike,
    as the printer requires), so only the first layer of a stack runs: shapes cost one layer."""
    same = {}
    for stack in STACKS:
        regions = find_regions(graph, stack)
        first = signature(regions[0]) if regions else None
        for region in regions[1:]:
            if signature(region) == first:
                same.update(zip(region.nodes, regions[0].nodes))
    return same


class _Recorder(fx.Interpreter):
    """Runs a graph, keeping the shape of each tensor value (None for anything else)."""

    def __init__(self, module: fx.GraphModule):
        super().__init__(module)
        self.shapes: dict[str, tuple[int, ...] | None] = {}
        self.same = _same_as_first_layer(module.graph)
        self.kept: dict[fx.Node, Any] = {}  # layer 0's values (the interpreter frees them after use)

    def run_node(self, node: fx.Node) -> Any:
        value = self.kept[self.same[node]] if node in self.same else super().run_node(node)
        self.kept[node] = value
        self.shapes[node.name] = tuple(value.shape) if isinstance(value, torch.Tensor) else None
        return value


def _ids(device: torch.device, *shape: int) -> torch.Tensor:
    return torch.zeros(shape, dtype=torch.long, device=device)


def _grown_cache(cache: tuple, run: dict[str, int], device: torch.device) -> tuple:
    """init_cache's result with each self-attention entry (empty, or as long as the prompt) holding
    cache_len positions: (batch, heads, length, d_k)."""
    grown = []
    for entry in cache:
        if entry.dim() == 4 and entry.shape[2] in (0, run["tgt_len"]):
            shape = list(entry.shape)
            shape[2] = run["cache_len"]
            entry = torch.zeros(shape, dtype=entry.dtype, device=device)
        grown.append(entry)
    return tuple(grown)


def _inputs(name: str, graph: fx.Graph, run: dict[str, int], results: dict[str, Any], device) -> list:
    values = []
    for node in graph.find_nodes(op="placeholder"):
        if node.name == "src":
            values.append(_ids(device, run["batch"], run["src_len"]))
        elif node.name == "tgt_in" or (node.name == "tokens" and name != "decode_step"):
            values.append(_ids(device, run["batch"], run["tgt_len"]))
        elif node.name == "tokens":
            values.append(_ids(device, run["batch"], 1))
        elif node.name == "memory":
            values.append(results["encode"])
        elif node.name == "cache":
            values.append(_grown_cache(results["init_cache"], run, device))
        else:
            raise ShapeError(f"no example for input {node.name} of {name}")
    return values


def _record(model, params, run: dict[str, int]) -> dict[str, dict[str, tuple | None]]:
    """Per entry point, each node's shape in one run of the model's graphs over `params`."""
    device = torch.device("meta")
    names = sorted(model.entry_points, key=lambda e: ORDER.index(e) if e in ORDER else -1)
    results: dict[str, Any] = {}
    shapes = {}
    with torch.no_grad():
        for name in names:
            recorder = _Recorder(params.pass_module(model.graphs[name]))
            inputs = _inputs(name, model.graphs[name], run, results, device)
            try:
                results[name] = recorder.run(*inputs)
            except Exception as err:  # noqa: BLE001 - any failure of a compiled graph is the compiler's
                raise ShapeError(f"{name} does not run on example inputs: {type(err).__name__}: "
                                 f"{str(err).splitlines()[0] if str(err) else ''}") from None
            shapes[name] = recorder.shapes
    return shapes


def _dimension(a: int, b: int) -> str | None:
    """A dimension's text from its sizes in the two runs; None when no form explains it."""
    if a == b:
        return str(a)
    found = set()
    first, second = RUNS
    for size in SIZES:
        moved = second[size] - first[size]
        k, rest = divmod(b - a, moved)
        if rest or k < 1:
            continue
        c = a - k * first[size]
        if c == 0:
            found.add(size if k == 1 else f"{k}*{size}")
        elif k == 1 and abs(c) <= MAX_OFFSET:
            found.add(f"{size} {'+' if c > 0 else '-'} {abs(c)}")
    for i, one in enumerate(SIZES):
        for other in SIZES[i + 1:]:
            if a == first[one] * first[other] and b == second[one] * second[other]:
                found.add(f"{one}*{other}")
    return found.pop() if len(found) == 1 else None


def _text(a: tuple[int, ...], b: tuple[int, ...]) -> str | None:
    if len(a) != len(b) or not a:
        return None
    dims = [_dimension(x, y) for x, y in zip(a, b)]
    if any(d is None for d in dims):
        return None
    return "(" + ", ".join(dims) + (",)" if len(dims) == 1 else ")")


def annotate(model) -> None:
    """Set node.meta["shape"] on the nodes of every entry-point graph of a compiled model."""
    meta = torch.device("meta")  # a model with weights lends its graphs to a meta copy of its parameters
    params = model if next(model.parameters()).device == meta else lower(model.spec, device=meta)
    first, second = (_record(model, params, run) for run in RUNS)
    for name in model.entry_points:
        for node in model.graphs[name].nodes:
            a, b = first[name].get(node.name), second[name].get(node.name)
            text = _text(a, b) if a is not None and b is not None else None
            if text is not None:
                node.meta["shape"] = text
            else:
                node.meta.pop("shape", None)
