"""Print an optimised entry-point graph as Python: one method per layer kind, a loop in the entry point.

For each stack, the graph's layer regions (attncomp.codegen.regions) are cut out into a graph of
their own over the layer's parameters (targets relative to the layer), which torch.fx prints as a
method of the layer class; every layer must compute the same (equal signatures). The entry point's graph keeps
one placeholder call per stack, which becomes

    for i, layer in enumerate(self.decoder.layers):
        cache_0 = cache[2 * i]                               # this layer's cache entries
        cache_1 = cache[1 + 2 * i]
        cat, cat_1, x = layer.decode_step(x, cache_0, cache_1)   # the layer's method
        per_layer += (cat, cat_1)                            # what the entry point returns

An input of the layer is the previous layer's output (the stream `x`), the same value for every
layer (a mask, the encoder's memory), or an entry of an argument at an index affine in i (a cache).
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field

from torch import fx

from attncomp.codegen.regions import Region

STACKS = ("encoder", "decoder")


class PrintError(ValueError):
    """The graph's layers cannot be rolled into a loop (an internal error of the compiler)."""


@dataclass
class LayerMethod:
    stack: str
    name: str
    params: list[str]
    code: str  # the method's text, indented for a class body


@dataclass
class Loop:
    """How one stack's layers are called from an entry point."""

    stack: str
    method: str
    layers: int
    args: list[str]  # per input: a glue name, "x" (the stream) or an affine getitem
    varying: list[tuple[str, str, int, int]] = field(default_factory=list)  # (name, source, a, b): cache[a + b*i]
    outputs: list[str] = field(default_factory=list)
    stream_in: int | None = None
    stream_out: int | None = None


def _base_name(node: fx.Node, region: Region) -> str:
    name = node.name.removeprefix(region.prefix.replace(".", "_"))
    return re.sub(r"_\d+$", "", name) or "v"


def _attention_of(node: fx.Node, region: Region) -> str | None:
    """The attention module (`self_attn`, `cross_attn`) whose output projection reads an SDPA's result
    through its head reshapes, or None."""
    for _ in range(4):
        if len(node.users) != 1:
            return None
        node = next(iter(node.users))
        if node.op == "call_module" and node.target.endswith(".o_proj"):
            return node.target.removeprefix(region.prefix).removesuffix(".o_proj").replace(".", "_")
    return None


def _role_names(region: Region) -> dict[fx.Node, str]:
    """Names from the paper for the nodes an attention reads and makes: `self_attn_q`, `_k`, `_v`
    (heads split off), `self_attn_heads` (SDPA's result), and fuse_qkv's `self_attn_qkv_weight` and
    `self_attn_qkv` (the stacked weights and the one projection); other nodes keep fx's names."""
    names: dict[fx.Node, str] = {}
    for node in region.nodes:
        if node.op == "call_function" and getattr(node.target, "__name__", "") == "scaled_dot_product_attention":
            attention = _attention_of(node, region)
            if attention is None:
                continue
            names[node] = f"{attention}_heads"
            for role, arg in zip("qkv", node.args[:3]):
                if isinstance(arg, fx.Node) and arg in region.nodes:
                    names.setdefault(arg, f"{attention}_{role}")
        elif node.op == "call_function" and getattr(node.target, "__name__", "") == "cat" and node.args:
            parts = node.args[0] if isinstance(node.args[0], (tuple, list)) else ()
            targets = [p.target.removeprefix(region.prefix) for p in parts
                       if isinstance(p, fx.Node) and p.op == "get_attr"]
            stems = {t.rsplit(".", 2)[0] for t in targets if t.endswith("_proj.weight")}
            if len(targets) == len(parts) > 1 and len(stems) == 1:
                attention = stems.pop().replace(".", "_")
                roles = "".join(t.rsplit(".", 2)[1][0] for t in targets)  # qkv, or kv
                names[node] = f"{attention}_{roles}_weight"
                users = [u for u in node.users if u.op == "call_function"]
                if len(users) == 1:
                    names[users[0]] = f"{attention}_{roles}"
    return names


