"""A resolved Spec -> its canonical text (every default written out), JSON, and sha256 hash.

The canonical text parses back to an identical Spec; its hash names the exact architecture and
recipe a checkpoint was trained with. Which keys it writes is the IR's rule, `nodes.Node.written`: keys
added after checkpoints and sweeps recorded hashes (marked `json_schema_extra=nodes.LATER`) are written
only away from their default, the old meaning, so a spec that does not use them keeps its text and hash.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from attncomp.ir import nodes

INDENT = "  "


def _number(value: int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _minutes(minutes: float) -> str:
    if float(minutes).is_integer():
        return f"{int(minutes)}min"
    return f"{repr(float(minutes))}min"


def _tolerance(t: nodes.Tolerance) -> str:
    text = _number(t.value)
    if t.percent is not None:
        return f"{text} +- {_number(t.percent)}%"
    if t.absolute is not None:
        return f"{text} +- {_number(t.absolute)}"
    return text


# choices that are written as plain values rather than calls
_SCALAR_WRITERS = {
    nodes.Steps: lambda n: str(n.steps),
    nodes.Time: lambda n: _minutes(n.minutes),
    nodes.Fixed: lambda n: str(n.length),
    nodes.SrcPlus: lambda n: f"src + {n.offset}",
    nodes.Tolerance: _tolerance,
    nodes.ScaleBy: lambda n: _number(n.value),
}


def _value(value: Any) -> str:
    if isinstance(value, BaseModel):
        writer = _SCALAR_WRITERS.get(type(value))
        if writer:
            return writer(value)
        args = value.written()
        if not args:
            return value.kind
        listed = [_value(item) for _, v in args if _listed(v) for item in v]  # sequential(attention, ffn)
        named = [f"{k} = {_value(v)}" for k, v in args if not _listed(v)]
        return f"{value.kind}(" + ", ".join(listed + named) + ")"
    if isinstance(value, str):
        return value
    if value is None:  # a key whose default is a value, set to none (a vocabulary without <pad>)
        return "none"
    if isinstance(value, tuple):  # numbers: longrope(short_factor = [1.0, 1.25])
        return "[" + ", ".join(_number(v) for v in value) + "]"
    return _number(value)


def _listed(value: Any) -> bool:
    """A call's list of choices, written as its positional arguments (not a list of numbers)."""
    return isinstance(value, tuple) and all(isinstance(v, BaseModel) for v in value)


def _is_block(value: Any) -> bool:
    return isinstance(value, BaseModel) and "kind" not in type(value).model_fields and type(value) not in _SCALAR_WRITERS


def _block(name: str, node: BaseModel, depth: int, label: str | None = None) -> list[str]:
    pad = INDENT * depth
    head = f"{name} {label} {{" if label else f"{name} {{"
    lines = [pad + head]
    for key, value in node.written():
        if label is not None and key == "name":
            continue
        if isinstance(value, tuple):  # named blocks: a stack's layer kinds
            for named in value:
                lines += _block(key, named, depth + 1, label=named.name)
        elif _is_block(value):
            lines += _block(key, value, depth + 1)
        else:
            lines.append(f"{pad}{INDENT}{key} = {_value(value)}")
    lines.append(pad + "}")
    return lines


def to_text(spec: nodes.Spec) -> str:
    """The canonical text of a spec: every key, every default, one per line."""
    lines = _block("model", spec.model, 0, label=spec.model.name)
    for key in ("train", "decode", "expect"):
        lines += _block(key, getattr(spec, key), 0)
    return "\n".join(lines) + "\n"


def recipe_text(recipe: nodes.Recipe | nodes.Spec) -> str:
    """The canonical text of a recipe (or of a spec's train and decode blocks): a recipe file of every key."""
    lines = []
    for key in ("train", "decode"):
        lines += _block(key, getattr(recipe, key), 0)
    return "\n".join(lines) + "\n"


def spec_hash(spec: nodes.Spec) -> str:
    """sha256 of the canonical text."""
    return hashlib.sha256(to_text(spec).encode("utf-8")).hexdigest()


def to_json(spec: nodes.Spec) -> dict:
    """The resolved spec as JSON data, with its hash."""
    return {"hash": spec_hash(spec), **spec.model_dump(mode="json")}


def to_sparse_json(spec: nodes.Spec) -> dict:
    """The resolved spec as JSON data without the values that equal their field's default (a choice keeps its
    `kind`), with its hash: what the IR goldens store, so a new key with a default changes none of them.
    `defaults()` lists the defaults; the two together are `to_json`."""
    return {"hash": spec_hash(spec), **_sparse(spec)}


def _sparse(value: Any) -> Any:
    if isinstance(value, BaseModel):
        out = {}
        for key, field in type(value).model_fields.items():
            item = getattr(value, key)
            if key == "kind" or not field.is_required() and item == field.get_default(call_default_factory=True):
                if key == "kind":
                    out[key] = item
                continue
            out[key] = _sparse(item)
        return out
    if isinstance(value, tuple):
        return [_sparse(item) for item in value]
    return to_jsonable_python(value)


def defaults() -> dict[str, dict[str, Any]]:
    """Every IR class's field defaults, by class name in the order nodes.py defines them."""
    out = {}
    for name, cls in vars(nodes).items():
        if isinstance(cls, type) and issubclass(cls, nodes.Node) and cls.__module__ == nodes.__name__ \
                and not name.startswith("_") and cls is not nodes.Node:
            fields = {key: to_jsonable_python(field.get_default(call_default_factory=True))
                      for key, field in cls.model_fields.items() if not field.is_required()}
            if fields:
                out[name] = fields
    return out


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested JSON data -> {"model.encoder.heads": 8, ...}."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else key))
        return out
    return {prefix: data}


def diff(a: nodes.Spec, b: nodes.Spec) -> list[tuple[str, Any, Any]]:
    """The resolved fields that differ: (dotted key, value in a, value in b)."""
    fa, fb = flatten(a.model_dump(mode="json")), flatten(b.model_dump(mode="json"))
    missing = object()
    rows = []
    for key in sorted(set(fa) | set(fb)):
        va, vb = fa.get(key, missing), fb.get(key, missing)
        if va != vb:
            rows.append((key, None if va is missing else va, None if vb is missing else vb))
    return rows
