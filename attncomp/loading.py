"""Trained models from what training and export write: a checkpoint file, a sharded checkpoint
directory, or a safetensors export directory (read without unpickling anything). `attncomp.load(path)`
is `load` here; the compiler itself (attncomp.compiler) knows nothing of checkpoints or exports, and checkpoint
reading (attncomp.checkpoint) nothing of the compiler: the size guard on a stored spec is applied here
(`checked_spec`), before anything is built.
"""

from __future__ import annotations

import os
from typing import Sequence

import torch

from attncomp import checkpoint, ir
from attncomp.compiler import DEFAULT_PASSES, compile_spec
from attncomp.lower import CompiledModel
from attncomp.lower.size import hold_stored, load_stored


def checked_spec(found: checkpoint.Checkpoint, overrides: Sequence[str] = ()) -> ir.Spec:
    """The checkpoint's stored spec (+ overrides), held to the size limit unless the file stores all the weights it
    describes (attncomp.lower.size.load_stored: a crafted or damaged spec is refused before anything is built)."""
    origin = f"{found.path} (its stored spec)"
    stored = checkpoint.stored_spec(found)  # a model factory's checkpoint has none: refused in one line
    if overrides:
        return load_stored(found.header.spec, origin, overrides, stored=found.stored_elements())
    return hold_stored(stored, origin, found.stored_elements())


def load_checkpoint(path, overrides: Sequence[str] = (), device: torch.device | str | None = None,
                    expect_spec: str | os.PathLike | None = None,
                    passes: Sequence[str] = DEFAULT_PASSES) -> tuple[CompiledModel, checkpoint.Checkpoint]:
    """A trained model from a checkpoint (file, sharded directory or safetensors export), compiled from
    the spec stored in it (+ overrides). With `expect_spec`, the checkpoint must have been trained with exactly that spec.
    """
    found = checkpoint.read_trained(path, gathered=False)
    stored = checked_spec(found)
    if expect_spec is not None:
        wanted = ir.load(expect_spec)
        if ir.spec_hash(wanted) != ir.spec_hash(stored):  # both in today's canonical form
            changed = ", ".join(key for key, _, _ in ir.diff(stored, wanted)[:6])
            raise checkpoint.CheckpointError(f"{path} was trained with another spec than {expect_spec} "
                                             f"(they differ in: {changed})")
    spec = checked_spec(found, overrides) if overrides else stored
    model = compile_spec(spec, passes, device=device)
    try:
        model.load_state_dict(found.model)
    except RuntimeError as err:
        first = str(err).splitlines()[1].strip() if len(str(err).splitlines()) > 1 else str(err)
        raise checkpoint.CheckpointError(f"{path} does not fit the model of its spec with these --set options: "
                                         f"{first}") from None
    return model.eval(), found


def load(path: str | os.PathLike, overrides: Sequence[str] = (),
         device: torch.device | str | None = None) -> CompiledModel:
    """The trained model of a checkpoint file, sharded checkpoint directory or safetensors export, compiled
    from its stored spec (+ overrides), its weights loaded, in eval mode."""
    return load_checkpoint(path, overrides, device=device)[0]
