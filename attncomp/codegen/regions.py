"""Find the layers in an optimised entry-point graph, so the printer can roll them back into a loop.

The lowering unrolls a stack: layer i's nodes read parameters under `<stack>.layers.<i>.`. A layer's
region is found from the graph alone, in three steps (graph order is program order: the lowering
emits one layer after the other, and the passes insert nodes next to the ones they replace):

1. core: the nodes from the first to the last node that reads layer i's parameters, keeping those
   that depend on a parameter of layer i (q/k/v weights concatenated by `fuse_qkv`, for example);
   any other node in that range (`self.training`, a mask inverted once by `fuse_attention`, a
   cache entry read for later) stays outside, in the entry point's own code;
   Nodes in that range that only the core reads join it (fuse_attention's `dropout_p`), except
   reads of the entry point's arguments (a cache entry), which become the layer's inputs;
2. tail: the nodes right after the core that read the core and otherwise only values from before
   the stack, up to the last one that joins two of them (the residual sum of a pre-norm layer),
   and those that only the graph's output reads (the k and v projections of init_cache);
3. interface: inputs are the outside values the region reads (in first-use order), outputs the
   region values read outside it (in graph order).

Every layer of a stack must then print to the same code (see attncomp.codegen.printer), or the
build fails with an internal error rather than writing a module that differs from the graph.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field

from torch import fx


@dataclass
class Region:
    stack: str
    index: int
    nodes: list[fx.Node]  # in graph order
    inputs: list[fx.Node] = field(default_factory=list)
    outputs: list[fx.Node] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return f"{self.stack}.layers.{self.index}."


def _owner(node: fx.Node, stack: str) -> int | None:
    """The layer whose parameter (module or tensor) a node reads, if any."""
    if node.op not in ("call_module", "get_attr"):
        return None
    found = re.match(rf"{re.escape(stack)}\.layers\.(\d+)\.", node.target)
    return int(found.group(1)) if found else None


def _inputs(node: fx.Node) -> list[fx.Node]:
    return list(node.all_input_nodes)


def _core(order: list[fx.Node], lo: int, hi: int, stack: str, index: int) -> set[fx.Node]:
    span = order[lo : hi + 1]
    core = {n for n in span if _owner(n, stack) == index}
    for node in span:  # forward: what depends on the layer's parameters
        if node not in core and any(i in core for i in _inputs(node)):
            core.add(node)
    for node in reversed(span):  # backward: what only this layer reads, but for a read of an argument
        if node not in core and node.users and all(u in core for u in node.users) and not _reads_argument(node):
            core.add(node)
    return core


def _reads_argument(node: fx.Node) -> bool:
    """A placeholder, or an entry of one (a cache entry: the layer's input, read by the loop)."""
    if node.op == "placeholder":
        return True
    return node.op == "call_function" and node.target is operator.getitem and node.args[0].op == "placeholder"


def _tail(order: list[fx.Node], start: int, stop: int, region: set[fx.Node], before: set[fx.Node]) -> list[fx.Node]:
    """The region's nodes after its last parameter read: see the module docstring, step 2."""
    candidates: list[fx.Node] = []
    for node in order[start:stop]:
        if node.op not in ("call_function", "call_method"):
            break
        inputs = _inputs(node)
        if not any(i in region or i in candidates for i in inputs):
            continue  # independent of this layer (the next layer's empty cache): not the layer's
        if not all(i in region or i in candidates or i in before for i in inputs):
            break
        candidates.append(node)
    kept: set[fx.Node] = set()
    joins = [n for n in candidates if sum(1 for x in _inputs(n) if x in region or x in candidates) >= 2]
    last_join = candidates.index(joins[-1]) if joins else -1
    for pos in range(len(candidates) - 1, -1, -1):  # residual joins, and what only the result reads
        node = candidates[pos]
        if pos <= last_join or all(u in kept or u.op == "output" for u in node.users):
            kept.add(node)
    return [n for n in candidates if n in kept]


def _interface(region: Region) -> None:
    members = set(region.nodes)
    inputs: list[fx.Node] = []
    for node in region.nodes:
        for i in _inputs(node):
            if i not in members and i not in inputs:
                inputs.append(i)
    region.inputs = inputs
    region.outputs = [n for n in region.nodes if any(u not in members for u in n.users)]


def find_regions(graph: fx.Graph, stack: str) -> list[Region]:
    """The regions of a stack's layers in a graph, in layer order (empty if the graph has none)."""
    order = list(graph.nodes)
    order_of = {n: i for i, n in enumerate(order)}
    spans: dict[int, list[int]] = {}
    for pos, node in enumerate(order):
        owner = _owner(node, stack)
        if owner is not None:
            spans.setdefault(owner, []).append(pos)
    if not spans:
        return []
    indices = sorted(spans)
    if indices != list(range(len(indices))):
        raise ValueError(f"{stack}: layers {indices} do not start at 0 or have gaps")
    bounds = [(min(spans[i]), max(spans[i])) for i in indices]
    if any(bounds[i][1] >= bounds[i + 1][0] for i in range(len(bounds) - 1)):
        raise ValueError(f"{stack}: the layers' nodes interleave in graph order")
    before = set(order[: bounds[0][0]])
    regions = []
    for i, (lo, hi) in enumerate(bounds):
        core = _core(order, lo, hi, stack, i)
        stop = bounds[i + 1][0] if i + 1 < len(bounds) else len(order)
        tail = _tail(order, hi + 1, stop, core, before | _outside(order, lo, hi, core))
        nodes = sorted(core | set(tail), key=order_of.__getitem__)
        region = Region(stack, i, nodes)
        _interface(region)
        regions.append(region)
    return regions


def _outside(order: list[fx.Node], lo: int, hi: int, core: set[fx.Node]) -> set[fx.Node]:
    """Nodes inside a layer's span that are not the layer's (self.training, an inverted mask)."""
    return {n for n in order[lo : hi + 1] if n not in core}
