"""The compiler driver: spec (path or text) -> optimised CompiledModel. `attncomp.compile` is this."""

from __future__ import annotations

import os
from typing import Any, Sequence

import torch

from attncomp import checkpoint, ir
from attncomp.ir import nodes
from attncomp.lower.size import load_stored, refuse_if_too_large
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
    `passes=()` gives the unoptimised graphs (explicit attention). A directory written by
    `attncomp export --format safetensors` gives its trained model (weights loaded, eval mode).
    A spec whose float32 parameters exceed `lower.size.MAX_PARAM_BYTES` (4 GiB) is refused with a
    SpecError unless `force=True`.
    """
    if isinstance(source, nodes.Spec):
        spec = source
    elif _is_export(source):  # `attncomp export --format safetensors`: the trained model, no pickle
        return load_checkpoint(source, [*overrides, *(_override_text(k, v) for k, v in keys.items())],
                               device=device)[0]
    else:
        spec = ir.load(source, [*overrides, *(_override_text(k, v) for k, v in keys.items())])
    if not force:
        refuse_if_too_large(spec)
    return compile_spec(spec, passes, device, dtype)


def model_factory(spec: nodes.Spec, device: torch.device | str | None = None) -> CompiledModel:
    """compile_spec with the default passes, for `functools.partial(model_factory, spec)` in workers."""
    return compile_spec(spec, device=device)


def _is_export(path) -> bool:
    from attncomp.interop.safetensors_dir import is_export

    return isinstance(path, (str, os.PathLike)) and is_export(path)


def read_trained(path, gathered: bool = True) -> checkpoint.Checkpoint:
    """A checked checkpoint file, sharded directory (gathered into one with `gathered`) or safetensors
    export (read without unpickling anything): every field checked, the spec parsed alone, its hash verified."""
    if _is_export(path):
        from attncomp.interop import safetensors_dir

        return safetensors_dir.read(path)
    return checkpoint.read(path) if gathered else checkpoint.load(path)


def load_checkpoint(path, overrides: Sequence[str] = (), device: torch.device | str | None = None,
                    expect_spec: str | os.PathLike | None = None,
                    passes: Sequence[str] = DEFAULT_PASSES) -> tuple[CompiledModel, checkpoint.Checkpoint]:
    """A trained model from a checkpoint (file, sharded directory or safetensors export), compiled from
    the spec stored in it (+ overrides). With `expect_spec`, the checkpoint must have been trained with exactly that spec.
    """
    found = read_trained(path, gathered=False)
    stored = checkpoint.stored_spec(found)
    if expect_spec is not None:
        wanted = ir.load(expect_spec)
        if ir.spec_hash(wanted) != ir.spec_hash(stored):  # both in today's canonical form
            changed = ", ".join(key for key, _, _ in ir.diff(stored, wanted)[:6])
            raise checkpoint.CheckpointError(f"{path} was trained with another spec than {expect_spec} "
                                             f"(they differ in: {changed})")
    spec = load_stored(found.header.spec, f"{path} (its stored spec)", overrides) if overrides else stored
    model = compile_spec(spec, passes, device=device)
    try:
        model.load_state_dict(found.model)
    except RuntimeError as err:
        first = str(err).splitlines()[1].strip() if len(str(err).splitlines()) > 1 else str(err)
        raise checkpoint.CheckpointError(f"{path} does not fit the model of its spec with these --set options: "
                                         f"{first}") from None
    return model.eval(), found