def _layer_graph(region: Region, params: list[str]) -> fx.Graph:
    graph = fx.Graph()
    roles = _role_names(region)
    env: dict[fx.Node, fx.Node] = {}
    placeholders = iter(params)
    for node in region.inputs:
        if node.op == "get_attr" and node.target == "training":
            env[node] = graph.get_attr("training")
        else:
            env[node] = graph.placeholder(next(placeholders))
            copy_shape(node, env[node])
    for node in region.nodes:
        target = node.target
        if node.op in ("call_module", "get_attr"):
            target = target.removeprefix(region.prefix)
        args = fx.map_arg(node.args, env.__getitem__)
        kwargs = fx.map_arg(node.kwargs, env.__getitem__)
        env[node] = graph.create_node(node.op, target, args, kwargs, name=roles.get(node) or _base_name(node, region))
        copy_shape(node, env[node])
    outs = [env[n] for n in region.outputs]
    graph.output(outs[0] if len(outs) == 1 else tuple(outs))
    return graph


def copy_shape(old: fx.Node, new: fx.Node) -> None:
    if "shape" in old.meta:
        new.meta["shape"] = old.meta["shape"]


SHAPE_COMMENT = re.compile(r"  # \(.*\)$")


def is_input_comment(line: str) -> bool:
    return line.lstrip().startswith("# ")


def code_only(text: str) -> str:
    """A method's text without its shape comments: what it computes (methods equal in this are one)."""
    return "\n".join(SHAPE_COMMENT.sub("", line) for line in text.split("\n") if not is_input_comment(line))


def merge_shapes(text: str, other: str) -> str:
    """One method's text for two uses with equal code: the shape comments both agree on. (The first
    text is kept whole when it is printed as a call of another method and the second is not.)"""
    lines, others = text.split("\n"), other.split("\n")
    if text == other or code_only(text) != code_only(other).replace(others[0], lines[0], 1):
        return text
    head, mine_inputs = lines[0], [x for x in lines[1:] if is_input_comment(x)]
    their_inputs = {x for x in others[1:] if is_input_comment(x)}
    items = [i for x in mine_inputs for i in _items(x)]
    agreed = set(i for x in their_inputs for i in _items(x))
    indent = head[: len(head) - len(head.lstrip())] * 2
    body = [x for x in lines[1:] if not is_input_comment(x)]
    their_body = [x for x in others[1:] if not is_input_comment(x)]
    merged = [x if x == y else SHAPE_COMMENT.sub("", x) for x, y in zip(body, their_body)]
    return "\n".join([head] + [indent + "# " + x for x in _input_shapes([i for i in items if i in agreed])] + merged)


def _items(comment: str) -> list[str]:
    """The `name: (shape)` items of an input-shape comment line."""
    return re.findall(r"\w+: \([^)]*\)", comment)


def _input_shapes(inputs: list[str]) -> list[str]:
    """The comment lines under a method's def: its inputs' shapes, one line, or one per input if long."""
    if not inputs:
        return []
    return [", ".join(inputs)] if len(", ".join(inputs)) <= 100 else inputs


def method_text(graph: fx.Graph, name: str, indent: str = "    ") -> tuple[str, dict]:
    """fx's Python for a graph as a method `name`, without fx's `x = None` lifetime clears, each
    line that makes a tensor ending in its shape (node.meta["shape"], attncomp.codegen.shapes)."""
    code = graph.python_code(root_module="self")
    shapes = {n.name: n.meta["shape"] for n in graph.nodes if "shape" in n.meta}
    inputs = [f"{n.name}: {shapes[n.name]}" for n in graph.find_nodes(op="placeholder") if n.name in shapes]
    lines = []
    for line in code.src.strip("\n").splitlines():
        line = re.sub(r";  [\w =]+ = None$", "", line)
        made = re.match(r"\s*(\w+) = ", line)
        if made and made.group(1) in shapes:
            line += f"  # {shapes[made.group(1)]}"
        lines.append(indent + line if line else line)
        if line.startswith("def "):
            lines += [indent * 2 + "# " + item for item in _input_shapes(inputs)]
    text = "\n".join(lines).replace("def forward(self", f"def {name}(self", 1)
    return text, code.globals


