"""Stage 3: a resolved Spec -> a program of units (attncomp.lower.units), each lowered once to torch.fx
graphs, and the module tree they make: a CompiledModel with one method per entry point."""

from __future__ import annotations

import torch

from attncomp.ir import nodes
from attncomp.lower.family import Family, embedding_names, family_of, model_unit
from attncomp.lower.program import CompiledModel, Lowering, build, initialise


def lower(spec: nodes.Spec, device: torch.device | str | None = None) -> CompiledModel:
    """The unoptimised program (explicit attention) and its parameters, initialised from the spec's seed."""
    root = model_unit(Lowering(spec.model))
    with torch.device(device or "cpu"):
        model = build(spec, root)
    initialise(model, spec.train.seed)
    return model


__all__ = ["CompiledModel", "Family", "embedding_names", "family_of", "lower"]
