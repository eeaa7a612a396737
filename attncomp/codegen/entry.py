"""An entry point's own code: its graph with each stack's layers replaced by a loop over them.

The graph is copied without the layers' nodes; in their place one call per stack stands for the
loop (printed by `loop_text`). What the layers return to the entry point is either the stream's
last value or, for values of every layer (a decoder's new keys and values), a run in a tuple the
entry point builds — (mask, k0, v0, k1, v1, ...) — which becomes `(mask,) + per_layer`, the loop
adding each layer's group. Values the lowering builds alike for every layer next to those groups
(init_cache's empty caches) are printed inside the loop.
"""

from __future__ import annotations

import itertools
import operator
import re
from dataclasses import dataclass, field

from torch import fx

from attncomp.codegen.printer import (STACKS, Loop, PrintError, code_only, copy_shape, is_input_comment, layer_method,
                                      method_text, plan_loop)
from attncomp.codegen.regions import Region, find_regions


@dataclass
class Stacked:
    """One stack's layers in one entry point."""

    regions: list[Region]
    loop: Loop
    method_text: str
    globals: dict
    slots: list[tuple] = field(default_factory=list)  # per collected value: ("out", k) | ("in", j) | ("expr", node)
    uses: list[fx.Node] = field(default_factory=list)  # glue nodes the loop's own code reads


def _loop_marker(*args):  # stands for a loop in the glue graph; never called
    raise AssertionError("a placeholder for a printed loop")


def _values(stacked: Stacked) -> dict[fx.Node, tuple[int, tuple]]:
    """Each per-layer value the entry point may collect: node -> (layer, slot)."""
    found = {}
    for i, region in enumerate(stacked.regions):
        for k, out in enumerate(region.outputs):
            if k != stacked.loop.stream_out:
                found[out] = (i, ("out", k))
        inputs = [n for n in region.inputs if not (n.op == "get_attr" and n.target == "training")]
        for j, name in enumerate(stacked.loop.args):
            if any(v[0] == name for v in stacked.loop.varying):
                found[inputs[j]] = (i, ("in", j))
    return found


def _key(node: fx.Node) -> tuple:
    return (node.op, node.target, str(node.args), str(node.kwargs))


def _repeatable(node) -> bool:
    return isinstance(node, fx.Node) and node.op in ("call_method", "call_function") and len(node.users) == 1


def _groups(items: list, values: dict, layers: int) -> tuple[int, int, list[tuple]] | None:
    """(start, stop, slots) of the run of per-layer groups in a tuple, or None if it has none."""
    hits = [p for p, x in enumerate(items) if isinstance(x, fx.Node) and x in values]
    if not hits:
        return None
    lo, hi = hits[0], hits[-1] + 1
    for extra in range(lo + 1):
        for after in range(len(items) - hi + 1):
            start, stop = lo - extra, hi + after
            slots = _slots(items[start:stop], values, layers)
            if slots is not None:
                return start, stop, slots
    raise PrintError("a tuple mixes the layers' values in an order the loop cannot build")


def _slots(run: list, values: dict, layers: int) -> list[tuple] | None:
    if len(run) % layers:
        return None
    width = len(run) // layers
    slots: list[tuple] = []
    for pos in range(width):
        column = [run[i * width + pos] for i in range(layers)]
        if all(isinstance(x, fx.Node) and x in values for x in column):
            if any(values[x] != (i, values[column[0]][1]) for i, x in enumerate(column)):
                return None
            slots.append(values[column[0]][1])
        elif all(_repeatable(x) and x not in values and _key(x) == _key(column[0]) for x in column):
            slots.append(("expr", column[0]))
        else:
            return None
    return slots


def _expr(node: fx.Node, names: dict) -> str:
    """A one-line expression for a value built alike in every layer (Tensor.new_zeros(...))."""
    def arg(a) -> str:
        if isinstance(a, fx.Node):
            return names[a]
        if isinstance(a, tuple):
            return "(" + ", ".join(arg(x) for x in a) + ("," if len(a) == 1 else "") + ")"
        return repr(a)
    if node.op != "call_method" or node.kwargs:
        raise PrintError(f"cannot print {node.format_node()} inside a loop")
    self_arg, *rest = node.args
    return f"{arg(self_arg)}.{node.target}({', '.join(arg(a) for a in rest)})"


