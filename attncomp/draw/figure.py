"""The architecture drawn, in the spirit of the paper's Figure 1: a column per stack, embeddings at the
bottom, each layer kind a panel of its sub-layers in order (bottom to top) with their norms, the residual
path of each and its scale, the layer counts beside them, the output projection on top.

Every element a reader (or a test) looks for carries an SVG id (matplotlib's `gid`), PREFIX + one of

    stack:S                      the frame of stack S (encoder, decoder)
    count:S  count:S:K           the stack's layer count; layer kind K's count
    layer:S:K  kind-label:S:K    the panel of layer kind K (the stack's own layers: K = S) and its label
    sublayer:S:K:I:M             sub-layer I (from 0, in order) of kind K, member M (self_attn, ffn, ffn_2...)
    residual:S:K:I               its residual path: the skip around it to its add (in a parallel block,
                                 the path that brings its output to the add the block's skip reaches)
    add:S:K:I  scale:S:K:I       its add (a parallel block's one add: add:S:K, its skip: skip:S:K); its
                                 scale where not 1 (macaron's 0.5)
    gain:S:K:I  skip:S:K:I       its learned gain (LayerScale, ReZero); what its skip carries where not x
                                 (a sequential layer's; a norm step, kind norm, is a box with no residual)
    connections:S                what joins the stack's layers besides their order (U-net skips, ...)
    norm:S:K:I:before|after|post  its norms (norm:S:K:shared: a parallel block's one norm)
    attention-kind:S:K:I  mask:S:K:I  kernel:S:K:I   an attention's kind, mask and kernel
    mark:S:J:K                   layer J of a stack of several kinds, coloured by its kind K
    embedding:S  head  final-norm:S  memory  title
    changed:T                    (a picture of two specs) the red outline of T (stack:S, embedding:S, head)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attncomp.draw.plan import Drawing, DrawnLayerKind, DrawnStack, DrawnSublayer, millions

BOX_W, NORM_H, LINE_H, GAP, ADD_R, SKIP = 2.7, 0.3, 0.19, 0.16, 0.11, 0.35
FILL = {"attention": "#fcdcb4", "cross_attention": "#fcdcb4", "ffn": "#cfe6f7", "norm": "#f3f1b6",
        "embedding": "#f7cccc", "head": "#ddd2ee"}
KIND_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]
CHANGED = "#d62728"
TEXT = 7


@dataclass
class Canvas:
    """An axes to draw on, the prefix of every id, and the elements to outline as changed."""

    ax: object
    prefix: str = ""
    marked: set[str] = field(default_factory=set)
    placed: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)  # name -> x, y, w, h

    def gid(self, name: str) -> str:
        return self.prefix + name

    def box(self, name: str | None, x: float, y: float, w: float, h: float, fill: str, edge: str = "#333333",
            width: float = 0.8, rounded: float = 0.05, zorder: float = 2) -> None:
        from matplotlib.patches import FancyBboxPatch

        patch = FancyBboxPatch((x, y), w, h, boxstyle=f"round,pad=0,rounding_size={rounded}", facecolor=fill,
                               edgecolor=edge, linewidth=width, zorder=zorder)
        if name:
            patch.set_gid(self.gid(name))
            self.placed[name] = (x, y, w, h)
        self.ax.add_patch(patch)
        if name in self.marked:
            outline = FancyBboxPatch((x - 0.08, y - 0.08), w + 0.16, h + 0.16, boxstyle="round,pad=0,rounding_size=0.1",
                                     facecolor="none", edgecolor=CHANGED, linewidth=2.2, linestyle="--", zorder=5)
            outline.set_gid(self.gid(f"changed:{name}"))
            self.ax.add_patch(outline)

    def text(self, name: str | None, x: float, y: float, s: str, size: float = TEXT, **kw) -> None:
        kw.setdefault("ha", "center")
        kw.setdefault("va", "center")
        t = self.ax.text(x, y, s, fontsize=size, zorder=4, **kw)
        if name:
            t.set_gid(self.gid(name))

    def line(self, name: str | None, xs: list[float], ys: list[float], arrow: bool = False, **kw) -> None:
        kw.setdefault("color", "#333333")
        kw.setdefault("linewidth", 0.9)
        if arrow:
            from matplotlib.patches import FancyArrowPatch

            patch = FancyArrowPatch((xs[0], ys[0]), (xs[-1], ys[-1]), arrowstyle="-|>", mutation_scale=8, zorder=3,
                                    **kw)
            if name:
                patch.set_gid(self.gid(name))
            self.ax.add_patch(patch)
            return
        (artist,) = self.ax.plot(xs, ys, zorder=1, solid_capstyle="butt", **kw)
        if name:
            artist.set_gid(self.gid(name))

    def add(self, name: str, x: float, y: float) -> None:
        from matplotlib.patches import Circle

        circle = Circle((x, y), ADD_R, facecolor="white", edgecolor="#333333", linewidth=0.9, zorder=3)
        circle.set_gid(self.gid(name))
        self.ax.add_patch(circle)
        self.text(None, x, y, "+", size=8)

    def norm(self, name: str, cx: float, y: float, w: float, label: str) -> float:
        self.box(name, cx - w / 2, y, w, NORM_H, FILL["norm"])
        self.text(None, cx, y + NORM_H / 2, label)
        return y + NORM_H + GAP


def _sublayer_box(c: Canvas, where: str, i: int, part: DrawnSublayer, cx: float, y: float, w: float) -> float:
    """The box of one sub-layer: its title, its lines (an attention's kind, mask, kernel) and parameters."""
    lines = [*part.lines, f"{millions(part.params)} params"]
    h = 0.34 + LINE_H * len(lines)
    c.box(f"sublayer:{where}:{i}:{part.member}", cx - w / 2, y, w, h, FILL[part.kind])
    c.text(None, cx, y + h - 0.2, part.title, size=TEXT + 1, weight="bold")
    names = ["attention-kind", "mask", "kernel"] if part.attention is not None else []
    for j, line in enumerate(lines):
        name = f"{names[j]}:{where}:{i}" if j < len(names) else None
        c.text(name, cx, y + h - 0.42 - LINE_H * j, line)
    return y + h + GAP


def _scaled(c: Canvas, where: str, i: int, part: DrawnSublayer, cx: float, y: float) -> float:
    """Its scale where not 1 (macaron's 0.5) and its learned gain (LayerScale, ReZero), on what it adds."""
    if part.scale != 1.0:
        c.text(f"scale:{where}:{i}", cx + 0.3, y + 0.06, f"x {part.scale:g}", ha="left", style="italic")
        y += 0.2
    if part.gain:
        c.text(f"gain:{where}:{i}", cx + 0.3, y + 0.06, f"x {part.gain}", ha="left", style="italic")
        y += 0.2
    return y


def _sequential(c: Canvas, where: str, kind: DrawnLayerKind, x0: float, y: float) -> tuple[float, float]:
    """A layer's sub-layers one after another, each with its skip path round its left to its add."""
    cx = x0 + SKIP + 0.25 + BOX_W / 2
    bottom = y
    for i, part in enumerate(kind.sublayers):
        if part.kind == "norm":  # a norm of the stream, no residual: a box of its own, in the norms' colour
            y = _sublayer_box(c, where, i, part, cx, y + 0.12, BOX_W * 0.7)
            continue
        label = part.normalization or kind.normalization
        branch = y
        y += 0.12
        if part.norm in ("pre", "sandwich"):
            y = c.norm(f"norm:{where}:{i}:before", cx, y, BOX_W * 0.7, label)
        y = _sublayer_box(c, where, i, part, cx, y, BOX_W)
        if part.norm in ("output", "sandwich"):
            y = c.norm(f"norm:{where}:{i}:after", cx, y, BOX_W * 0.7, label)
        y = _scaled(c, where, i, part, cx, y)
        add_y = y + ADD_R
        c.add(f"add:{where}:{i}", cx, add_y)
        c.line(f"residual:{where}:{i}", [cx, x0 + SKIP, x0 + SKIP, cx - ADD_R], [branch, branch, add_y, add_y])
        if part.skip:  # what the skip carries, beside its path
            c.text(f"skip:{where}:{i}", x0 + SKIP - 0.05, (branch + add_y) / 2, part.skip, ha="right", size=TEXT - 1,
                   rotation=90, style="italic")
        y = add_y + ADD_R + GAP
        if part.norm == "post":
            y = c.norm(f"norm:{where}:{i}:post", cx, y, BOX_W * 0.7, label)
    c.line(None, [cx, cx], [bottom - 0.1, y])
    return x0 + SKIP + 0.5 + BOX_W, y


def _parallel(c: Canvas, where: str, kind: DrawnLayerKind, x0: float, y: float) -> tuple[float, float]:
    """Sub-layers side by side reading one input (one norm of it, or one each), their outputs added to it."""
    w = BOX_W * 0.85
    width = 2 * w + 0.3
    cx = x0 + SKIP + 0.25 + width / 2
    branch = y
    y += 0.12
    if kind.shared_norm and any(p.norm in ("pre", "sandwich") for p in kind.sublayers):
        y = c.norm(f"norm:{where}:shared", cx, y, w, kind.normalization)
    c.line(None, [cx, cx], [branch - 0.1, y])
    tops, xs = [], [cx - (w + 0.3) / 2, cx + (w + 0.3) / 2]
    for i, (part, px) in enumerate(zip(kind.sublayers, xs)):
        py = y
        c.line(None, [cx, px, px], [y - GAP / 2, y - GAP / 2, py])
        if part.norm in ("pre", "sandwich") and not kind.shared_norm:
            py = c.norm(f"norm:{where}:{i}:before", px, py, w * 0.8, kind.normalization)
        py = _sublayer_box(c, where, i, part, px, py, w)
        if part.norm in ("output", "sandwich"):
            py = c.norm(f"norm:{where}:{i}:after", px, py, w * 0.8, kind.normalization)
        tops.append(_scaled(c, where, i, part, px, py))
    join = max(tops) + 0.1
    add_y = join + 0.2 + ADD_R
    c.add(f"add:{where}", cx, add_y)
    left, right = xs  # the left output enters the add from below, the right one from the right
    c.line(f"residual:{where}:0", [left, left, cx, cx], [tops[0] - GAP, join, join, add_y - ADD_R])
    c.line(f"residual:{where}:1", [right, right, cx + ADD_R], [tops[1] - GAP, add_y, add_y])
    c.line(f"skip:{where}", [cx, x0 + SKIP, x0 + SKIP, cx - ADD_R], [branch, branch, add_y, add_y])
    return x0 + SKIP + 0.5 + width, add_y + ADD_R + GAP


def _panel(c: Canvas, stack: DrawnStack, kind: DrawnLayerKind, colour: str, x0: float,
           y0: float) -> tuple[float, float]:
    """One layer kind: its sub-layers in a frame, labelled with its name, count and parameters per layer."""
    where = f"{stack.name}:{kind.name}"
    draw = _parallel if kind.parallel else _sequential
    right, top = draw(c, where, kind, x0 + 0.1, y0 + 0.3)
    top += 0.45
    c.box(f"layer:{where}", x0, y0, right - x0 + 0.1, top - y0, "none", edge=colour, width=1.6, rounded=0.15,
          zorder=0.5)
    label = kind.name if len(stack.kinds) > 1 else f"{stack.name} layer"
    c.text(f"kind-label:{where}", x0 + 0.15, top - 0.22, f"{label} ({kind.unit})", ha="left", size=TEXT + 1,
           color=colour, weight="bold")
    c.text(f"count:{where}", right - 0.05, top - 0.22, f"{len(kind.layers)}x", ha="right", size=TEXT + 3,
           weight="bold")
    c.text(None, right - 0.05, y0 + 0.15, f"{millions(kind.params)} per layer", ha="right")
    return right + 0.1, top


def _strip(c: Canvas, stack: DrawnStack, colours: dict[str, str], x: float, y0: float, top: float) -> float:
    """A stack of several layer kinds: one mark per layer, from the first at the bottom, coloured by kind."""
    step = min(0.32, (top - y0 - 0.5) / max(stack.layers, 1))
    c.text(None, x + 0.2, y0 + 0.1, "layers", size=TEXT - 1)
    for j, name in enumerate(stack.pattern):
        y = y0 + 0.3 + j * step
        c.box(f"mark:{stack.name}:{j}:{name}", x, y, 0.4, step * 0.8, colours[name], edge="white", width=0.4,
              rounded=0.02)
        if stack.layers <= 48 or j % 8 == 0:
            c.text(None, x + 0.5, y + step * 0.4, str(j), size=TEXT - 1.5, ha="left")
    return x + 0.9


def _stack(c: Canvas, stack: DrawnStack, x0: float, y0: float, embedding: list[str], title: str) -> tuple[float, float]:
    """A stack's column: its embeddings, its layer kinds side by side (and their strip), its final norm."""
    colours = {k.name: KIND_COLOURS[i % len(KIND_COLOURS)] for i, k in enumerate(stack.kinds)}
    x, tops = x0 + 0.2, []
    panels_y = y0 + 0.3
    for kind in stack.kinds:
        x, top = _panel(c, stack, kind, colours[kind.name], x, panels_y)
        tops.append(top)
        x += 0.2
    top = max(tops)
    if len(stack.kinds) > 1:
        x = _strip(c, stack, colours, x, panels_y, top)
    top += 0.15
    if stack.final_norm:
        top = c.norm(f"final-norm:{stack.name}", (x0 + x) / 2, top, BOX_W * 0.7, stack.kinds[-1].normalization)
    if stack.connections:  # across its layers: U-net skips, the re-injected input, value residuals
        c.text(f"connections:{stack.name}", (x0 + x) / 2, top + 0.1, "across layers: " + ", ".join(stack.connections),
               style="italic")
        top += 0.3
    frame_top = top + 0.35
    c.box(f"stack:{stack.name}", x0, y0, x - x0, frame_top - y0, "#f7f7f7", edge="#777777", width=1.0, rounded=0.2,
          zorder=0)
    c.text(f"count:{stack.name}", x0 + 0.15, frame_top - 0.2,
           f"{stack.name.capitalize()}: {stack.layers} layers, {millions(stack.params)} params", ha="left",
           size=TEXT + 2, weight="bold")
    _embedding(c, stack.name, (x0 + x) / 2, y0, embedding, title)
    return x, frame_top


def _embedding(c: Canvas, name: str, cx: float, y0: float, lines: list[str], title: str) -> None:
    h = 0.35 + LINE_H * len(lines)
    y = y0 - 0.35 - h
    c.box(f"embedding:{name}", cx - BOX_W / 2, y, BOX_W, h, FILL["embedding"])
    c.text(None, cx, y + h - 0.18, title, size=TEXT + 1, weight="bold")
    for j, line in enumerate(lines):
        c.text(None, cx, y + h - 0.38 - LINE_H * j, line)
    c.line(None, [cx, cx], [y + h, y0], arrow=True)


def _head(c: Canvas, drawing: Drawing, cx: float, y: float) -> float:
    lines = drawing.head
    h = 0.35 + LINE_H * len(lines)
    y += 0.35
    c.box("head", cx - BOX_W / 2, y, BOX_W, h, FILL["head"])
    c.text(None, cx, y + h - 0.18, "Output", size=TEXT + 1, weight="bold")
    for j, line in enumerate(lines):
        c.text(None, cx, y + h - 0.38 - LINE_H * j, line)
    c.line(None, [cx, cx], [y - 0.35, y], arrow=True)
    return y + h


def draw_model(c: Canvas, drawing: Drawing, y0: float = 0.0) -> tuple[float, float, float]:
    """The whole model from x = 0 right and from y0 up: (right edge, bottom, top)."""
    x, tops, spans = 0.0, [], []
    embedding_titles = {"encoder": "Input embedding", "decoder": "Output embedding (shifted right)"} \
        if len(drawing.stacks) > 1 else {}
    bottom = y0 - 0.7 - LINE_H * len(drawing.embedding) - 0.35
    for stack in drawing.stacks:
        right, top = _stack(c, stack, x, y0, drawing.embedding, embedding_titles.get(stack.name, "Embedding"))
        spans.append((x, right))
        tops.append(top)
        x = right + 0.8
    if any(s.reads_memory for s in drawing.stacks):  # the encoder's output to the decoder's cross-attention
        (e0, e1), decoder = spans[0], drawing.stacks[-1]
        bx, by, _, bh = next(c.placed[n] for n in c.placed if n.startswith(f"sublayer:{decoder.name}:")
                             and n.endswith(":cross_attn"))
        c.line("memory", [(e0 + e1) / 2, (e0 + e1) / 2, e1 + 0.4, e1 + 0.4, bx],
               [tops[0], tops[0] + 0.3, tops[0] + 0.3, by + bh / 2, by + bh / 2], color="#555555", linestyle="--")
        c.text(None, e1 + 0.45, tops[0] + 0.45, "memory", ha="left", style="italic")
    last0, last1 = spans[-1]
    top = _head(c, drawing, (last0 + last1) / 2, tops[-1])
    details = (f"{millions(drawing.params)} parameters, {drawing.flops_per_token / 1e9:.3g} GFLOP per target "
               f"token (training), sha256 {drawing.hash[:12]}")
    top = max(top, *tops)
    c.text("title", 0.0, top + 0.75, f"{drawing.name}: {drawing.family}", size=TEXT + 4, ha="left", weight="bold")
    c.text(None, 0.0, top + 0.4, details, size=TEXT + 1, ha="left")
    return x - 0.8, bottom, top + 1.0
