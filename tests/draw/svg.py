"""Reading a picture's structure back from its SVG: the elements by id (matplotlib's gid) and where they are."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from attncomp.ir import nodes
from attncomp.lower import family_of

NS = "{http://www.w3.org/2000/svg}"
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


def elements(path: Path) -> dict[str, ET.Element]:
    """Every element of the SVG file that has an id, by id (the file must parse)."""
    root = ET.parse(path).getroot()
    return {e.get("id"): e for e in root.iter() if e.get("id")}


def text(element: ET.Element) -> str:
    return "".join(element.itertext()).strip()


def box(element: ET.Element) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of the paths in an element (SVG coordinates: y grows downwards)."""
    numbers = [float(n) for p in element.iter(f"{NS}path") for n in NUMBER.findall(p.get("d", ""))]
    xs, ys = numbers[0::2], numbers[1::2]
    return min(xs), min(ys), max(xs), max(ys)


def with_prefix(ids: dict, prefix: str) -> list[str]:
    return sorted(i for i in ids if i.startswith(prefix))


def expected_layers(spec: nodes.Spec) -> dict[str, dict[str, list]]:
    """From the spec's IR: per stack, per layer kind (the stack's own: its name), its sub-layers in order as
    (kind, norm, scale, attention kind or None), whether it is a parallel block, and the kind of every layer."""
    out = {}
    for name in family_of(spec.model).stacks:
        stack = getattr(spec.model, name)
        cross = name == "decoder" and spec.model.encoder is not None
        kinds = {}
        plan = stack.layer_plan()
        # a layer's drawn kind: its layer kind, marked where it reads another layer's keys and values (share_kv)
        pattern = [(k or name) + (" (shared k, v)" if stack.kv_source(i) != i else "") for i, (k, _) in enumerate(plan)]
        for drawn, (kind, view) in zip(pattern, plan):
            attention = {"attention": view.attention.kind,
                         "cross_attention": view.cross_attention.kind if cross else None}
            kinds.setdefault(drawn, [(p.kind, getattr(p, "norm", None), getattr(p, "scale", 1.0),
                                      attention.get(p.kind)) for p in view.sublayers(cross)])
        out[name] = {"kinds": kinds, "pattern": pattern,
                     "parallel": {d: isinstance(v.block, nodes.Parallel) for d, (_, v) in zip(pattern, plan)}}
    return out


MEMBER = {"attention": "self_attn", "cross_attention": "cross_attn", "ffn": "ffn", "norm": "stream_norm"}


def check_layers(ids: dict, spec: nodes.Spec, prefix: str = "") -> None:
    """The picture shows every stack, layer kind and sub-layer the spec has, as docs/pictures.md says."""
    for name, want in expected_layers(spec).items():
        layers = len(want["pattern"])
        assert f"{layers} layers" in text(ids[f"{prefix}count:{name}"])
        for kind, parts in want["kinds"].items():
            where = f"{prefix}{{}}:{name}:{kind}"
            assert where.format("layer") in ids and kind in text(ids[where.format("kind-label")]) or len(
                want["kinds"]) == 1
            assert text(ids[where.format("count")]) == f"{want['pattern'].count(kind)}x"
            _check_sublayers(ids, where, parts, want["parallel"][kind])
        stack = getattr(spec.model, name)
        across = [key for key in ("unet", "reinject", "value_residual") if getattr(stack, key)]
        across += ["share"] * (len(set(stack.parameter_sets())) < stack.layers) + ["share_kv"] * (stack.share_kv > 1)
        assert (f"{prefix}connections:{name}" in ids) == bool(across)
        if len(want["kinds"]) > 1:  # one mark per layer, of its kind
            assert with_prefix(ids, f"{prefix}mark:{name}:") == sorted(
                f"{prefix}mark:{name}:{j}:{k}" for j, k in enumerate(want["pattern"]))
        else:
            assert not with_prefix(ids, f"{prefix}mark:{name}:")


def _check_sublayers(ids: dict, where: str, parts: list, parallel: bool) -> None:
    boxes = with_prefix(ids, where.format("sublayer") + ":")
    assert len(boxes) == len(parts)
    boxes.sort(key=lambda i: int(i.split(":")[-2]))
    for i, (box_id, (kind, norm, scale, attention)) in enumerate(zip(boxes, parts)):
        assert box_id.split(":")[-2:][0] == str(i) and box_id.split(":")[-1].startswith(MEMBER[kind])
        if kind == "norm":  # a norm of the stream: its box, no residual of its own
            assert where.format("residual") + f":{i}" not in ids
            continue
        assert where.format("residual") + f":{i}" in ids  # one residual path each
        norms = {side for side in ("before", "after", "post") if f"{where.format('norm')}:{i}:{side}" in ids}
        shared = where.format("norm") + ":shared" in ids
        wanted = {"pre": {"before"}, "sandwich": {"before", "after"}, "output": {"after"}, "post": {"post"},
                  "none": set()}[norm]
        assert norms == (wanted - {"before"} if shared else wanted)
        assert (where.format("scale") + f":{i}" in ids) == (scale != 1.0)
        if attention is not None:
            assert text(ids[where.format("attention-kind") + f":{i}"]).startswith(attention)
            assert text(ids[where.format("mask") + f":{i}"]).startswith("mask: ")
            assert text(ids[where.format("kernel") + f":{i}"]).split(": ")[1] in ("sdpa", "flex", "explicit")
    assert where.format("residual") + f":{len(parts)}" not in ids
    placed = [box(ids[b]) for b in boxes]
    if parallel:  # side by side: the same height, apart across
        (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = placed
        assert ax1 < bx0 and ay0 < by1 and by0 < ay1
    else:  # in order from the bottom (SVG's y grows downwards)
        centres = [(y0 + y1) / 2 for _, y0, _, y1 in placed]
        assert centres == sorted(centres, reverse=True) and len(set(centres)) == len(centres)
