"""The checkpoint's fields, their types, and the one place that checks them.

On disk a checkpoint is a dict that `torch.load(weights_only=True)` accepts (tensors and plain
values); in memory it is a `Checkpoint`: a typed `Header`, the model's state dict and, for a train
checkpoint, the training state. `from_payload` turns the first into the second or raises one
`CheckpointError` line naming the file and the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from attncomp.errors import TrainingError
from attncomp.files import parse_json

FORMAT = "attncomp-checkpoint"
VERSION = 2  # 2: `sharded` and `averaged` always present; a checkpoint may be a DCP directory
KNOWN_VERSIONS = (1, 2)
KINDS = ("train", "average")
V1_DEFAULTS = {"sharded": False, "averaged": []}  # fields version 1 may leave out
TRAINING = ("optimizer", "scheduler", "rng")  # train checkpoints only


class CheckpointError(TrainingError):
    """A file that is not a whole, consistent attncomp checkpoint; the message names file and field."""


@dataclass(frozen=True)
class Header:
    """Everything about a checkpoint but its tensors of weights and optimiser state."""

    attncomp: str  # the attncomp version that wrote it
    kind: str  # "train" (resumable) or "average"
    spec: str  # the resolved spec, canonical flat text (no `extends`)
    spec_hash: str  # sha256 of `spec`
    tokenizers: dict[str, torch.Tensor]  # {"src", "tgt"}: sentencepiece models as uint8 tensors
    data: str  # the data manifest (JSON text) it was trained on
    step: int  # updates done
    position: tuple[int, int]  # (epoch, update index) where the data continues
    metrics: dict[str, float]  # the last evaluation
    sharded: bool = False  # the weights are DCP shards in a checkpoint directory
    averaged: tuple[str, ...] = ()  # kind "average": the checkpoints it is the mean of
    version: int = VERSION
    # a run of a model factory (attncomp.train.factory) has no spec: `spec` is "", `factory` names the function
    # (module:function) and `recipe` holds its recipe's canonical text; `spec_hash` is then the recipe's sha256
    factory: str = ""
    recipe: str = ""

    def fields(self) -> dict[str, Any]:
        """The header as stored: plain values and tensors."""
        return {"format": FORMAT, "version": VERSION, "attncomp": self.attncomp, "kind": self.kind,
                "spec": self.spec, "spec_hash": self.spec_hash, "tokenizers": dict(self.tokenizers),
                "data": self.data, "step": self.step, "position": list(self.position),
                "metrics": dict(self.metrics), "sharded": self.sharded, "averaged": list(self.averaged),
                **({"factory": self.factory, "recipe": self.recipe} if self.factory else {})}


@dataclass
class Checkpoint:
    """A loaded checkpoint. `model` is empty for a sharded one until its shards are read."""

    header: Header
    model: dict[str, torch.Tensor] = field(default_factory=dict)
    optimizer: dict | None = None
    scheduler: dict | None = None
    rng: list[dict] | None = None  # one RNG state per worker that wrote it
    path: Path | None = None
    stored: int | None = None  # elements of the model's tensors on disk, from their shapes (none read)

    def stored_elements(self) -> int | None:
        """How many weights the checkpoint holds, known without reading them: `stored`, else counted
        from `model` (None when neither is known)."""
        if self.stored is not None:
            return self.stored
        return sum(t.numel() for t in self.model.values()) if self.model else None

    def payload(self) -> dict[str, Any]:
        """What `torch.save` writes (single-file form)."""
        out = {**self.header.fields(), "model": self.model}
        if self.header.kind == "train":
            out.update(optimizer=self.optimizer, scheduler=self.scheduler, rng=self.rng)
        return out


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _json_object(v: Any) -> bool:
    try:
        return isinstance(v, str) and isinstance(parse_json(v, "data", ValueError), dict)
    except ValueError:
        return False


def _tokenizers(v: Any) -> bool:
    return isinstance(v, dict) and set(v) == {"src", "tgt"} and all(
        isinstance(t, torch.Tensor) and t.dtype == torch.uint8 and t.dim() == 1 and t.numel() > 0
        for t in v.values())


BEST, BEST_STEP, STALE = "best", "best_step", "stale"  # train.validation's judgement, kept in the metrics


def _metrics(v: Any) -> bool:
    """Names to numbers; the judgement's three, when there, a finite best and two non-negative integers."""
    if not (isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, (int, float)) and not isinstance(x, bool)
                                        for k, x in v.items())):
        return False
    judged = [key for key in (BEST, BEST_STEP, STALE) if key in v]
    return not judged or (len(judged) == 3 and math.isfinite(v[BEST]) and _int(v[BEST_STEP]) and _int(v[STALE]))


def _rng(v: Any) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(
        isinstance(s, dict) and isinstance(s.get("torch"), torch.Tensor) and "python" in s for s in v)


