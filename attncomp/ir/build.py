"""Syntax trees -> a resolved `Spec`.

Four steps, each with located errors:

1. `_Builder` checks each file's tree against the IR's fields (unknown keys and values get "did you
   mean", or the spelling of a part other toolkits name so: attncomp.ir.elsewhere) and converts it to
   plain data, remembering the span of every key it saw; scalar values are read by attncomp.ir.values,
   whose units (`25K`, `10min`) the syntax stage defines (attncomp.syntax.units);
2. `merge` lays the files over one another, base first, then the command-line overrides;
3. `_fill_defaults` applies the rules that need the whole spec: model-level keys (d_model, heads, ...)
   are defaults for each stack, d_k = d_v = d_model / heads when unset, embedding dropout = residual;
4. pydantic validates types and ranges; its errors are mapped back to the spans of step 1.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from attncomp.errors import Span, SpecError, did_you_mean
from attncomp.ir import elsewhere, nodes
from attncomp.ir.schema import Kind, fields_of, keys_of, kind_name
from attncomp.ir.values import SCALAR_READERS, SCALAR_TEXT, UNITS_ACCEPTED, literal, number, scalar_form
from attncomp.syntax import ast

STACKS = ("encoder", "decoder")
STACK_DEFAULTS = "_stack"  # where model-level d_model, heads, ... wait until stacks are known

Path_ = tuple[str, ...]


@dataclass
class Doc:
    """Plain data for pydantic plus the span of every key the source gave."""

    data: dict = field(default_factory=dict)
    spans: dict[Path_, Span] = field(default_factory=dict)


def _argument_hint(kind: Kind, name: str, argument: str) -> str | None:
    """For `schedule.warmup = 100` (a Hydra-style path into a choice): how a choice's argument is written."""
    if kind.what != "choice":
        return None
    choices = [kind_name(m) for m in kind.members if argument in m.model_fields]
    if not choices:
        return None
    return (f"an argument is written in its choice's call: {name} = {choices[0]}({argument} = ...); over the same "
            f"choice in a base or the file, the other arguments keep their values ({name} takes {argument} in: "
            f"{', '.join(choices)})")


def _choice_text(cls: type[BaseModel]) -> str:
    if cls in SCALAR_TEXT:
        return SCALAR_TEXT[cls]
    args = [n for n in cls.model_fields if n != "kind"]
    return f"{kind_name(cls)}({', '.join(args)})" if args else kind_name(cls)


# --- step 1: tree -> data ---------------------------------------------------------------------


