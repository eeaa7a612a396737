"""What a spec will cost before anything is built: its exact parameter count and their memory.

Counted from the lowered units' members (the parameter plan: each layer kind's once, times its
layers; tied weights once, as a tied projection reads the embedding rather than owning a tensor),
without building a module, so `check` and `build` can refuse a spec whose parameters alone would not
fit before spending minutes and gigabytes on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from typing import Sequence

from attncomp import ir
from attncomp.errors import SpecError
from attncomp.ir import nodes
from attncomp.lower.family import model_unit
from attncomp.lower.program import Lowering
from attncomp.lower.units import Leaf, Param, Unit, UnitList

FLOAT32_BYTES = 4
MAX_PARAM_BYTES = 4 << 30  # 4 GiB of float32 parameters (1 Gi parameters); `--force` / force=True passes it


@dataclass(frozen=True)
class Size:
    """A spec's parameters: the count, and bytes as float32 (weights only; training with Adam needs
    about four times as much, plus activations)."""

    params: int

    @property
    def bytes(self) -> int:
        return self.params * FLOAT32_BYTES

    def describe(self) -> str:
        return f"{self.params:,} parameters, {_bytes(self.bytes)} as float32"


def limit_text() -> str:
    return _bytes(MAX_PARAM_BYTES)


def _bytes(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _count(unit: Unit, memo: dict[int, int]) -> int:
    """The parameters a unit holds, its children's included."""
    if id(unit) not in memo:
        total = 0
        for member in unit.members.values():
            if isinstance(member, Leaf):
                total += sum(math.prod(shape) for shape in member.shapes().values())
            elif isinstance(member, Param):
                total += math.prod(member.shape)
            elif isinstance(member, UnitList):
                total += sum(_count(u, memo) for u in member.units)
            else:
                total += _count(member, memo)
        memo[id(unit)] = total
    return memo[id(unit)]


def parameter_count(spec: nodes.Spec) -> int:
    """The exact number of trainable parameters the compiled model will have (tied weights once)."""
    return _count(model_unit(Lowering(spec.model)), {})


def estimate(spec: nodes.Spec) -> Size:
    return Size(parameter_count(spec))


FORCE = "--force (or attncomp.compile(..., force=True)) builds it anyway"


def refuse_if_too_large(spec: nodes.Spec, origin: str | None = None, limit: int | None = None,
                        remedy: str = FORCE) -> Size:
    """The spec's size, or a SpecError when its float32 parameters exceed `limit` bytes (default
    MAX_PARAM_BYTES). `origin` (the spec's file) starts the message, `remedy` ends it."""
    limit = MAX_PARAM_BYTES if limit is None else limit
    size = estimate(spec)
    if size.bytes > limit:
        _refuse(spec, size, origin, limit, remedy)
    return size


def _refuse(spec: nodes.Spec, size: Size, origin: str | None, limit: int, remedy: str) -> None:
    where = f"{origin}: " if origin else ""
    raise SpecError(f"{where}model {spec.model.name} has {size.describe()}, over the limit of {_bytes(limit)} "
                    f"(building it would take very long and very much memory); {remedy}")


STORED = ("a spec stored in a checkpoint or export is read over the limit only with all its weights "
          "(this one may be damaged or crafted)")


def load_stored(text: str, origin: str, overrides: Sequence[str] = (), stored: int | None = None) -> nodes.Spec:
    """The spec stored in an artifact (a checkpoint, an export), read by ir.load_flat and held to the size
    limit unless the artifact holds its weights: `stored` is the number of elements of the tensors it
    stores (counted from their shapes, nothing read). Its hash is no proof of its origin, so a stored
    spec that describes more parameters than are stored with it (a damaged or crafted one, or `--set`
    overrides that grow it) is refused like a spec file; a model trained with `--force`, or imported,
    whose weights are all there, is not: it is as large as what is already on disk."""
    return hold_stored(ir.load_flat(text, origin, overrides), origin, stored)


def hold_stored(spec: nodes.Spec, origin: str, stored: int | None = None) -> nodes.Spec:
    """A spec read from an artifact, held to the size limit as load_stored says (`stored`: the elements of the
    tensors stored with it, None when none are)."""
    size = estimate(spec)
    if size.bytes > MAX_PARAM_BYTES and (stored is None or stored < size.params):
        held = "none of its weights read" if stored is None else f"only {stored:,} weights stored with it"
        _refuse(spec, size, origin, MAX_PARAM_BYTES, f"{held}; {STORED}")
    return spec