def _plan_stacks(graph: fx.Graph, entry: str, known: dict[str, dict[str, str]]) -> dict[str, Stacked]:
    """Each stack's layer method (named after the first entry point whose layers run it) and loop."""
    names: dict[fx.Node, str] = {}
    stacks = {}
    for stack in STACKS:
        regions = find_regions(graph, stack)
        if not regions:
            continue
        method, found = layer_method(regions, entry, names)
        texts = known.setdefault(stack, {})
        key = code_only(method.code.replace(f"def {entry}(", "def (", 1))
        same = texts.setdefault(key, entry)
        method.name = same
        method.code = method.code.replace(f"def {entry}(", f"def {same}(", 1)
        if same == entry:
            method.code = _delegated(method.code, texts) or method.code
        loop = plan_loop(regions, method, names)
        stacks[stack] = Stacked(regions, loop, method.code, found)
        if loop.stream_out is not None:
            names[regions[-1].outputs[loop.stream_out]] = f"{stack}_out"
    return stacks


def _params_of(text: str) -> list[str] | None:
    """A method's parameters after self; None if any has an annotation or a default."""
    found = re.match(r"\s*def \w*\(self(.*?)\):", text)
    params = [p.strip() for p in found.group(1).split(",") if p.strip()] if found else []
    return None if any(":" in p or "=" in p for p in params) else params


def _without_mask(code: str, mask: str) -> str | None:
    """The code with `attn_mask = mask` gone from its SDPA calls; None unless `mask` is read only there."""
    lines = code.split("\n")
    out = [re.sub(rf", attn_mask = {mask}\b(?=[,)])", "", line) if "scaled_dot_product_attention(" in line
           else line for line in lines]
    if out == lines or any(re.search(rf"\b{mask}\b", line) for line in out[1:]):
        return None
    return "\n".join(out)


def _delegated(text: str, texts: dict[str, str]) -> str | None:
    """`text` as a call of an earlier layer method of the stack when it is that method with one mask
    input left out (hidden_dense: forward without padding), so the body is printed once:

        def hidden_dense(self, x, encoder_out):
            return self.forward(x, encoder_out, None)  # the same, with no attention mask

    SDPA's attn_mask=None is its default, so that is the method the graph made; calling the method
    (not the module) runs it exactly, without the module's hooks."""
    mine = code_only(text).split("\n")[1:]
    for other, name in texts.items():
        params = _params_of(other)
        for mask in params or ():
            unmasked = _without_mask(other, mask)
            if unmasked is not None and unmasked.split("\n")[1:] == mine:
                lines = text.split("\n")
                head = lines[:1] + list(itertools.takewhile(is_input_comment, lines[1:]))
                indent = head[0][: len(head[0]) - len(head[0].lstrip())] + "    "
                args = ", ".join("None" if p == mask else p for p in params)
                return "\n".join(head + [f"{indent}return self.{name}({args})  # the same, with no attention mask"])
    return None


def _walk_tuples(arg, visit) -> None:
    if isinstance(arg, (tuple, list)):
        visit(arg)
        for x in arg:
            _walk_tuples(x, visit)
    elif isinstance(arg, dict):
        for x in arg.values():
            _walk_tuples(x, visit)