class _Builder:
    """One file's tree -> Doc, checked key by key against the IR."""

    def __init__(self, top: bool, root: type[BaseModel] | None = None):
        self.top, self.root = top, root or _ROOT
        self.doc = Doc()

    def file(self, f: ast.File) -> Doc:
        for item in f.items:
            self.item(self.root, item, (), self.doc.data)
        return self.doc

    def item(self, cls, item: ast.Item, path: Path_, out: dict) -> None:
        if isinstance(item, ast.Block):
            self.block_item(cls, item, path, out)
        else:
            self.assign(cls, item, path, out)

    def _lookup(self, cls, key: str, span: Span, path: Path_) -> Kind:
        keys = keys_of(cls)
        if key not in keys:
            where = f"in {'.'.join(path)}" if path else "at the top level"
            raise elsewhere.refusal(f'unknown key "{key}" {where}', key, span) or SpecError(
                f'unknown key "{key}" {where}{did_you_mean(key, keys)}', span,
                hint="expected one of: " + ", ".join(keys))
        return keys[key]

    def _slot(self, cls, key: str, path: Path_, out: dict) -> tuple[dict, Path_]:
        """Where a key of `cls` lands: model-level stack keys wait in STACK_DEFAULTS."""
        if cls is nodes.ModelSpec and key not in nodes.ModelSpec.model_fields:
            return out.setdefault(STACK_DEFAULTS, {}), path + (STACK_DEFAULTS,)
        return out, path

    def block_item(self, cls, block: ast.Block, path: Path_, out: dict) -> None:
        kind = self._lookup(cls, block.name, block.span, path)
        if kind.what == "named":
            return self.named_block(cls, kind, block, path, out)
        if kind.what != "block":
            raise SpecError(f'"{block.name}" is a value, not a block; write {block.name} = ...', block.span)
        (inner,) = kind.members
        here = path + (block.name,)
        if block.label is not None:
            if inner is not nodes.ModelSpec:
                raise SpecError(f'only a model block takes a name; write "{block.name} {{"', block.span)
            if self.top:
                self.doc.spans[here + ("name",)] = block.label_span or block.span
                target = out.setdefault(block.name, {})
                target["name"] = block.label
        target = out.get(block.name)
        if not isinstance(target, dict):
            target = out[block.name] = {}
        self.doc.spans.setdefault(here, block.span)
        for item in block.items:
            self.item(inner, item, here, target)

    def named_block(self, cls, kind: Kind, block: ast.Block, path: Path_, out: dict) -> None:
        """`layer NAME { ... }`: one of a stack's layer kinds, kept by name until validation. Written in
        `model`, it is a kind of every stack (as other stack keys there are defaults of every stack)."""
        out, path = self._slot(cls, block.name, path, out)
        if block.label is None:
            raise SpecError(f'a {block.name} block needs a name: {block.name} NAME {{ ... }}', block.span)
        (inner,) = kind.members
        here = path + (block.name, block.label)
        named = out.get(block.name)
        if not isinstance(named, dict):
            named = out[block.name] = {}
        target = named.setdefault(block.label, {})
        self.doc.spans.setdefault(path + (block.name,), block.span)
        self.doc.spans.setdefault(here, block.label_span or block.span)
        for item in block.items:
            self.item(inner, item, here, target)

    def assign(self, cls, item: ast.Assign, path: Path_, out: dict) -> None:
        *parents, last = item.key
        parents = list(parents)
        while parents:  # dotted keys: dropout.residual = 0.2, layer.global.every = 3
            name = parents.pop(0)
            kind = self._lookup(cls, name, item.span, path)
            if kind.what == "named" and parents:
                out, path = self._slot(cls, name, path, out)
                label = parents.pop(0)
                (cls,) = kind.members
                named = out.get(name)
                if not isinstance(named, dict):
                    named = out[name] = {}
                path = path + (name, label)
                out = named.setdefault(label, {})
                self.doc.spans.setdefault(path, item.span)
                continue
            if kind.what != "block":
                raise SpecError(f'"{name}" is a value, not a block, so "{name}.…" means nothing', item.span,
                                hint=_argument_hint(kind, name, ".".join([*parents, last])))
            (cls,) = kind.members
            path = path + (name,)
            if not isinstance(out.get(name), dict):
                out[name] = {}
            out = out[name]
            self.doc.spans.setdefault(path, item.span)
        kind = self._lookup(cls, last, item.span, path)
        if kind.what == "named":
            raise SpecError(f'"{last}" takes named blocks: write {last} NAME {{ ... }}', item.span)
        slot, slot_path = self._slot(cls, last, path, out)
        here = slot_path + (last,)
        if last in slot and here in self.doc.spans:
            first = self.doc.spans[here]
            raise SpecError(f'"{last}" is set twice (first at line {first.line})', item.span)
        if kind.what == "block" and not (isinstance(item.value, ast.Name) and item.value.id == "none"
                                         and kind.optional) and not scalar_form(kind.members[0]):
            raise SpecError(f'"{last}" is a block; write {last} {{ ... }}', item.span)
        self.doc.spans[here] = item.span
        slot[last] = self.value(kind, item.value, here, last)

    # values ------------------------------------------------------------------------------

    def value(self, kind: Kind, raw: ast.Value, path: Path_, key: str) -> Any:
        if kind.optional and isinstance(raw, ast.Name) and raw.id == "none" and not self._kind_named(kind, "none") \
                and not (kind.what == "literal" and "none" in kind.members):  # a layer kind's qk_norm = none
            return None
        if kind.what == "choice":
            return self.choice(kind.members, raw, path, key)
        if kind.what == "block":
            return scalar_form(kind.members[0])(raw, key)
        if kind.what == "literal":
            return literal(kind.members, raw, key)
        if kind.what == "bool":
            if isinstance(raw, ast.Name) and raw.id in ("true", "false"):
                return raw.id == "true"
            raise SpecError(f"{key} must be true or false", raw.span)
        if kind.what in ("int", "float"):
            return number(raw, key, integer=kind.what == "int")
        if kind.what == "floats":
            return self.numbers(raw, path, key)
        if isinstance(raw, (ast.Name, ast.String)):
            return raw.id if isinstance(raw, ast.Name) else raw.value
        raise SpecError(f"{key} must be a name", raw.span)

    @staticmethod
    def _kind_named(kind: Kind, name: str) -> bool:
        return kind.what == "choice" and any(kind_name(m) == name for m in kind.members)

    def choice(self, members: tuple, raw: ast.Value, path: Path_, key: str) -> dict:
        by_name = {kind_name(m): m for m in members}
        if isinstance(raw, (ast.Name, ast.Call)):
            name = raw.id if isinstance(raw, ast.Name) else raw.name
            if name not in by_name:
                raise elsewhere.refusal(f'unknown {key} "{name}"', name, raw.span, key) or SpecError(
                    f'unknown {key} "{name}"{did_you_mean(name, by_name)}', raw.span,
                    hint="expected one of: " + ", ".join(_choice_text(m) for m in members),
                )
            cls = by_name[name]
            if isinstance(raw, ast.Name):
                return {"kind": name}
            return self.call(cls, raw, path)
        for member in members:
            scalar = SCALAR_READERS.get(member)
            if scalar is not None:
                converted = scalar(raw, key)
                if converted is not None:
                    return converted
        forms = ", ".join(_choice_text(m) for m in members)
        if isinstance(raw, ast.Number) and raw.unit:
            units = [u for m in members for u in UNITS_ACCEPTED.get(m, ())]
            raise SpecError(f'unit "{raw.unit}" does not fit {key}{did_you_mean(raw.unit, units)}', raw.span,
                            hint=f"{key} takes {forms}")
        raise SpecError(f"{key} takes {forms}", raw.span)

    def call(self, cls, raw: ast.Call, path: Path_) -> dict:
        params = fields_of(cls)
        names = list(params)
        positional = [n for n in names if not nodes.by_name(cls.model_fields[n])]
        out: dict = {"kind": raw.name}
        listed = next((n for n, k in params.items() if k.what == "list"), None)
        if listed is not None:  # positional arguments are the list's items: sequential(attention, ffn)
            out[listed] = self.items(params[listed], raw, path + (listed,), listed)
        elif len(raw.args) > len(positional):
            raise SpecError(f"{raw.name}() takes at most {len(positional)} argument(s), got {len(raw.args)}",
                            raw.args[len(positional)].span)
        for name, arg in zip(positional, raw.args if listed is None else ()):
            self.doc.spans[path + (name,)] = arg.span
            out[name] = self.value(params[name], arg, path + (name,), name)
        for kw in raw.kwargs:
            if kw.name == listed:
                raise SpecError(f"{raw.name}() lists its {listed} as arguments: {raw.name}(attention, ffn)",
                                kw.span)
            if kw.name not in params:
                raise SpecError(f'{raw.name}() has no argument "{kw.name}"{did_you_mean(kw.name, names)}',
                                kw.span, hint=f"its arguments: {', '.join(names) or 'none'}")
            if kw.name in out:
                raise SpecError(f'{raw.name}() got "{kw.name}" twice', kw.span)
            self.doc.spans[path + (kw.name,)] = kw.span
            out[kw.name] = self.value(params[kw.name], kw.value, path + (kw.name,), kw.name)
        return out


    def numbers(self, raw: ast.Value, path: Path_, key: str) -> tuple:
        """`[1.0, 1.25]`: a list of numbers, each item located (its range is pydantic's, mapped back)."""
        if not isinstance(raw, ast.Numbers):
            raise SpecError(f"{key} must be a list of numbers in brackets, like [1.0, 1.25]", raw.span)
        if len(raw.items) > nodes.ROPE_DIMS_LIMIT:
            raise SpecError(f"{key} lists at most {nodes.ROPE_DIMS_LIMIT} numbers, got {len(raw.items)}", raw.span)
        for i, item in enumerate(raw.items):
            self.doc.spans[path + (str(i),)] = item.span
        return tuple(number(item, key, integer=False) for item in raw.items)

    def items(self, kind: Kind, raw: ast.Call, path: Path_, key: str) -> list:
        """A call's positional arguments as the items of its list field (at most nodes.SUBLAYER_LIMIT)."""
        if len(raw.args) > nodes.SUBLAYER_LIMIT:
            raise SpecError(f"{raw.name}() lists at most {nodes.SUBLAYER_LIMIT} {key}, got {len(raw.args)}",
                            raw.args[nodes.SUBLAYER_LIMIT].span)
        items = []
        for i, arg in enumerate(raw.args):
            self.doc.spans[path + (str(i),)] = arg.span
            items.append(self.choice(kind.members, arg, path + (str(i),), key.rstrip("s")))
        self.doc.spans.setdefault(path, raw.span)
        return tuple(items)


