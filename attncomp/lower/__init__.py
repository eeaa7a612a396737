"""Stage 3: a resolved Spec -> torch.fx graphs (one per entry point) over one parameter tree."""

from __future__ import annotations

import torch

from attncomp.ir import nodes
from attncomp.lower.module import CompiledModel, EntryGraphs
from attncomp.lower.params import Parameters, initialise
from attncomp.lower.stacks import entry_makers


def lower(spec: nodes.Spec, device: torch.device | str | None = None) -> CompiledModel:
    """Build the parameters (initialised from the spec's seed) and the unoptimised entry graphs.

    Each entry point is lowered when its graph or method is first read (`CompiledModel.bind_all()`
    lowers them all).
    """
    with torch.device(device or "cpu"):
        params = Parameters(spec.model)
    initialise(params, spec.train.seed)
    return CompiledModel(spec, params).with_graphs(EntryGraphs(entry_makers(spec.model)))


__all__ = ["CompiledModel", "EntryGraphs", "lower"]
