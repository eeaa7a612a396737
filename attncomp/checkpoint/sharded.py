"""Sharded checkpoints (`--fsdp`) with torch.distributed.checkpoint (DCP).

A sharded checkpoint is a directory `checkpoint_NNNNNNNN/`:

    header.pt                 the typed header, scheduler and RNG states (written by rank 0)
    .metadata, __R_0.distcp   DCP: {"model": ..., "optimizer": ...}, each rank writing its own shard

It is written as `checkpoint_NNNNNNNN.tmp/` and renamed into place by rank 0 after every rank has
written, so a killed save leaves no directory that looks whole. Reading reshards: any number of
workers (or one process without a process group) loads it.

DCP pickles its index (`.metadata`, and `__R.metadata` per rank) and reads the non-tensor items of a
state dict ("byte items": the optimiser's hyper-parameters) with `torch.load(weights_only=False)`.
Nothing a checkpoint directory holds runs: the index is read by an unpickler that admits only
METADATA_CLASSES (DCP's own dataclasses, torch.Size, dtypes, layouts, memory formats, a path), and
byte items are read with `weights_only=True` before DCP sees them (attncomp.checkpoint.dcp_safe, imported
only when a sharded checkpoint is read: DCP pulls in DTensor, seconds of start-up for every command and
training worker that never meets one). Tensors DCP reads itself with
`weights_only=True`; the header is a checkpoint file (`torch.load(weights_only=True)`).
"""

from __future__ import annotations

import math
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from attncomp.checkpoint.schema import Checkpoint, CheckpointError, gist

HEADER = "header.pt"
METADATA = ".metadata"
def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def save(checkpoint: Checkpoint, states: dict[str, Any], path: Path, rank: int, write_file) -> None:
    """Collective: every rank writes its shard of `states` ({"model", "optimizer"} sharded state dicts);
    rank 0 writes the header (`write_file(payload, path)`, atomic) and renames the directory into place."""
    import torch.distributed.checkpoint as dcp

    tmp = path.with_name(path.name + ".tmp")
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    _barrier()
    dcp.save(states, checkpoint_id=str(tmp))
    if rank == 0:
        header = {k: v for k, v in checkpoint.payload().items() if k not in ("model", "optimizer")}
        write_file(header, tmp / HEADER)
        old = path.with_name(path.name + ".old.tmp")  # a checkpoint of the same step (an unreadable one)
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
        shutil.rmtree(old, ignore_errors=True)
    _barrier()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_metadata(path: Path) -> int:
    """The DCP index of a sharded checkpoint is readable and every shard file it names is whole (present
    and long enough), without reading the shards. Returns the number of model weights it indexes."""
    from attncomp.checkpoint.dcp_safe import SafeReader

    if not (path / METADATA).exists():
        raise CheckpointError(f"{path}: its shard index {METADATA} is missing")
    try:
        metadata = SafeReader(str(path)).read_metadata()
    except CheckpointError:
        raise
    except Exception as err:  # a foreign index DCP cannot use
        raise CheckpointError(f"{path}: its shard index {METADATA} is unreadable ({gist(err)})") from None
    needed: dict[str, int] = {}
    for info in (metadata.storage_data or {}).values():
        name = getattr(info, "relative_path", None)
        if name is not None:
            needed[name] = max(needed.get(name, 0), info.offset + info.length)
    for name, size in sorted(needed.items()):
        shard = path / name
        have = shard.stat().st_size if shard.is_file() else -1
        if have < size:
            what = "is missing" if have < 0 else f"has {have} bytes of {size}"
            raise CheckpointError(f"{path}: shard {name} {what}")
    entries = metadata.state_dict_metadata if isinstance(metadata.state_dict_metadata, dict) else {}
    return sum(max(0, math.prod(entry.size)) for key, entry in entries.items()
               if isinstance(key, str) and key.startswith("model.")
               and isinstance(getattr(entry, "size", None), torch.Size))


def read_full(path: Path, keys: set[str]) -> dict[str, Any]:
    """The whole (unsharded) tensors under `keys` in one process, without any collective."""
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    from attncomp.checkpoint.dcp_safe import SafeKeysPlanner, SafeReader

    state: dict[str, Any] = {}  # filled from the shards' metadata (what _load_state_dict_from_keys does, minus
    try:  # its collectives: the runner's final average reads shards on rank 0 alone)
        with warnings.catch_warnings():  # "assuming the intent is to load in a single process": it is
            warnings.simplefilter("ignore", UserWarning)
            _load_state_dict(state, storage_reader=SafeReader(str(path)), no_dist=True,
                             planner=SafeKeysPlanner(keys=keys))
    except (Exception, CheckpointException) as err:  # a missing or torn shard file, a refused byte item
        raise CheckpointError(f"{path}: its shards are unreadable ({gist(err)})") from None
    return state


def load_into(path: Path, states: dict[str, Any]) -> None:
    """Collective under a process group: fill `states` ({"model", "optimizer"}, sharded or whole) in place,
    resharding to however many workers this run has."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    from attncomp.checkpoint.dcp_safe import SafePlanner, SafeReader

    try:
        with warnings.catch_warnings():  # one process without a process group: "assuming the intent..."
            warnings.simplefilter("ignore", UserWarning)
            dcp.load(states, storage_reader=SafeReader(str(path)), planner=SafePlanner(),
                     no_dist=not dist.is_initialized())
    except (Exception, CheckpointException) as err:  # DCP's own exception is a BaseException
        raise CheckpointError(f"{path}: its shards do not load into this run's model ({gist(err)})") from None
