"""Stage 4: passes over the entry-point graphs. Each takes a GraphModule and returns
PassResult(graph_module, modified); the pipeline lints the graph after each one."""

from __future__ import annotations

from typing import Callable, Sequence

from torch import fx
from torch.fx.passes.infra.pass_base import PassResult

from attncomp.errors import UsageError, did_you_mean
from attncomp.lower.module import CompiledModel
from attncomp.passes.canonicalize import canonicalize
from attncomp.passes.fuse_attention import count_fused, fuse_attention
from attncomp.passes.fuse_qkv import fuse_qkv


def eliminate_dead_code(gm: fx.GraphModule) -> PassResult:
    modified = gm.graph.eliminate_dead_code()
    if modified:
        gm.recompile()
    return PassResult(gm, modified)


PASSES: dict[str, Callable[[fx.GraphModule], PassResult]] = {
    "canonicalize": canonicalize,
    "fuse_attention": fuse_attention,
    "fuse_qkv": fuse_qkv,
    "eliminate_dead_code": eliminate_dead_code,
}
DEFAULT_PASSES: tuple[str, ...] = ("canonicalize", "fuse_attention", "fuse_qkv", "eliminate_dead_code")


def check_pass_names(names: Sequence[str]) -> None:
    for name in names:
        if name not in PASSES:
            raise UsageError(f'unknown pass "{name}"{did_you_mean(name, PASSES)}; passes: {", ".join(PASSES)}')


def run_passes(gm: fx.GraphModule, names: Sequence[str]) -> tuple[fx.GraphModule, list[tuple[str, bool]]]:
    """Run passes in order, linting after each; returns the graph module and what each changed."""
    check_pass_names(names)
    log = []
    for name in names:
        result = PASSES[name](gm)
        gm = result.graph_module
        gm.graph.lint()
        log.append((name, result.modified))
    return gm, log


def optimise(model: CompiledModel, names: Sequence[str] = DEFAULT_PASSES) -> CompiledModel:
    """Rebind the model's methods to its entry points after the passes.

    The passes run over an entry point when its graph or method is first read, on a GraphModule that
    generates Python code only if asked: the method is generated once, from the final graph.
    """
    check_pass_names(names)
    names = tuple(names)
    return model.with_graphs(model.graphs.then(lambda _, graph: run_passes(model.pass_module(graph), names)[0].graph))


__all__ = ["DEFAULT_PASSES", "PASSES", "count_fused", "optimise", "run_passes"]
