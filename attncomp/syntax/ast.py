"""The syntax tree of a spec file: blocks, assignments and values, each with its source span.

The tree says nothing about which keys exist; `attncomp.ir.build` checks it against the IR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from attncomp.errors import Span


@dataclass(frozen=True)
class Number:
    """`512`, `1e-9`, `100_000`, or with a unit: `65M`, `10min`, `5%`."""

    text: str  # the digits as written, without the unit
    unit: str  # "" when there is none
    negative: bool
    span: Span


@dataclass(frozen=True)
class Name:
    """A bare word: `post`, `relu`, `true`, `none`."""

    id: str
    span: Span


@dataclass(frozen=True)
class String:
    value: str
    span: Span


@dataclass(frozen=True)
class Kwarg:
    name: str
    value: "Value"
    span: Span


@dataclass(frozen=True)
class Call:
    """`noam(warmup = 4000)`, `shared(37000)`, `local(window = 16)`."""

    name: str
    args: tuple["Value", ...]
    kwargs: tuple[Kwarg, ...]
    span: Span


@dataclass(frozen=True)
class Numbers:
    """`[1.0, 1.25, 2]`: a list of values, the IR checks they are numbers (LongRoPE's factors)."""

    items: tuple["Value", ...]
    span: Span  # the opening bracket


@dataclass(frozen=True)
class PlusMinus:
    """`65M +- 5%`: a value and how far from it is still right."""

    value: "Value"
    tolerance: "Value"
    span: Span


@dataclass(frozen=True)
class Offset:
    """`src + 50`: a length relative to the source sentence."""

    base: str
    amount: "Value"
    span: Span


Value = Union[Number, Name, String, Call, Numbers, PlusMinus, Offset]


@dataclass(frozen=True)
class Assign:
    key: tuple[str, ...]  # dotted keys split: dropout.residual -> ("dropout", "residual")
    value: Value
    span: Span  # the key


@dataclass(frozen=True)
class Block:
    name: str
    label: str | None
    items: tuple["Item", ...]
    span: Span  # the block's name
    label_span: Span | None = None


Item = Union[Assign, Block]


@dataclass(frozen=True)
class Extends:
    path: str
    span: Span


@dataclass(frozen=True)
class File:
    """One parsed spec file (its `extends` not yet followed)."""

    path: str
    extends: Extends | None
    items: tuple[Item, ...]
