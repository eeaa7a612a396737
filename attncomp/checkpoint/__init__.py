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

import re
import shutil
from pathlib import Path
from typing import Any, Callable

import torch

from attncomp.checkpoint import safetensors_dir, sharded
from attncomp.checkpoint.average import average
from attncomp.checkpoint.reading import load, read, read_trained, stored_model, stored_spec
from attncomp.checkpoint.schema import FORMAT, KNOWN_VERSIONS, VERSION, Checkpoint, CheckpointError, Header
from attncomp.files import write_atomically

PATTERN = re.compile(r"checkpoint_(\d+)(\.pt)?$")
AVERAGE = "checkpoint_avg.pt"
BEST = "checkpoint_best.pt"  # train.validation's best checkpoint: never pruned (PATTERN does not match it)

__all__ = ["AVERAGE", "BEST", "FORMAT", "KNOWN_VERSIONS", "VERSION", "Checkpoint", "CheckpointError", "Header",
           "average", "checkpoint_path", "is_checkpoint_dir", "last_readable", "latest_readable", "listed", "load",
           "prune", "read", "read_trained", "readable", "remove_stale", "safetensors_dir", "save", "sharded",
           "stored_model", "stored_spec", "write_file"]

def checkpoint_path(directory: Path, step: int, sharded_dir: bool = False) -> Path:
    return directory / (f"checkpoint_{step:08d}" + ("" if sharded_dir else ".pt"))


def write_file(payload: dict, path: Path) -> None:
    """torch.save to a temporary file, flushed to disk, then renamed into place."""
    write_atomically(path, lambda f: torch.save(payload, f), tmp_name=path.name + ".tmp")  # `remove_stale` knows that name


def save(checkpoint: Checkpoint, path: Path) -> None:
    """The single-file form, atomically."""
    write_file(checkpoint.payload(), path)


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
