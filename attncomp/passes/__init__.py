"""Stage 4: passes over the units' graphs. Each pass takes a GraphModule and returns
PassResult(graph_module, modified); it runs once on every graph of every unit (a layer kind's body
once, however many layers share it). Each pass declares the passes it needs before it, and the
pipeline checks the order before running any; the graphs are linted and their new values given
shapes after each pass.

    canonicalize          one spelling per op (for graphs traced from elsewhere)
    fuse_attention        explicit attention -> scaled_dot_product_attention   needs canonicalize
    fuse_qkv              q, k, v projections of one input -> one matmul (not in decode steps)
    eliminate_dead_code
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from torch import fx
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.passes.infra.pass_base import PassResult

from attncomp.errors import UsageError, did_you_mean
from attncomp.lower import CompiledModel
from attncomp.lower.shapes import set_shape
from attncomp.passes.canonicalize import canonicalize
from attncomp.passes.fuse_attention import count_fused, fuse_attention
from attncomp.passes.fuse_qkv import fuse_qkv


def eliminate_dead_code(gm: fx.GraphModule) -> PassResult:
    modified = gm.graph.eliminate_dead_code()
    if modified:
        gm.recompile()
    return PassResult(gm, modified)


@dataclass(frozen=True)
class Pass:
    run: Callable[[fx.GraphModule], PassResult]
    needs: tuple[str, ...] = ()  # passes that must run before this one


PASSES: dict[str, Pass] = {
    "canonicalize": Pass(canonicalize),
    "fuse_attention": Pass(fuse_attention, needs=("canonicalize",)),
    "fuse_qkv": Pass(fuse_qkv),
    "eliminate_dead_code": Pass(eliminate_dead_code),
}
DEFAULT_PASSES: tuple[str, ...] = ("canonicalize", "fuse_attention", "fuse_qkv", "eliminate_dead_code")


def check_pass_names(names: Sequence[str]) -> None:
    """Every pass known, and every pass's needs chosen before it."""
    for i, name in enumerate(names):
        if name not in PASSES:
            raise UsageError(f'unknown pass "{name}"{did_you_mean(name, PASSES)}; passes: {", ".join(PASSES)}')
        missing = [need for need in PASSES[name].needs if need not in names[:i]]
        if missing:
            raise UsageError(f'pass "{name}" needs {", ".join(missing)} to run before it '
                             f'(e.g. --passes {",".join([*missing, name])})')


def _shapes(gm: fx.GraphModule) -> None:
    """Shapes for the values a pass made (a parameter's from the module, the rest by attncomp.lower.shapes)."""
    for node in gm.graph.nodes:
        if "shape" in node.meta:
            continue
        if node.op == "get_attr":
            try:
                node.meta["shape"] = tuple(gm.get_parameter(node.target).shape)
            except AttributeError:
                pass
        else:
            set_shape(node)


def run_passes(gm: fx.GraphModule, names: Sequence[str], decoding: bool = False
               ) -> tuple[fx.GraphModule, list[tuple[str, bool]]]:
    """Run passes in order on one graph, linting after each; returns the graph module and what each
    changed. `decoding`: the graph runs once per decoded token (some passes leave those alone)."""
    names = tuple(names)
    check_pass_names(names)
    gm.meta["decoding"] = decoding
    log = []
    for name in names:
        result = PASSES[name].run(gm)
        gm = result.graph_module
        gm.graph.lint()
        _shapes(gm)
        log.append((name, result.modified))
    return gm, log


def optimise(model: CompiledModel, names: Sequence[str] = DEFAULT_PASSES) -> CompiledModel:
    """Run the passes on every graph of every unit of the model, and regenerate its methods."""
    names = tuple(names)
    check_pass_names(names)
    for unit in model.units():
        instance = model.instance(unit)
        for method in unit.methods.values():
            gm = _LazyGraphModule(instance, method.graph, class_name=unit.name)
            method.graph = run_passes(gm, names, method.decoding)[0].graph
    model.refresh()
    model.passes = (*model.passes, *names)
    return model


__all__ = ["DEFAULT_PASSES", "PASSES", "count_fused", "optimise", "run_passes"]