class _Root(BaseModel):
    """The top level of a spec file: four blocks."""

    model: nodes.ModelSpec
    train: nodes.Train
    decode: nodes.Decode
    expect: nodes.Expect


_ROOT = _Root


class _RecipeRoot(BaseModel):
    """The top level of a recipe file (attncomp.ir.nodes.Recipe): a spec's train and decode blocks alone."""

    train: nodes.Train
    decode: nodes.Decode


# --- step 2: merge ----------------------------------------------------------------------------


def _mergeable(a: Any, b: Any) -> bool:
    """Blocks merge key by key; a choice merges with the same choice (noam(...) over noam(...))."""
    return isinstance(a, dict) and isinstance(b, dict) and a.get("kind") == b.get("kind")


def merge(base: Doc, over: Doc) -> Doc:
    """`over` laid on `base`: what `over` sets wins, everything else stays."""
    spans = dict(base.spans)

    def walk(a: dict, b: dict, path: Path_) -> dict:
        out = dict(a)
        for key, value in b.items():
            here = path + (key,)
            if key in a and _mergeable(a[key], value):
                out[key] = walk(a[key], value, here)
            else:
                for p in [p for p in spans if p[: len(here)] == here and p != here]:
                    del spans[p]  # a replaced value takes none of the old one's spans along
                out[key] = value
        return out

    data = walk(base.data, over.data, ())
    for path, span in over.spans.items():
        if path in spans and _is_block_value(over.data, path):
            continue  # a block keeps the span of the line that opened it, not of a later dotted key
        spans[path] = span
    return Doc(data, spans)


