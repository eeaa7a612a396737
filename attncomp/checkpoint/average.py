"""Streaming checkpoint averaging: one checkpoint's weights in memory at a time, summed in float64.

Peak memory is the running sum (8 bytes per weight), the one checkpoint being read (memory-mapped:
only its model's pages are read, never its optimiser state) and the result; it does not grow with the
number of checkpoints. tests/train/test_checkpoint_average.py measures it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import torch

from attncomp.checkpoint.reading import load, stored_model
from attncomp.checkpoint.schema import Checkpoint, CheckpointError


class _Sum:
    """The running float64 sum of the floating-point weights; other tensors are taken from the last."""

    def __init__(self) -> None:
        self.total: dict[str, torch.Tensor] = {}
        self.dtypes: dict[str, torch.dtype] = {}
        self.count = 0
        self.first: Path | None = None

    def add(self, path: Path, model: dict[str, torch.Tensor]) -> None:
        if not self.count:
            self.first = path
            self.dtypes = {k: v.dtype for k, v in model.items()}
            self.total = {k: v.to(torch.float64, copy=True) if v.is_floating_point() else v.clone()
                          for k, v in model.items()}
        else:
            if model.keys() != self.total.keys():
                changed = sorted(set(model) ^ set(self.total))[:3]
                raise CheckpointError(f"{path} has other parameters than {self.first} ({', '.join(changed)})")
            for key, value in model.items():
                if value.shape != self.total[key].shape:
                    raise CheckpointError(f"{path}: {key} has shape {tuple(value.shape)}, "
                                          f"{self.first} has {tuple(self.total[key].shape)}")
                if value.is_floating_point():
                    self.total[key].add_(value)
                else:
                    self.total[key] = value.clone()
        self.count += 1

    def mean(self) -> dict[str, torch.Tensor]:
        out = {}
        for key in list(self.total):
            value = self.total.pop(key)  # free the float64 sum tensor by tensor
            out[key] = value.div_(self.count).to(self.dtypes[key]) if value.is_floating_point() else value
        return out


def _same_tokenizers(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    """Whether two checkpoints read and write text alike (their token ids mean the same pieces)."""
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def average(paths: list[Path], warn: Callable[[str], Any] | None = None) -> Checkpoint:
    """The last readable checkpoint with its model replaced by the mean over `paths` (kind "average").

    With `warn`, unreadable checkpoints are reported through it and skipped; without, the first one is
    an error. Checkpoints of different models are always an error (a run extended with --resume changes
    only its recipe, so its checkpoints average).
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    running, used, skipped = _Sum(), [], []
    last, last_path, last_model = None, None, None
    for path in paths:
        try:
            found = load(path)
        except CheckpointError as err:
            if warn is None:
                raise
            warn(f"skipping {err}")
            skipped.append(path)
            continue
        model_spec = stored_model(found)  # a run extended with --resume changes the recipe, not the model
        if last is not None and model_spec != last_model:
            raise CheckpointError(f"{path} holds another model than {last_path}; they cannot be averaged")
        if last is not None and not _same_tokenizers(found.header.tokenizers, last.tokenizers):
            raise CheckpointError(f"{path} has other tokenizers than {last_path}; they cannot be averaged")
        last_model = model_spec
        running.add(Path(path), found.model)
        # keep a copy of the small header tensors only: the file's memory map is released with `found`
        last = dataclasses.replace(found.header, tokenizers={k: v.clone() for k, v in found.header.tokenizers.items()})
        last_path = found.path
        del found
        used.append(Path(path).name)
    if last is None:
        raise CheckpointError(f"none of the {len(paths)} checkpoint(s) is readable: {', '.join(map(str, skipped))}")
    header = dataclasses.replace(last, kind="average", sharded=False, averaged=tuple(used))
    return Checkpoint(header, model=running.mean(), path=last_path)
