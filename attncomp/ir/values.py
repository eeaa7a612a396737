"""Scalar values of a spec checked against the IR's field types: literals, numbers, and the forms a
value takes without a call (`steps = 100K`, `every = 10min`, `max_len = src + 50`, `params = 65M +- 5%`).

What a unit means is the syntax stage's (attncomp.syntax.units); which keys take it is decided here.
"""

from __future__ import annotations

from attncomp.errors import SpecError, did_you_mean
from attncomp.ir import elsewhere, nodes
from attncomp.syntax import ast, units


def literal(allowed: tuple, raw: ast.Value, key: str) -> str | int:
    """One of the allowed names, or of the allowed whole numbers (`norms = 2`)."""
    if all(isinstance(a, int) for a in allowed):
        value = number(raw, key, integer=True)
        if value not in allowed:
            raise SpecError(f"{key} must be one of {' or '.join(map(str, allowed))}, got {value}", raw.span)
        return value
    word = raw.id if isinstance(raw, ast.Name) else raw.value if isinstance(raw, ast.String) else None
    options = " or ".join(f'"{a}"' for a in allowed)
    if word is None:
        raise SpecError(f"{key} must be one of {options}", raw.span)
    if word not in allowed:
        raise elsewhere.refusal(f'unknown {key} "{word}"', word, raw.span, key) or SpecError(
            f'unknown {key} "{word}"{did_you_mean(word, allowed)}', raw.span, hint=f"expected {options}")
    return word


def number(raw: ast.Value, key: str, integer: bool) -> int | float:
    if not isinstance(raw, ast.Number):
        raise SpecError(f"{key} must be a number", raw.span)
    value = units.count(raw, key)
    if integer:
        if value != value.to_integral_value():
            raise SpecError(f"{key} must be a whole number, got {raw.text}{raw.unit}", raw.span)
        return int(value)
    return float(value)


# --- scalar forms: values written without a call ----------------------------------------------


def _read_steps(raw: ast.Value, key: str):
    if units.is_count(raw):
        return {"kind": "steps", "steps": number(raw, key, integer=True)}
    return None


def _read_time(raw: ast.Value, key: str):
    if units.is_duration(raw):
        return {"kind": "time", "minutes": units.minutes(raw, key)}
    return None


def _read_fixed(raw: ast.Value, key: str):
    if units.is_count(raw):
        return {"kind": "fixed", "length": number(raw, key, integer=True)}
    return None


def _read_src_plus(raw: ast.Value, key: str):
    if isinstance(raw, ast.Offset):
        if raw.base != "src":
            raise SpecError(f'{key} can be "src + k"; "{raw.base}" is unknown{did_you_mean(raw.base, ["src"])}',
                            raw.span)
        return {"kind": "src_plus", "offset": number(raw.amount, key, integer=True)}
    if isinstance(raw, ast.Name) and raw.id == "src":
        return {"kind": "src_plus", "offset": 0}
    return None


def _read_scale(raw: ast.Value, key: str):
    if isinstance(raw, ast.Number) and not raw.unit:
        return {"kind": "constant", "value": number(raw, key, integer=False)}
    return None


def _read_tolerance(raw: ast.Value, key: str) -> dict:
    """All three keys, set or None, so that a later file's `58M +- 5%` (or `58M`) replaces a base's `65M +- 2.6M`
    whole: merged key by key, the base's absolute tolerance would stay beside the new percent."""
    if isinstance(raw, ast.Number):
        return {"value": number(raw, key, integer=False), "percent": None, "absolute": None}
    if not isinstance(raw, ast.PlusMinus):
        raise SpecError(f"{key} expects a number with an optional tolerance, like 65M +- 5%", raw.span)
    out = {"value": number(raw.value, key, integer=False), "percent": None, "absolute": None}
    tol = raw.tolerance
    if isinstance(tol, ast.Number) and tol.unit == "%":
        out["percent"] = float(units.decimal(tol, key))
    else:
        out["absolute"] = number(tol, key, integer=False)
    return out


SCALAR_TEXT = {
    nodes.Steps: "a number of updates (5000)",
    nodes.Time: "a duration (30s, 10min, 2h)",
    nodes.Fixed: "a number of tokens (200)",
    nodes.SrcPlus: "src + k",
    nodes.ScaleBy: "a number (0.0625)",
}
UNITS_ACCEPTED = {nodes.Steps: tuple(units.COUNT_UNITS), nodes.Time: tuple(units.TIME_UNITS),
                  nodes.Fixed: tuple(units.COUNT_UNITS)}

SCALAR_READERS = {
    nodes.Steps: _read_steps,
    nodes.Time: _read_time,
    nodes.Fixed: _read_fixed,
    nodes.SrcPlus: _read_src_plus,
    nodes.ScaleBy: _read_scale,
}


def _read_bias(raw: ast.Value, key: str) -> dict:
    """`bias = true|false`: both kinds of bias at once (what `bias` meant before it was a block)."""
    if isinstance(raw, ast.Name) and raw.id in ("true", "false"):
        return {"attention": raw.id == "true", "ffn": raw.id == "true"}
    raise SpecError(f"{key} must be true, false or a block: {key} {{ attention = false  ffn = true }}", raw.span)


def scalar_form(cls):
    return {nodes.Tolerance: _read_tolerance, nodes.Bias: _read_bias}.get(cls)