def _is_block_value(data: dict, path: Path_) -> bool:
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return isinstance(data, dict) and "kind" not in data


# --- step 3: defaults that need the whole spec -----------------------------------------------


DECODER_KEYS = ("cross_attention", "mask")  # stack keys a model block sets for its decoder only


def _fill_defaults(doc: Doc, name: str, where: Span) -> None:
    block = doc.data.get("model")
    if not isinstance(block, dict):
        raise SpecError("the spec has no model block", where, hint="start with: model NAME { encoder { } decoder { } }")
    block.setdefault("name", name)
    shared = block.pop(STACK_DEFAULTS, {})
    present = [s for s in STACKS if isinstance(block.get(s), dict)]
    if not present:
        raise SpecError("the model has neither an encoder nor a decoder block", doc.spans.get(("model",), where),
                        hint="add encoder { } and/or decoder { }")
    for stack_name in present:
        stack = block[stack_name]
        for key, value in shared.items():
            if key in DECODER_KEYS and stack_name == "encoder":
                continue
            if key == "layer" and isinstance(value, dict):
                _share_layer_kinds(doc, value, stack, stack_name)
                continue
            if key not in stack:
                stack[key] = value
                doc.spans.setdefault(("model", stack_name, key), doc.spans[("model", STACK_DEFAULTS, key)])
        _fill_head_dims(doc, stack, ("model", stack_name))
        _fill_stack_choices(stack, cross=stack_name == "decoder" and "encoder" in present)
        if isinstance(stack.get("layer"), dict):  # named layer kinds, in the order first written
            stack["layer"] = tuple({"name": label, **body} for label, body in stack["layer"].items())
    for key in DECODER_KEYS:
        if key in shared and "decoder" not in present:
            raise SpecError(f"{key} needs a decoder", doc.spans[("model", STACK_DEFAULTS, key)])
    if "tie" not in block:
        both = "encoder" in present and "decoder" in present
        shared_vocab = block.get("vocab", {}).get("kind", "shared") == "shared"
        block["tie"] = "all" if both and shared_vocab else "decoder" if "decoder" in present else "none"
    dropout = block.setdefault("dropout", {})
    if "embedding" not in dropout:
        dropout["embedding"] = dropout.get("residual", nodes.Dropout().residual)
        if ("model", "dropout", "residual") in doc.spans:
            doc.spans[("model", "dropout", "embedding")] = doc.spans[("model", "dropout", "residual")]
    for p in [p for p in doc.spans if STACK_DEFAULTS in p]:
        del doc.spans[p]


