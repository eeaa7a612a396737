"""`attncomp draw`: a spec compiled on the meta device (no weights), its build report, and the picture of
both (attncomp.draw.figure); or two specs side by side, what `attncomp diff` finds between them outlined
in red and listed below."""

from __future__ import annotations

from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.draw.figure import CHANGED, TEXT, Canvas, draw_model
from attncomp.draw.plan import Drawing, plan_drawing
from attncomp.ir import nodes
from attncomp.plot.figures import new_figure
from attncomp.report import build_report

FOR_WHAT = "attncomp draw"
DIFF_ROWS = 24  # rows of the difference listed under two pictures


def drawing_of(spec: nodes.Spec) -> Drawing:
    """What the picture of `spec` shows: its model compiled on the meta device, and its build report."""
    model = compile_spec(spec, device="meta")
    return plan_drawing(model, build_report(model))


def _axes(figure, extent: tuple[float, float, float, float], rect=(0.0, 0.0, 1.0, 1.0)):
    ax = figure.add_axes(rect)
    x0, x1, y0, y1 = extent
    ax.set_xlim(x0 - 0.2, x1 + 0.2)
    ax.set_ylim(y0 - 0.2, y1 + 0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def picture(drawing: Drawing):
    """The figure of one model (1 unit of the drawing = 1 inch)."""
    probe = new_figure(FOR_WHAT, 1, 1)  # measure first: the drawing says how large it is
    right, bottom, top = draw_model(Canvas(probe.add_axes((0, 0, 1, 1))), drawing)
    figure = new_figure(FOR_WHAT, right + 0.4, top - bottom + 0.4)
    ax = _axes(figure, (0.0, right, bottom, top))
    draw_model(Canvas(ax), drawing)
    return figure


def marked(rows: list[tuple[str, object, object]], drawing: Drawing) -> set[str]:
    """The elements of a picture that a difference of the resolved specs changes (dotted keys of ir.diff)."""
    names = [s.name for s in drawing.stacks]
    found = set()
    for key, _, _ in rows:
        parts = key.split(".")
        if parts[0] != "model" or len(parts) < 2:
            continue
        if parts[1] in names:
            found.add(f"stack:{parts[1]}")
        elif parts[1] in ("vocab", "positions", "scale_embeddings", "embedding_norm", "d_embed", "segments"):
            found.update(f"embedding:{name}" for name in names)
        elif parts[1] in ("head", "tie", "logit_scale", "logit_softcap") or key.startswith("model.bias.output"):
            found.add("head")
    return found


def _difference(rows, a_name: str, b_name: str) -> list[str]:
    lines = [f"{len(rows)} resolved key(s) differ ({a_name} -> {b_name}):" if rows else
             f"{a_name} and {b_name} resolve to the same spec"]
    for key, va, vb in rows[:DIFF_ROWS]:
        lines.append(f"{key}: {_short(va)} -> {_short(vb)}")
    if len(rows) > DIFF_ROWS:
        lines.append(f"... and {len(rows) - DIFF_ROWS} more (attncomp diff lists them all)")
    return lines


def _short(value) -> str:
    text = "none" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def picture_of_two(a: Drawing, b: Drawing, rows: list[tuple[str, object, object]], a_name: str, b_name: str):
    """Two models side by side, each element that differs outlined in red (ids prefixed a/ and b/), the
    difference listed below them (ids diff-row:N)."""
    probe = new_figure(FOR_WHAT, 1, 1)
    sizes = [draw_model(Canvas(probe.add_axes((0, 0, 1, 1))), d) for d in (a, b)]
    lines = _difference(rows, a_name, b_name)
    listing = 0.25 * len(lines) + 0.4
    width = sum(r + 0.4 for r, _, _ in sizes) + 0.6
    height = max(t - bo for _, bo, t in sizes) + listing
    figure = new_figure(FOR_WHAT, width, height)
    x = 0.0
    for prefix, drawing, (right, bottom, top) in (("a/", a, sizes[0]), ("b/", b, sizes[1])):
        rect = (x / width, listing / height, (right + 0.4) / width, (top - bottom + 0.4) / height)
        draw_model(Canvas(_axes(figure, (0.0, right, bottom, top), rect), prefix, marked(rows, drawing)), drawing)
        x += right + 0.4 + 0.6
    for i, line in enumerate(lines):
        colour = CHANGED if i else "black"
        text = figure.text(0.01, (listing - 0.3 - 0.25 * i) / height, line, fontsize=TEXT + 1, color=colour,
                           family="monospace")
        text.set_gid(f"diff-row:{i}")
    return figure


def spec_picture(spec: nodes.Spec):
    return picture(drawing_of(spec))


def two_spec_picture(a: nodes.Spec, b: nodes.Spec, a_name: str, b_name: str):
    return picture_of_two(drawing_of(a), drawing_of(b), ir.diff(a, b), a_name, b_name)
