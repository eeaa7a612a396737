"""fuse_qkv: the q, k, v projections of one input -> one matmul, split afterwards.

    q = q_proj(x); k = k_proj(x); v = v_proj(x)
becomes
    qkv = F.linear(x, torch.cat((q_proj.weight, k_proj.weight, v_proj.weight)), torch.cat(biases))
    q, k, v = torch.split(qkv, (h * d_k, h * d_k, h * d_v), -1)

Self-attention fuses all three; cross-attention fuses k and v, which both read the memory. The
parameters stay where they are (the concatenation happens in the graph), so state-dict names do not
change. One wide matmul keeps the GPU busier than three narrow ones. Projections of which some have
a bias and some not (`bias { q = false }`) stay apart.
"""

from __future__ import annotations

import operator
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.fx.passes.infra.pass_base import PassResult

ROLES = ("q_proj", "k_proj", "v_proj")


def _groups(gm: fx.GraphModule) -> list[list[fx.Node]]:
    """Projection nodes of one attention module that read the same input, in q, k, v order."""
    by_key: dict[tuple, dict[str, fx.Node]] = defaultdict(dict)
    for node in gm.graph.nodes:
        if node.op != "call_module" or not isinstance(gm.get_submodule(node.target), nn.Linear):
            continue
        parent, _, role = node.target.rpartition(".")
        if role in ROLES and len(node.args) == 1 and not node.kwargs:
            by_key[(parent, node.args[0])][role] = node
    groups = [[found[r] for r in ROLES if r in found] for found in by_key.values() if len(found) >= 2]
    return [g for g in groups if len({gm.get_submodule(n.target).bias is None for n in g}) == 1]


def _fuse(gm: fx.GraphModule, group: list[fx.Node]) -> None:
    graph = gm.graph
    linears = [gm.get_submodule(n.target) for n in group]
    first = min(group, key=lambda n: list(graph.nodes).index(n))
    name = "".join(n.target.rpartition(".")[2][0] for n in group)  # qkv, kv
    with graph.inserting_before(first):
        weight = graph.call_function(torch.cat, (tuple(graph.get_attr(f"{n.target}.weight") for n in group),))
        weight.meta["var"] = f"{name}_weight"
        bias = None
        if all(lin.bias is not None for lin in linears):
            bias = graph.call_function(torch.cat, (tuple(graph.get_attr(f"{n.target}.bias") for n in group),))
            bias.meta["var"] = f"{name}_bias"
        fused = graph.call_function(F.linear, (group[0].args[0], weight, bias))
        parts = graph.call_function(torch.split, (fused, tuple(lin.out_features for lin in linears), -1))
        fused.meta["var"] = parts.meta["var"] = name
        for i, node in enumerate(group):
            part = graph.call_function(operator.getitem, (parts, i))
            part.meta.update({k: v for k, v in node.meta.items() if k in ("var", "shape")})
            node.replace_all_uses_with(part)
    for node in group:
        graph.erase_node(node)


def fuse_qkv(gm: fx.GraphModule) -> PassResult:
    """Fuse the projections of every attention that reads one input more than once (not in graphs a
    decode step runs: there one token's three products cost less than concatenating the weights)."""
    if gm.meta.get("decoding"):
        return PassResult(gm, False)
    groups = _groups(gm)
    for group in groups:
        _fuse(gm, group)
    if groups:
        gm.graph.lint()
        gm.recompile()
    return PassResult(gm, bool(groups))
