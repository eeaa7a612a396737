"""Units of numbers in spec text: the syntax stage's reading of `25K`, `10min`, `5%`.

The lexer splits a number from its unit (`ast.Number.text`, `.unit`); this says what the unit
means: a count (K, M, G, B) or a duration (s, sec, min, h). Which keys take which quantity is the
IR's business (attncomp.ir.values).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from attncomp.errors import SpecError, did_you_mean
from attncomp.syntax import ast

COUNT_UNITS = {"K": 10**3, "k": 10**3, "M": 10**6, "G": 10**9, "B": 10**9}
TIME_UNITS = {"s": Decimal(1) / 60, "sec": Decimal(1) / 60, "min": Decimal(1), "h": Decimal(60)}  # in minutes


def decimal(raw: ast.Number, key: str) -> Decimal:
    """The number's digits (without the unit) as a Decimal, its sign applied."""
    try:
        value = Decimal(raw.text.replace("_", ""))
    except InvalidOperation:
        raise SpecError(f'"{raw.text}" is not a number', raw.span) from None
    if value != 0 and value.adjusted() > 18:
        raise SpecError(f"{key}: {raw.text}{raw.unit} is out of range", raw.span)
    return -value if raw.negative else value


def count(raw: ast.Number, key: str) -> Decimal:
    """A count: the digits times the unit (25K = 25,000); a unit that is no count is an error."""
    value = decimal(raw, key)
    if raw.unit:
        if raw.unit not in COUNT_UNITS:
            known = list(COUNT_UNITS)
            raise SpecError(f'unit "{raw.unit}" does not fit {key}{did_you_mean(raw.unit, known)}', raw.span,
                            hint="a count takes K (thousand), M (million) or G (billion), or no unit")
        value *= COUNT_UNITS[raw.unit]
    return value


def is_count(raw: ast.Value) -> bool:
    return isinstance(raw, ast.Number) and (not raw.unit or raw.unit in COUNT_UNITS)


def is_duration(raw: ast.Value) -> bool:
    return isinstance(raw, ast.Number) and raw.unit in TIME_UNITS


def minutes(raw: ast.Number, key: str) -> float:
    """A duration in minutes (10min = 10.0, 30s = 0.5)."""
    return float(decimal(raw, key) * TIME_UNITS[raw.unit])
