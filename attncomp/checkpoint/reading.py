"""Reading a checkpoint: every field checked (attncomp.checkpoint.schema), the stored spec parsed alone
and its hash verified, the weights present and finite; a file, a sharded directory or a safetensors export.

Reading returns what the file holds: the parameter-count guard on a stored spec (a crafted spec that describes more
than the file stores) is applied by those that build its model (attncomp.loading, the commands, interop)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

import torch

from attncomp.checkpoint import safetensors_dir, sharded
from attncomp.checkpoint.schema import Checkpoint, CheckpointError, check_model, from_payload
from attncomp.errors import printable
from attncomp.files import os_reason, shown_path
from attncomp import ir

_specs: dict[str, Any] = {}  # text -> Spec: a run's checkpoints parse it once


def _torch_load(path: Path) -> Any:
    """The stored dict, memory-mapped (tensors are read when touched), with weights_only."""
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as err:
            if "mmap" not in str(err):
                raise
            return torch.load(path, map_location="cpu", weights_only=True)  # the legacy (non-zip) format
    except Exception as err:  # truncated zip, pickle of foreign objects, not a torch file at all
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{path} is not a readable attncomp checkpoint ({_text_reason(path) or reason[:160]})"
                              ) from None


def _text_reason(path: Path) -> str | None:
    """Why a text file is no checkpoint (a spec given where its trained checkpoint was meant), or None for any other
    file: torch's own reason (a weights_only paragraph about pickles) would say nothing useful about it."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
        head.decode("utf-8")
    except (OSError, UnicodeDecodeError):  # unreadable, or binary: a damaged checkpoint
        return None
    if not head or head.startswith(b"PK"):  # empty, or a (damaged) zip: torch's reason says more
        return None
    return ("it is text, not a file torch.save wrote; a spec is trained first, `attncomp train SPEC --data DIR`, "
            "and its run's checkpoint_avg.pt read")


def _in_run_directory(path: Path) -> str:
    """'; ...' naming the checkpoint to give when `path` is a run directory (`translate runs/base`), or ''."""
    from attncomp.checkpoint import AVERAGE  # the package imports this module

    found = sorted(path.glob("checkpoint_*.pt"))
    if not found:
        return ""
    chosen = path / AVERAGE if (path / AVERAGE).is_file() else found[-1]
    return f"; {path} is a run directory: give one of its checkpoints, {chosen}"


def stored_spec(checkpoint: Checkpoint):
    """The checkpoint's spec (an ir Spec), parsed alone. The recorded hash is that of the stored text
    (the canonical text when it was written), so a checkpoint stays readable after the canonical form
    gains keys: a spec written before the `bias` block still loads, with today's meaning of `bias`.
    A model factory's run has none: one CheckpointError line says so."""
    header = checkpoint.header
    if header.factory:
        raise CheckpointError(f"{checkpoint.path} was trained from the model factory {printable(header.factory)}, "
                              "not a spec: attncomp.train.factory.load_trained reads it")
    text = header.spec
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != header.spec_hash:
        raise CheckpointError(f"{checkpoint.path}: field 'spec_hash' does not match its stored spec")
    if text not in _specs:
        _specs[text] = ir.load_flat(text, f"{checkpoint.path} (its stored spec)")
    return _specs[text]


def load(path: str | Path, *, model: bool = True) -> Checkpoint:
    """A checked checkpoint (file or sharded directory); `model=False` leaves its weights unread."""
    path = Path(path)
    try:
        path.is_dir()
    except (OSError, ValueError) as err:  # a name too long, a NUL byte
        reason = os_reason(err) if isinstance(err, OSError) else "a NUL byte in the path"
        raise CheckpointError(f"cannot read {shown_path(path)}: {reason}") from None
    if path.is_dir():
        header = path / sharded.HEADER
        if not header.is_file():
            raise CheckpointError(f"{path} is a directory without {sharded.HEADER}: not a sharded checkpoint"
                                  f"{_in_run_directory(path)}")
        found = from_payload(path, _torch_load(header), model=False)
        if not found.header.sharded:
            raise CheckpointError(f"{path}: field 'sharded' is false in a sharded checkpoint's header")
        found.stored = sharded.check_metadata(path)
        if model:
            found.model = check_model(path, sharded.read_full(path, {"model"}).get("model"))
    elif path.is_file():
        found = from_payload(path, _torch_load(path), model=model)
        if found.header.sharded:
            raise CheckpointError(f"{path}: field 'sharded' is true in a single-file checkpoint")
    else:
        raise CheckpointError(f"no checkpoint {path}")
    found.path = path
    check_identity(found)
    return found


def check_identity(checkpoint: Checkpoint) -> None:
    """The stored spec parses alone and matches its hash; a factory's run: its recipe matches the hash."""
    header = checkpoint.header
    if not header.factory:
        stored_spec(checkpoint)
    elif hashlib.sha256(header.recipe.encode("utf-8")).hexdigest() != header.spec_hash:
        raise CheckpointError(f"{checkpoint.path}: field 'spec_hash' does not match its stored recipe")


def stored_model(checkpoint: Checkpoint):
    """What says which model a checkpoint holds: its spec's model block, or its model factory's name."""
    return checkpoint.header.factory or stored_spec(checkpoint).model


def read(path: str | Path) -> Checkpoint:
    """The whole checkpoint in single-file form: a sharded one's model and optimiser are gathered."""
    found = load(path)
    if found.header.sharded:
        if found.header.kind == "train":
            found.optimizer = sharded.read_full(found.path, {"optimizer"}).get("optimizer")
        found.header = dataclasses.replace(found.header, sharded=False)
    return found


def read_trained(path: str | Path, gathered: bool = True) -> Checkpoint:
    """A checked checkpoint file, sharded directory (gathered into one with `gathered`) or safetensors
    export (read without unpickling anything): every field checked, the spec parsed alone, its hash verified."""
    if isinstance(path, (str, os.PathLike)) and safetensors_dir.is_export(path):
        return safetensors_dir.read(path)
    return read(path) if gathered else load(path)