def _params(regions: list[Region], names: dict[fx.Node, str]) -> list[str]:
    """Placeholder names: the stream is x; the others are named after layer 0's inputs."""
    stream = _stream_position(regions)
    return ["x" if j == stream else _input_name(n, names) for j, n in enumerate(_inputs(regions[0]))]


def _input_name(node: fx.Node, names: dict[fx.Node, str]) -> str:
    """An argument's entry is named after it and layer 0's index (cache_1); other inputs keep their name."""
    if node.op == "call_function" and node.target is operator.getitem and isinstance(node.args[1], int):
        return f"{node.args[0].name}_{node.args[1]}"
    return names.get(node, node.name)


def _is_training(node: fx.Node) -> bool:
    return node.op == "get_attr" and node.target == "training"


def _inputs(region: Region) -> list[fx.Node]:
    return [n for n in region.inputs if not _is_training(n)]


def _stream_position(regions: list[Region]) -> int | None:
    if len(regions) < 2:
        return None
    found = [j for j, n in enumerate(_inputs(regions[1])) if n in regions[0].outputs]
    if not found:
        return None  # independent layers (init_cache projects each layer's keys and values)
    if len(found) != 1:
        raise PrintError(f"{regions[0].stack}: layer 1 reads {len(found)} outputs of layer 0, not one")
    return found[0]


def signature(region: Region) -> list[tuple]:
    """What a region computes, without its names: equal signatures print to the same method."""
    index = {n: ("in", j) for j, n in enumerate(region.inputs)}
    index.update((n, ("node", k)) for k, n in enumerate(region.nodes))
    out = []
    for node in region.nodes:
        target = node.target.removeprefix(region.prefix) if isinstance(node.target, str) else node.target
        args = fx.map_arg((node.args, node.kwargs), index.__getitem__)
        out.append((node.op, target, repr(args)))
    return out + [tuple(index[n] for n in region.outputs)]


def layer_method(regions: list[Region], name: str, names: dict[fx.Node, str]) -> tuple[LayerMethod, dict]:
    """The method every layer of the regions runs; an error unless all compute the same."""
    params = _params(regions, names)
    first = signature(regions[0])
    if any(signature(r) != first for r in regions[1:]):
        raise PrintError(f"{regions[0].stack}: the layers do not all compute the same thing")
    text, found = method_text(_layer_graph(regions[0], params), name)
    return LayerMethod(regions[0].stack, name, params, text), found


def _affine(nodes: list[fx.Node]) -> tuple[str, int, int] | None:
    """(source, a, b) when nodes[i] is source[a + b * i]."""
    if not all(n.op == "call_function" and n.target is operator.getitem for n in nodes):
        return None
    sources = {n.args[0] for n in nodes}
    index = [n.args[1] for n in nodes]
    if len(sources) != 1 or not all(isinstance(k, int) for k in index):
        return None
    a, b = index[0], (index[1] - index[0]) if len(index) > 1 else 0
    if any(k != a + b * i for i, k in enumerate(index)):
        return None
    return next(iter(sources)).name, a, b


def plan_loop(regions: list[Region], method: LayerMethod, names: dict[fx.Node, str]) -> Loop:
    """How the entry point calls the layers: which inputs are the stream, shared or per layer."""
    loop = Loop(regions[0].stack, method.name, len(regions), [])
    loop.stream_in = _stream_position(regions)
    if loop.stream_in is not None:
        loop.stream_out = regions[0].outputs.index(_inputs(regions[1])[loop.stream_in])
    for j, name in enumerate(method.params):
        column = [_inputs(r)[j] for r in regions]
        if j == loop.stream_in:
            loop.args.append("x")
        elif all(n is column[0] for n in column):
            loop.args.append(names.get(column[0], column[0].name))
        else:
            affine = _affine(column)
            if affine is None:
                raise PrintError(f"{loop.stack}: input {name} of the layers is neither shared nor a cache entry")
            loop.varying.append((name, *affine))
            loop.args.append(name)
    loop.outputs = [_base_name(n, regions[0]) if k != loop.stream_out else "x"
                    for k, n in enumerate(regions[0].outputs)]
    return loop