def _share_layer_kinds(doc: Doc, kinds: dict, stack: dict, stack_name: str) -> None:
    """Layer kinds written in `model` are kinds of every stack, first in order; a stack's own kind of the
    same name sets its keys over them."""
    own = stack.get("layer") if isinstance(stack.get("layer"), dict) else {}
    merged = {label: {**body, **own.get(label, {})} for label, body in kinds.items() if isinstance(body, dict)}
    stack["layer"] = {**merged, **{label: body for label, body in own.items() if label not in merged}}
    shared_path = ("model", STACK_DEFAULTS, "layer")
    for path, span in list(doc.spans.items()):
        if path[:3] == shared_path:
            doc.spans.setdefault(("model", stack_name, "layer") + path[3:], span)


def _fill_head_dims(doc: Doc, stack: dict, path: Path_) -> None:
    defaults = nodes.Stack.model_fields
    d_model = stack.get("d_model", defaults["d_model"].default)
    heads = stack.get("heads", defaults["heads"].default)
    for key in ("d_k", "d_v"):
        if key in stack or not isinstance(d_model, int) or not isinstance(heads, int) or heads < 1:
            continue
        if d_model % heads:
            span = doc.spans.get(path + ("heads",)) or doc.spans.get(path + ("d_model",)) or doc.spans.get(path)
            written = "heads" in stack
            raise SpecError(
                f"d_model = {d_model} is not divisible by heads = {heads}{'' if written else ' (its default)'}, "
                f"and {key} is not set", span,
                hint=f"set d_k and d_v, or choose heads that divide {d_model}",
            )
        stack[key] = d_model // heads


