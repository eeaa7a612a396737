"""The compiler driver: spec (path or text) -> optimised CompiledModel. `attncomp.compile` is this."""

from __future__ import annotations

import os
from typing import Any, Sequence

import torch

from attncomp import ir
from attncomp.errors import SpecError
from attncomp.ir import nodes
from attncomp.lower.size import refuse_if_too_large
from attncomp.lower import CompiledModel, lower
from attncomp.passes import DEFAULT_PASSES, optimise


def _override_text(key: str, value: Any) -> str:
    """compile(..., model__heads=4) -> "model.heads=4"."""
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return f"{key.replace('__', '.')}={text}"


def compile_spec(spec: nodes.Spec, passes: Sequence[str] = DEFAULT_PASSES,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> CompiledModel:
    """A resolved Spec -> a model whose entry points run the optimised graphs.

    On the meta device (shapes only: the build report, `--emit`) methods are generated when first
    called; a model with weights has them all generated here, as plain methods.
    """
    model = lower(spec, device=device)
    if dtype is not None:
        model = model.to(dtype)
    if passes:
        model = optimise(model, passes)
    return model if torch.device(device or "cpu").type == "meta" else model.bind_all()


def compile(source: str | os.PathLike | nodes.Spec, overrides: Sequence[str] = (), *,  # noqa: A001
            passes: Sequence[str] = DEFAULT_PASSES, device: torch.device | str | None = None,
            dtype: torch.dtype | None = None, force: bool = False, **keys: Any) -> CompiledModel:
    """Compile a spec file, spec text or Spec into an nn.Module with the spec's entry points.

    Overrides: strings like "model.heads=4", or keywords with __ for dots: model__heads=4.
    `passes=()` gives the unoptimised graphs (explicit attention); a trained model (a checkpoint or an
    export) is `attncomp.load(path)`. A spec whose float32 parameters exceed `lower.size.MAX_PARAM_BYTES` (4 GiB) is refused with a
    SpecError unless `force=True`.
    """
    if isinstance(source, nodes.Spec):
        spec = source
    elif isinstance(source, (str, os.PathLike)) and os.path.isdir(source):
        raise SpecError(f"{source} is a directory, not a spec: attncomp.load(path) loads a trained model "
                        "(a checkpoint or an export)")
    else:
        spec = ir.load(source, [*overrides, *(_override_text(k, v) for k, v in keys.items())])
    if not force:
        refuse_if_too_large(spec)
    return compile_spec(spec, passes, device, dtype)


def training_passes(spec: nodes.Spec) -> tuple[str, ...]:
    """The passes of a model the runner trains: the default ones; for `train.precision = float8` without
    fuse_qkv, whose one product reads the q, k and v projections' weights concatenated instead of calling the
    three linear layers, so that they would not run in float8 (attncomp.train.float8 converts layers)."""
    if spec.train.precision == "float8":
        return tuple(p for p in DEFAULT_PASSES if p != "fuse_qkv")
    return tuple(DEFAULT_PASSES)


def model_factory(spec: nodes.Spec, device: torch.device | str | None = None) -> CompiledModel:
    """compile_spec with the training passes, for `functools.partial(model_factory, spec)` in workers."""
    return compile_spec(spec, training_passes(spec), device=device)