# field -> (test, what a good value is)
FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "attncomp": (lambda v: isinstance(v, str), "a version string"),
    "kind": (lambda v: v in KINDS, '"train" or "average"'),
    "spec": (lambda v: isinstance(v, str) and bool(v.strip()), "the spec's canonical text"),
    "spec_hash": (lambda v: isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v),
                  "a sha256 hex digest"),
    "tokenizers": (_tokenizers, 'a dict {"src", "tgt"} of non-empty 1-D uint8 tensors'),
    "data": (_json_object, "the data manifest as JSON text of an object"),
    "step": (_int, "a non-negative integer"),
    "position": (lambda v: isinstance(v, (list, tuple)) and len(v) == 2 and all(map(_int, v)),
                 "[epoch, update index], two non-negative integers"),
    "metrics": (_metrics, "a dict of names to numbers (best: finite; best_step, stale: non-negative integers)"),
    "sharded": (lambda v: isinstance(v, bool), "true or false"),
    "averaged": (lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
                 "a list of checkpoint names"),
}
# the fields of a model factory's run (absent from a spec's): the spec's field is then empty
FACTORY_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "factory": (lambda v: isinstance(v, str) and bool(v.strip()), "a model factory's name (module:function)"),
    "recipe": (lambda v: isinstance(v, str) and bool(v.strip()), "the recipe's canonical text"),
}
TRAINING_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "optimizer": (lambda v: isinstance(v, dict) and "state" in v and "param_groups" in v,
                  "an optimiser state dict"),
    "scheduler": (lambda v: isinstance(v, dict), "a scheduler state dict"),
    "rng": (_rng, "a list of RNG states, one per worker"),
}


def _describe(v: Any) -> str:
    return f"a tensor of {v.dtype}" if isinstance(v, torch.Tensor) else type(v).__name__


def check_field(path: Path, payload: dict, name: str, test: Callable[[Any], bool], what: str) -> Any:
    if name not in payload:
        raise CheckpointError(f"{path}: field '{name}' is missing (it should be {what})")
    value = payload[name]
    if not test(value):
        raise CheckpointError(f"{path}: field '{name}' should be {what}, found {_describe(value)}")
    return value


def check_tag(path: Path, payload: Any) -> int:
    """The format tag and a version this attncomp reads."""
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not an attncomp checkpoint")
    version = payload.get("version")
    if version not in KNOWN_VERSIONS:
        raise CheckpointError(f"{path}: field 'version' is {version!r}; this attncomp reads versions "
                              f"{', '.join(map(str, KNOWN_VERSIONS))}")
    return version


def header_from(path: Path, payload: Any) -> Header:
    """A typed header from a stored dict, every field checked (version 1 may omit `sharded`, `averaged`)."""
    version = check_tag(path, payload)
    if version == 1:  # its `sharded` meant "written with --fsdp"; its tensors are always whole, in the file
        payload = {**V1_DEFAULTS, **payload, "sharded": False}
    factory = "factory" in payload
    fields = {**FIELDS, **FACTORY_FIELDS} if factory else FIELDS
    if factory:  # a factory's run stores no spec
        fields["spec"] = (lambda v: v == "", "empty in a model factory's run (its recipe is in 'recipe')")
    values = {name: check_field(path, payload, name, test, what) for name, (test, what) in fields.items()}
    values["position"] = tuple(values["position"])
    values["averaged"] = tuple(values["averaged"])
    return Header(**values, version=version)


def check_model(path: Path, model: Any, values: bool = True) -> dict[str, torch.Tensor]:
    """A state dict of tensors; with `values`, their floating-point values are all finite (this reads them)."""
    if not isinstance(model, dict) or not model or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in model.items()):
        raise CheckpointError(f"{path}: field 'model' should be a non-empty dict of parameter names to tensors")
    for name, tensor in model.items() if values else ():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise CheckpointError(f"{path}: field 'model': {name} has {bad} non-finite value(s) (NaN or inf); "
                                  "such weights cannot decode or train")
    return model


def from_payload(path: Path, payload: Any, *, model: bool = True) -> Checkpoint:
    """The whole single-file checkpoint, checked; `model=False` leaves the weights' values unread (their
    names and types are still checked) and the model out of the result."""
    header = header_from(path, payload)
    found = Checkpoint(header, path=path)
    if header.kind == "train":
        for name, (test, what) in TRAINING_FIELDS.items():
            if not (name == "optimizer" and header.sharded):  # a sharded one's optimiser state is in its shards
                check_field(path, payload, name, test, what)
        found.optimizer, found.scheduler, found.rng = (payload.get(k) for k in TRAINING)
    if not header.sharded:
        checked = check_model(path, payload.get("model"), values=model)
        found.model = checked if model else {}
        found.stored = sum(t.numel() for t in checked.values())  # shapes only (memory-mapped, unread)
    return found


def gist(err: Exception) -> str:
    return str(err).strip().splitlines()[0][:160] if str(err).strip() else type(err).__name__