def _fill_stack_choices(stack: dict, cross: bool) -> None:
    """Written-out sub-layers that a shorthand says become the shorthand (`_fold_sublayers`), in the stack
    and in each layer kind; then final_norm = (the last sub-layer's norm != post) when unset: with the
    shorthand, norm != post, the meaning every spec had before the key existed.
    (kv_heads stays unset, meaning heads: see nodes.Stack.key_value_heads.)"""
    written = stack.get("norm", nodes.Stack.model_fields["norm"].default)
    norm = _fold_sublayers(stack, written, cross)
    kinds = stack.get("layer")
    for body in kinds.values() if isinstance(kinds, dict) else ():
        if not isinstance(body, dict):
            continue
        if norm != written and "norm" not in body and isinstance(body.get("block"), dict):
            body["norm"] = written  # its own sub-layers' unset norms were the stack's norm as written
        _fold_sublayers(body, body.get("norm", norm), cross, inherited=norm)
    if "final_norm" not in stack:
        last = norm
        written = stack.get("block", {}).get("sublayers") if isinstance(stack.get("block"), dict) else None
        if isinstance(written, tuple) and written and isinstance(written[-1], dict):
            last = written[-1].get("norm", norm)
        stack["final_norm"] = last != "post"


def _fold_sublayers(level: dict, norm: Any, cross: bool, inherited: Any = None) -> Any:
    """The one spelling of a layer structure: sub-layers written out in the paper's order, each with one
    norm (its own or the level's) and no other key (a scale of 1 aside), are the shorthand `block = sequential | parallel(...)`
    with that norm, so both spellings are one spec, with one canonical text and hash. `level` is a
    stack's data or a layer kind's (`inherited`: the stack's norm it would take); returns its norm."""
    block = level.get("block")
    written = block.get("sublayers") if isinstance(block, dict) else None
    if not isinstance(written, tuple) or not all(isinstance(s, dict) for s in written):
        return norm
    order = [s.get("kind") for s in written]
    norms = {s.get("norm", norm) for s in written}
    if order != [p.kind for p in nodes.paper_sublayers(cross)] or len(norms) != 1 \
            or any(set(s) - {"kind", "norm", "scale"} or s.get("scale", 1) != 1 for s in written):
        return norm
    (folded,) = norms
    if folded == "none" or not isinstance(folded, str):
        return norm
    level["block"] = {k: v for k, v in block.items() if k != "sublayers"}
    if folded != norm or (inherited is not None and folded != inherited and "norm" not in level):
        level["norm"] = folded
    return folded


# --- step 4: validation -----------------------------------------------------------------------


def _data_path(data: Any, loc: tuple) -> Path_:
    """A pydantic error location -> the data path (dropping union tags like 'local')."""
    path: list[str] = []
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
            path.append(str(part))
        elif isinstance(data, (list, tuple)) and isinstance(part, int) and part < len(data):  # a named block
            data = data[part]
            path.append(str(data["name"]) if isinstance(data, dict) and "name" in data else str(part))
    return tuple(path)


def _data_keys(data: Any, path: Path_) -> set:
    for part in path:
        data = data[part]
    return set(data) if isinstance(data, dict) else set()


def _message(err: dict, key: str) -> str:
    ctx = err.get("ctx") or {}
    kind = err["type"]
    got = err.get("input")
    bounds = {
        "greater_than": "greater than {gt}", "greater_than_equal": "at least {ge}",
        "less_than": "less than {lt}", "less_than_equal": "at most {le}",
    }
    if kind in bounds:
        return f"{key} must be {bounds[kind].format(**ctx)}, got {got}"
    if kind == "missing":
        return f"{key} is required"
    if kind == "missing_argument":
        return f"{ctx['choice']}(...) needs {key}, e.g. {ctx['choice']}({key} = ...)"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    if kind in ("too_short", "too_long"):
        bound = f"at least {ctx.get('min_length')}" if kind == "too_short" else f"at most {ctx.get('max_length')}"
        return f"{key} takes {bound} item(s), got {ctx.get('actual_length')}"
    if kind == "finite_number":
        return f"{key} must be a finite number"
    return f"{key}: {err['msg'][0].lower()}{err['msg'][1:]}"


