"""Reading the IR's schema: which keys a block accepts and what kind of value each key takes.

The builder checks a spec's keys against it (attncomp.ir.build), and the docs test uses it to find
every key; it is read off the pydantic models in attncomp.ir.nodes, so the language follows the IR.
"""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from pydantic import BaseModel

from attncomp.ir import nodes


@dataclass(frozen=True)
class Kind:
    """What a field accepts: 'block', 'choice' (a kinded union), 'literal', 'bool', 'int', 'float', 'str',
    'named' (blocks written `key NAME { ... }`, any number of them: a stack's layer kinds), 'list'
    (choices written as a call's positional arguments: a block's sub-layers, `sequential(attention, ffn)`), or
    'floats' (numbers written in brackets, `[1.0, 1.25]`: LongRoPE's factors)."""

    what: str
    members: tuple = ()  # block, named: (cls,); choice, list: member classes; literal: allowed strings
    optional: bool = False


def is_node(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def has_kind(cls: type) -> bool:
    return "kind" in cls.model_fields


def classify(annotation: Any) -> Kind:
    """The kind of value a field with this annotation accepts."""
    optional = False
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return classify(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        args = [typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a for a in args]
        if len(args) == 1:
            inner = classify(args[0])
            return Kind(inner.what, inner.members, optional)
        if all(is_node(a) and has_kind(a) for a in args):
            return Kind("choice", tuple(args), optional)
        raise TypeError(f"unsupported annotation {annotation!r}")
    if origin is Literal:
        return Kind("literal", typing.get_args(annotation), optional)
    if origin is tuple and is_node(typing.get_args(annotation)[0]):
        return Kind("named", (typing.get_args(annotation)[0],), optional)
    if origin is tuple:  # a list of choices, written as a call's positional arguments: sequential(attention, ffn)
        inner = classify(typing.get_args(annotation)[0])
        if inner.what == "choice":
            return Kind("list", inner.members, optional)
        if inner.what == "float":  # a list of numbers, written [1.0, 1.25]: LongRoPE's factors
            return Kind("floats", (), optional)
    if is_node(annotation):
        return Kind("choice" if has_kind(annotation) else "block", (annotation,), optional)
    names = {bool: "bool", int: "int", float: "float", str: "str"}
    if annotation in names:
        return Kind(names[annotation], (), optional)
    raise TypeError(f"unsupported annotation {annotation!r}")


@functools.cache
def fields_of(cls: type[BaseModel]) -> Mapping[str, Kind]:
    """The fields of an IR node and what each takes (read once per class: the IR is fixed)."""
    return types.MappingProxyType({name: classify(f.annotation) for name, f in cls.model_fields.items()
                                   if name != "kind"})


@functools.cache
def _model_keys() -> Mapping[str, Kind]:
    """Keys a model block accepts: its own, plus stack keys that default both stacks."""
    own = {k: v for k, v in fields_of(nodes.ModelSpec).items() if k != "name"}
    stack = fields_of(nodes.DecoderSpec)
    return types.MappingProxyType({**stack, **own})


def keys_of(cls: type[BaseModel]) -> Mapping[str, Kind]:
    """The keys a block of `cls` accepts (a named block's name is its label, not a key)."""
    if cls is nodes.ModelSpec:
        return _model_keys()
    if cls is nodes.LayerKind:
        return types.MappingProxyType({k: v for k, v in fields_of(cls).items() if k != "name"})
    return fields_of(cls)


def kind_name(cls: type[BaseModel]) -> str:
    return cls.model_fields["kind"].default
