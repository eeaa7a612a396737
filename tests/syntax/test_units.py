"""The syntax stage's reading of units: counts (25K) and durations (10min), with located errors."""

from decimal import Decimal

import pytest

from attncomp.errors import SpecError
from attncomp.syntax import parse, units


def _number(text: str):
    (assign,) = parse(f"x = {text}\n", "t.attn").items
    return assign.value


@pytest.mark.parametrize("text, value", [("25K", 25_000), ("65M", 65_000_000), ("2G", 2 * 10**9),
                                         ("100_000", 100_000), ("1.5k", 1_500), ("-3", -3)])
def test_count(text, value):
    raw = _number(text)
    assert units.is_count(raw) and not units.is_duration(raw)
    assert units.count(raw, "x") == Decimal(value)


@pytest.mark.parametrize("text, minutes", [("10min", 10.0), ("30s", 0.5), ("90sec", 1.5), ("2h", 120.0)])
def test_duration(text, minutes):
    raw = _number(text)
    assert units.is_duration(raw) and not units.is_count(raw)
    assert units.minutes(raw, "every") == minutes


def test_a_unit_that_is_no_count_is_a_located_error():
    with pytest.raises(SpecError, match='unit "min" does not fit steps') as err:
        units.count(_number("10min"), "steps")
    assert (err.value.span.line, err.value.span.column) == (1, 5)


def test_out_of_range():
    with pytest.raises(SpecError, match="out of range"):
        units.decimal(_number("1e30"), "steps")
