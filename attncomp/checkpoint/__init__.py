"""The checkpoint: a typed, versioned artifact, and the only code that knows its fields.

A checkpoint is one file `checkpoint_NNNNNNNN.pt` (what `torch.load(weights_only=True)` accepts:
tensors and plain values), or under `--fsdp` a directory `checkpoint_NNNNNNNN/` of DCP shards
beside its header (see attncomp.checkpoint.sharded). Its fields are in attncomp.checkpoint.schema;
`load` checks every one of them, the stored spec (parsed alone, never following `extends`, and its
hash) and the model's tensors (present, finite), and fails with one line naming file and field.

Saving writes `NAME.tmp` and renames it over `NAME`, so a crash mid-write leaves the previous
checkpoint intact; a leftover `.tmp` is never read, and `remove_stale` deletes it at the next start.
Pruning and averaging count only checkpoints that load, so an unreadable one never pushes out a
good one; averaging streams, holding one checkpoint and a float64 running sum at a time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import torch

from attncomp.files import os_reason, shown_path, write_atomically

from attncomp.checkpoint import sharded
from attncomp.checkpoint.average import average
from attncomp.checkpoint.schema import (
    FORMAT, KNOWN_VERSIONS, VERSION, Checkpoint, CheckpointError, Header, check_model, from_payload,
)

PATTERN = re.compile(r"checkpoint_(\d+)(\.pt)?$")
AVERAGE = "checkpoint_avg.pt"
BEST = "checkpoint_best.pt"  # train.validation's best checkpoint: never pruned (PATTERN does not match it)

__all__ = ["AVERAGE", "BEST", "FORMAT", "KNOWN_VERSIONS", "VERSION", "Checkpoint", "CheckpointError", "Header",
           "average", "checkpoint_path", "is_checkpoint_dir", "last_readable", "latest_readable", "listed", "load", "prune", "read", "readable",
           "remove_stale", "save", "sharded", "stored_spec", "write_file"]

_specs: dict[tuple[str, int | None], Any] = {}  # (text, weights stored) -> Spec: a run's checkpoints parse it once


def checkpoint_path(directory: Path, step: int, sharded_dir: bool = False) -> Path:
    return directory / (f"checkpoint_{step:08d}" + ("" if sharded_dir else ".pt"))


def write_file(payload: dict, path: Path) -> None:
    """torch.save to a temporary file, flushed to disk, then renamed into place."""
    write_atomically(path, lambda f: torch.save(payload, f), tmp_name=path.name + ".tmp")  # `remove_stale` knows that name


def save(checkpoint: Checkpoint, path: Path) -> None:
    """The single-file form, atomically."""
    write_file(checkpoint.payload(), path)


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
        raise CheckpointError(f"{path} is not a readable attncomp checkpoint ({reason[:160]})") from None


def stored_spec(checkpoint: Checkpoint):
    """The checkpoint's spec (an ir Spec), parsed alone. The recorded hash is that of the stored text
    (the canonical text when it was written), so a checkpoint stays readable after the canonical form
    gains keys: a spec written before the `bias` block still loads, with today's meaning of `bias`."""
    from attncomp.lower.size import load_stored

    text = checkpoint.header.spec
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != checkpoint.header.spec_hash:
        raise CheckpointError(f"{checkpoint.path}: field 'spec_hash' does not match its stored spec")
    key = (text, checkpoint.stored_elements())  # a spec over the size limit is read only with its weights
    if key not in _specs:
        _specs[key] = load_stored(text, f"{checkpoint.path} (its stored spec)", stored=key[1])
    return _specs[key]


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
            raise CheckpointError(f"{path} is a directory without {sharded.HEADER}: not a sharded checkpoint")
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
    stored_spec(found)
    return found


def read(path: str | Path) -> Checkpoint:
    """The whole checkpoint in single-file form: a sharded one's model and optimiser are gathered."""
    found = load(path)
    if found.header.sharded:
        if found.header.kind == "train":
            found.optimizer = sharded.read_full(found.path, {"optimizer"}).get("optimizer")
        found.header = dataclasses.replace(found.header, sharded=False)
    return found


def readable(path: Path) -> bool:
    try:
        load(path, model=False)
        return True
    except CheckpointError:
        return False


def is_checkpoint_dir(path: Path) -> bool:
    """A sharded checkpoint (rather than a run directory)."""
    return path.is_dir() and (path / sharded.HEADER).exists()


def listed(directory: Path) -> list[tuple[int, Path]]:
    """Training checkpoints in a run directory (files and sharded directories), oldest first."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := PATTERN.search(p.name))]
    return sorted(found)


def latest_readable(directory: Path, warn: Callable[[str], Any] = print) -> Checkpoint | None:
    """The newest checkpoint whose header loads (its weights unread); unreadable newer ones are reported."""
    for _, path in reversed(listed(directory)):
        try:
            return load(path, model=False)
        except CheckpointError as err:
            warn(f"skipping {err}")
    return None


def last_readable(directory: Path, count: int, warn: Callable[[str], Any] = print) -> list[Path]:
    """The newest `count` checkpoints that load, oldest first; the unreadable ones among them are reported."""
    found: list[Path] = []
    for _, path in reversed(listed(directory)):
        if len(found) == count:
            break
        try:
            load(path, model=False)
            found.append(path)
        except CheckpointError as err:
            warn(f"skipping {err}")
    return found[::-1]


def _delete(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def prune(directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` readable checkpoints; unreadable ones are neither counted nor deleted."""
    good = [p for _, p in listed(directory) if readable(p)]
    gone = good[:-keep] if keep > 0 else []
    for path in gone:
        _delete(path)
    return gone


def remove_stale(directory: Path) -> list[Path]:
    """Delete the `*.tmp` files and directories a killed save left behind."""
    if not directory.is_dir():
        return []
    stale = [p for p in directory.iterdir() if p.name.startswith("checkpoint_") and p.name.endswith(".tmp")]
    for path in stale:
        _delete(path)
    return stale