def validate(doc: Doc, where: Span, cls: type[nodes.Node] = nodes.Spec) -> nodes.Spec:
    try:
        spec = cls.model_validate(doc.data)
    except ValidationError as err:
        first = err.errors()[0]
        path = _data_path(doc.data, first["loc"])
        missing_key = first["type"] == "missing"
        key = str(first["loc"][-1]) if first["loc"] else "spec"
        if len(first["loc"]) >= 2 and isinstance(first["loc"][-1], int):  # an item of a list of numbers
            key = f"{first['loc'][-2]}[{first['loc'][-1]}]"
        span = None
        for end in range(len(path), -1, -1):
            span = doc.spans.get(path[:end])
            if span is not None:
                break
        places = {doc.spans.get(_data_path(doc.data, e["loc"])) for e in err.errors()}
        more = len(places) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        if missing_key and len(first["loc"]) >= 2 and first["loc"][-2] not in _data_keys(doc.data, path):
            first = {**first, "type": "missing_argument", "ctx": {"choice": first["loc"][-2]}}
        elif missing_key:
            key = ".".join(str(p) for p in first["loc"] if not isinstance(p, int))
        raise SpecError(_message(first, key) + suffix, span or where) from None
    if isinstance(spec, nodes.Spec):
        spec._spans = dict(doc.spans)
    return spec


# --- the entry point --------------------------------------------------------------------------


def spec_name(path: str) -> str:
    """A model name from a file name: specs/table3/A1.attn -> A1 (made an identifier if needed)."""
    stem = Path(path).stem if not path.startswith("<") else "model"
    clean = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in stem) or "model"
    clean = clean if not clean[0].isdigit() else f"m_{clean}"
    clean = clean[:64]
    return f"{clean[:63]}_" if keyword.iskeyword(clean) else clean


def _yield_stack_keys(base: Doc, over: Doc) -> None:
    """A model-level key in a later layer beats the same key set per stack in an earlier one:
    base says `encoder { layers = 6 }`, C1 says `model { layers = 2 }`, and the encoder gets 2."""
    later = over.data.get("model", {}).get(STACK_DEFAULTS, {})
    block = base.data.get("model")
    if not later or not isinstance(block, dict):
        return
    for stack in STACKS:
        earlier, own = block.get(stack), over.data["model"].get(stack) or {}
        if not isinstance(earlier, dict):
            continue
        for key in set(later) & set(earlier) - {"layer"}:  # layer kinds merge by name (_share_layer_kinds)
            if key not in own:
                del earlier[key]
                base.spans.pop(("model", stack, key), None)


def _merged(files: list[ast.File], overrides: list[ast.Assign], root: type[BaseModel]) -> Doc:
    top = files[-1]
    layers = [_Builder(top=f is top, root=root).file(f) for f in files]
    for item in overrides:
        layer = _Builder(top=True, root=root)
        layer.item(root, item, (), layer.doc.data)
        layers.append(layer.doc)
    doc = Doc()
    for layer in layers:
        _yield_stack_keys(doc, layer)
        doc = merge(doc, layer)
    return doc


def build(files: list[ast.File], overrides: list[ast.Assign] = ()) -> nodes.Spec:
    """Syntax trees of a spec and its bases (base first), plus overrides -> a resolved Spec."""
    doc, where = _merged(files, overrides, _ROOT), Span(files[-1].path, 1, 1)
    _fill_defaults(doc, spec_name(files[-1].path), where)
    return validate(doc, where)


def build_recipe(files: list[ast.File], overrides: list[ast.Assign] = ()) -> nodes.Recipe:
    """Syntax trees of a recipe file (train and decode blocks only) and its bases -> a resolved Recipe; a model
    block is an unknown key, located."""
    return validate(_merged(files, overrides, _RecipeRoot), Span(files[-1].path, 1, 1), nodes.Recipe)
