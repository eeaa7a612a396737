"""Checkpoints: written atomically, loaded with weights_only, kept k at a time, averaged.

A checkpoint is a dict of tensors and plain values (what `torch.load(weights_only=True)` accepts):

    format, version, attncomp    "attncomp-checkpoint", 1, the attncomp version that wrote it
    kind                         "train" (resumable) or "average"
    spec, spec_hash              the resolved spec in canonical text, and its sha256
    tokenizers                   {"src": uint8 tensor, "tgt": ...}: the sentencepiece models
    data                         the data manifest (JSON text) it was trained on
    step, position               updates done; (epoch, update index) where the data continues
    model                        the state dict (canonical names)
    optimizer, scheduler, rng    training state, RNG states of every worker (train checkpoints only)
    metrics                      the last evaluation

Saving writes `NAME.tmp` and renames it over `NAME`, so a crash mid-write leaves the previous
checkpoint intact; a leftover `.tmp` is never read.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import torch

from attncomp.errors import TrainingError

FORMAT = "attncomp-checkpoint"
VERSION = 1
PATTERN = re.compile(r"checkpoint_(\d+)\.pt$")
AVERAGE = "checkpoint_avg.pt"
FAULT = "ATTNCOMP_FAULT_KILL_IN_SAVE"  # tests: SIGKILL this process halfway through the Nth save

_saves = 0


def checkpoint_path(directory: Path, step: int) -> Path:
    return directory / f"checkpoint_{step:08d}.pt"


def save(payload: dict, path: Path) -> None:
    """torch.save to a temporary file, flushed to disk, then renamed into place."""
    global _saves
    _saves += 1
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        if os.environ.get(FAULT) == str(_saves):
            f.flush()
            f.truncate(f.tell() // 2)
            os.fsync(f.fileno())
            os.kill(os.getpid(), signal.SIGKILL)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """A checkpoint's contents, or a clear error for anything that is not a whole attncomp checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise TrainingError(f"no checkpoint {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # truncated zip, pickle of foreign objects, not a torch file at all
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise TrainingError(f"{path} is not a readable attncomp checkpoint ({reason[:160]})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise TrainingError(f"{path} is not an attncomp checkpoint")
    if payload.get("version") != VERSION:
        raise TrainingError(f"{path} is checkpoint format {payload.get('version')}; this attncomp reads {VERSION}")
    return payload


def listed(directory: Path) -> list[tuple[int, Path]]:
    """Training checkpoints in a run directory, oldest first."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := PATTERN.search(p.name))]
    return sorted(found)


def latest(directory: Path, warn=print) -> tuple[Path, dict] | None:
    """The newest checkpoint that loads; unreadable newer ones are reported and skipped."""
    for _, path in reversed(listed(directory)):
        try:
            return path, load(path)
        except TrainingError as err:
            warn(f"skipping {err}")
    return None


def prune(directory: Path, keep: int) -> None:
    for _, path in listed(directory)[:-keep]:
        path.unlink(missing_ok=True)


def average(paths: list[Path]) -> dict:
    """The last checkpoint, its model weights replaced by the mean over all `paths`."""
    if not paths:
        raise TrainingError("no checkpoints to average")
    payloads = [load(p) for p in paths]
    first = payloads[0]
    shapes = {k: v.shape for k, v in first["model"].items()}
    for p, payload in zip(paths, payloads):  # a run extended with --resume changes the spec, not the model
        if {k: v.shape for k, v in payload["model"].items()} != shapes:
            raise TrainingError(f"{p} holds another model than {paths[0]}; they cannot be averaged")
    state = {}
    for key, value in payloads[-1]["model"].items():
        if value.is_floating_point():
            total = sum(p["model"][key].to(torch.float64) for p in payloads)
            state[key] = (total / len(payloads)).to(value.dtype)
        else:
            state[key] = value
    averaged = {k: v for k, v in payloads[-1].items() if k not in ("optimizer", "scheduler", "rng")}
    averaged.update(kind="average", model=state, averaged=[p.name for p in paths])
    return averaged