def _plan_tuples(graph: fx.Graph, stacks: dict[str, Stacked], inside: set) -> tuple[dict, set]:
    """Which tuples of the entry point hold runs of per-layer values, and the nodes the loop prints."""
    plans: dict[int, tuple[str, int, int]] = {}
    printed: set[fx.Node] = set()

    def visit(items) -> None:
        for stack, stacked in stacks.items():
            if stacked.loop.layers < 2:
                continue
            found = _groups(list(items), _values(stacked), stacked.loop.layers)
            if found is None:
                continue
            start, stop, slots = found
            if stacked.slots and stacked.slots != slots:
                raise PrintError(f"{stack}: two tuples collect the layers' values differently")
            stacked.slots = slots
            plans[id(items)] = (stack, start, stop)
            width = len(slots)
            for pos, slot in enumerate(slots):
                if slot[0] == "expr":
                    column = items[start + pos : stop : width]
                    printed.update(column)
                    stacked.uses.extend(n for n in column[0].all_input_nodes if n not in stacked.uses)

    def visit_repeats(items) -> None:
        if id(items) in plans:
            return
        found = _repeats(list(items))
        if found is not None:
            start, stop, period = found
            plans[id(items)] = ("", start, stop)
            repeats[id(items)] = (list(items[start : start + period]), (stop - start) // period)
            printed.update(items[start:stop])

    repeats: dict[int, tuple[list[fx.Node], int]] = {}
    for node in graph.nodes:
        if node not in inside:
            _walk_tuples(node.args, visit)
            _walk_tuples(node.args, visit_repeats)
    return plans, printed, repeats


def _repeats(items: list) -> tuple[int, int, int] | None:
    """(start, stop, period) of the first run of values built alike, period after period (init_cache's
    empty caches of a decoder-only model), at least three values and two periods long."""
    pos = 0
    while pos < len(items):
        stop = pos
        while stop < len(items) and _repeatable(items[stop]):
            stop += 1
        run = items[pos:stop]
        for period in range(1, len(run) // 2 + 1):
            if len(run) >= 3 and len(run) % period == 0 and \
                    all(_key(run[k]) == _key(run[k % period]) for k in range(len(run))):
                return pos, stop, period
        pos = stop + 1
    return None


def _loop_uses(stacked: Stacked) -> list[fx.Node]:
    loop, first = stacked.loop, stacked.regions[0]
    inputs = [n for n in first.inputs if not (n.op == "get_attr" and n.target == "training")]
    varying = {v[0] for v in loop.varying}
    uses = []
    for j, node in enumerate(inputs):
        if loop.args[j] in varying:
            node = node.args[0]  # the argument the layer's entries are read from
        if node not in uses:
            uses.append(node)
    return uses + [n for n in stacked.uses if n not in uses]


@dataclass
class Glue:
    graph: fx.Graph
    env: dict
    markers: dict[str, fx.Node]
    repeated: list[tuple[fx.Node, list[fx.Node], int]]

    def repeat_text(self, marker: fx.Node, period: list[fx.Node], times: int) -> str:
        names = {n: self.env[n].name for n in self.env}
        items = [_expr(n, names) for n in period]
        if len(items) == 1:
            return f"{marker.name} = tuple({items[0]} for _ in range({times}))"
        return f"{marker.name} = tuple(x for _ in range({times}) for x in ({', '.join(items)}))"


def _build_glue(graph: fx.Graph, stacks: dict[str, Stacked]) -> Glue:
    inside = {n for s in stacks.values() for r in s.regions for n in r.nodes}
    plans, printed, repeats = _plan_tuples(graph, stacks, inside)
    glue, env, markers, collected = fx.Graph(), {}, {}, {}
    repeated: list[tuple[fx.Node, list[fx.Node], int]] = []
    last = {s.regions[-1].nodes[-1]: name for name, s in stacks.items()}

    def mapped(arg):
        if isinstance(arg, fx.Node):
            if arg not in env:
                raise PrintError(f"the entry point reads {arg.name}, a value inside a layer")
            return env[arg]
        if isinstance(arg, (tuple, list)) and id(arg) in plans:
            stack, start, stop = plans[id(arg)]
            if stack:
                node = collected[stack]
            else:
                period, times = repeats[id(arg)]
                uses = tuple(env[n] for x in period for n in x.all_input_nodes)
                node = glue.call_function(_loop_marker, uses, name="repeated")
                repeated.append((node, period, times))
            if start:
                node = glue.call_function(operator.add, (tuple(mapped(x) for x in arg[:start]), node))
            if stop < len(arg):
                node = glue.call_function(operator.add, (node, tuple(mapped(x) for x in arg[stop:])))
            return node
        if isinstance(arg, (tuple, list)):
            return type(arg)(mapped(x) for x in arg)
        if isinstance(arg, dict):
            return {k: mapped(v) for k, v in arg.items()}
        if isinstance(arg, slice):
            return slice(mapped(arg.start), mapped(arg.stop), mapped(arg.step))
        return arg

    for node in graph.nodes:
        if node in last:
            stack = last[node]
            markers[stack] = _marker(glue, env, stacks[stack], collected)
        if node in inside or node in printed:
            continue
        env[node] = glue.create_node(node.op, node.target, mapped(node.args), mapped(node.kwargs), name=node.name)
        copy_shape(node, env[node])
    _drop_unused(glue)
    return Glue(glue, env, markers, repeated)


def _drop_unused(graph: fx.Graph) -> None:
    """Remove nodes nobody reads (the cache entries the loop now reads itself); graph ops are pure."""
    for node in reversed(list(graph.nodes)):
        if node.op not in ("placeholder", "output") and not node.users:
            graph.erase_node(node)


def _marker(glue: fx.Graph, env: dict, stacked: Stacked, collected: dict) -> fx.Node:
    loop, stack = stacked.loop, stacked.loop.stack
    args = tuple(env[n] for n in _loop_uses(stacked))
    if loop.layers == 1:
        outs = stacked.regions[0].outputs
        marker = glue.call_function(_loop_marker, args, name=outs[0].name if len(outs) == 1 else f"{stack}_layers")
        for k, out in enumerate(outs):
            env[out] = marker if len(outs) == 1 else glue.call_function(operator.getitem, (marker, k), name=out.name)
        return marker
    marker = glue.call_function(_loop_marker, args, name=f"{stack}_layers")
    if loop.stream_out is not None:
        out = stacked.regions[-1].outputs[loop.stream_out]
        env[out] = glue.call_function(operator.getitem, (marker, 0), name=f"{stack}_out")
    if stacked.slots:
        collected[stack] = glue.call_function(operator.getitem, (marker, 1), name=f"{stack}_per_layer")
    return marker


def _index(a: int, b: int) -> str:
    step = "i" if b == 1 else f"{b} * i"
    return step if a == 0 else f"{a} + {step}"


def loop_text(stacked: Stacked, glue: Glue) -> list[str]:
    """The lines that replace a stack's marker: the loop over its layers."""
    loop, first, env = stacked.loop, stacked.regions[0], glue.env
    marker = glue.markers[loop.stack].name
    inputs = [n for n in first.inputs if not (n.op == "get_attr" and n.target == "training")]
    name = {n: env[n].name for n in env}
    if loop.layers == 1:
        return [f"{marker} = self.{loop.stack}.layers[0].{loop.method}({', '.join(name[n] for n in inputs)})"]
    varying = {v[0]: v for v in loop.varying}
    taken = {n.name for n in glue.graph.nodes}
    clash = taken & ({"x", "i", "layer", "per_layer"} | set(varying) | {n.name for n in first.outputs})
    if clash:
        raise PrintError(f"{loop.stack}: loop names clash with the entry point's: {sorted(clash)}")
    outs = ["x" if k == loop.stream_out else n.name for k, n in enumerate(first.outputs)]
    args = [a if a == "x" or a in varying else name[inputs[j]] for j, a in enumerate(loop.args)]
    lines = []
    if loop.stream_in is not None:
        lines.append(f"x = {name[inputs[loop.stream_in]]}")
    if stacked.slots:
        lines.append("per_layer = ()")
    lines.append(f"for i, layer in enumerate(self.{loop.stack}.layers):")
    for vname, source, a, b in loop.varying:
        lines.append(f"    {vname} = {source}[{_index(a, b)}]")
    call = "layer" if loop.method == "forward" else f"layer.{loop.method}"
    lines.append(f"    {', '.join(outs)} = {call}({', '.join(args)})")
    if stacked.slots:
        items = [outs[s[1]] if s[0] == "out" else loop.args[s[1]] if s[0] == "in" else _expr(s[1], name)
                 for s in stacked.slots]
        lines.append(f"    per_layer += ({', '.join(items)}{',' if len(items) == 1 else ''})")
    return lines + _results(stacked, glue)


def _results(stacked: Stacked, glue: Glue) -> list[str]:
    """After the loop: the names the entry point reads the stream and the collected values by."""
    marker = glue.markers[stacked.loop.stack]
    lines = []
    for user in marker.users:  # getitem(marker, 0): the stream; getitem(marker, 1): per_layer
        lines.append(f"{user.name} = {'x' if user.args[1] == 0 else 'per_layer'}")
        user.meta["printed_by_loop"] = True
    return lines


def print_entry(graph: fx.Graph, entry: str, known: dict[str, dict[str, str]]) -> tuple[str, dict[str, Stacked], dict]:
    """The entry point's method text (loops in place), its stacks' layer methods, and the globals.
    `known` maps each stack's layer-method texts to their names across entry points (filled here)."""
    stacks = _plan_stacks(graph, entry, known)
    glue = _build_glue(graph, stacks)
    text, found = method_text(glue.graph, entry)
    lines = text.split("\n")
    replace = [(glue.markers[s.loop.stack].name, loop_text(s, glue)) for s in stacks.values()]
    replace += [(marker.name, [glue.repeat_text(marker, period, times)]) for marker, period, times in glue.repeated]
    for marker, new in replace:
        at = next(k for k, line in enumerate(lines) if line.lstrip().startswith(f"{marker} = "))
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines[at : at + 1] = [indent + line for line in new]
    done = {f"{n.name} = {n.args[0].name}[{n.args[1]}]" for n in glue.graph.nodes if n.meta.get("printed_by_loop")}
    lines = [line for line in lines if line.strip() not in done]
    return "\n".join(lines), stacks, found
