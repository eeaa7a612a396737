"""What a drawing shows, read from a compiled model and its build report: no second description of the
architecture. The stacks and their layers are the compiled program's units (one unit per layer kind,
shared by the layers of that kind), each layer's sub-layers in order with their norms and scales are the
plan the lowering followed (`nodes.Stack.layer_plan` and `sublayers`, the one place per-layer keys
resolve), and each attention's kind, mask, kernel and heads are the report's row for its unit
(attncomp.report.attention_report). Parameters are counted from the units' members.

The result is plain data (no plotting library): attncomp.draw.figure draws it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from attncomp.ir import canonical, nodes
from attncomp.lower import CompiledModel, family_of
from attncomp.lower.units import Leaf, Param, Unit, UnitList
from attncomp.report import AttentionReport, BuildReport

TITLES = {"attention": "Self-attention", "cross_attention": "Cross-attention", "ffn": "Feed-forward", "norm": "Norm"}
MEMBERS = {"attention": "self_attn", "cross_attention": "cross_attn", "ffn": "ffn", "norm": "stream_norm"}


@dataclass
class DrawnSublayer:
    member: str  # the layer unit's member: self_attn, cross_attn, ffn, ffn_2, ...
    kind: str  # attention, cross_attention, ffn
    norm: str  # post, pre, output, sandwich, none
    scale: float
    title: str
    lines: list[str]  # what the box says under its title
    params: int  # of one layer's sub-layer
    attention: AttentionReport | None = None  # the report's row of this attention
    normalization: str = ""  # its own norms' kind where it writes one (else the layer kind's)
    gain: str = ""  # a learned gain on what it adds: LayerScale (0.1), ReZero
    skip: str = ""  # what its skip carries where not x: x 0.5, DeepNorm alpha, the normed input


@dataclass
class DrawnLayerKind:
    name: str  # the layer kind's name; the stack's own layers: the stack's name
    unit: str  # its class in the compiled program (GlobalEncoderLayer)
    layers: list[int]  # its indices in the stack
    parallel: bool
    shared_norm: bool  # parallel(norms = 1): one norm both sub-layers read
    normalization: str  # LayerNorm, RMSNorm (1 + w), ...
    sublayers: list[DrawnSublayer]
    params: int  # one layer's


@dataclass
class DrawnStack:
    name: str  # encoder, decoder
    layers: int
    kinds: list[DrawnLayerKind]
    pattern: list[str]  # the kind of each layer, from the first
    final_norm: bool
    params: int
    reads_memory: bool  # a decoder whose cross-attention reads the encoder's output
    connections: list[str] = field(default_factory=list)  # across layers: U-net skips, re-injected input, ...


@dataclass
class Drawing:
    name: str
    hash: str
    family: str
    params: int
    flops_per_token: float
    embedding: list[str]  # lines of the embeddings' box
    head: list[str]  # lines of the output's box
    stacks: list[DrawnStack] = field(default_factory=list)
    params_by_component: dict[str, int] = field(default_factory=dict)


def millions(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e5 else f"{n / 1e3:.1f}K"


def unit_params(member: Leaf | Param | Unit | UnitList) -> int:
    """The parameters a member of the compiled program holds (a unit's, its members' together)."""
    if isinstance(member, Leaf):
        return sum(math.prod(shape) for shape in member.shapes().values())
    if isinstance(member, Param):
        return math.prod(member.shape)
    if isinstance(member, UnitList):
        return sum(unit_params(u) for u in member.units)
    return sum(unit_params(m) for m in member.members.values())


def _attention_rows(model: CompiledModel, report: BuildReport) -> dict[int, AttentionReport]:
    """The report's attention row of each attention unit (by id): the report writes one row per attention
    unit, per stack, self- then cross-attention, each unit in the order of the layers that first use it."""
    units = []
    for stack_name in family_of(model.spec.model).stacks:
        layers = _per_layer(model.program.members[stack_name], getattr(model.spec.model, stack_name))
        for role in ("self_attn", "cross_attn"):
            seen: dict[int, tuple[Unit, int]] = {}
            for layer in layers:
                if role in layer.members:
                    unit = layer.members[role]
                    seen[id(unit)] = (unit, seen.get(id(unit), (unit, 0))[1] + 1)
            units += [(stack_name, role, unit, count) for unit, count in seen.values()]
    if len(units) != len(report.attention) or any(
            row.layers != count or not row.site.startswith(stack if role == "self_attn" else "encoder-decoder")
            for (stack, role, _, count), row in zip(units, report.attention)):
        raise RuntimeError("the build report's attention rows do not follow the compiled attention units")
    return {id(unit): row for (_, _, unit, _), row in zip(units, report.attention)}


def _attention_lines(row: AttentionReport, view: nodes.Stack, self_attention: bool) -> list[str]:
    kind = view.attention if self_attention else view.cross_attention
    lines = [kind.kind + (f"(window = {kind.window})" if kind.kind == "local" else ""),
             f"mask: {row.mask}", f"kernel: {row.kernel.split(':')[0] or ('sdpa' if row.fused else 'explicit')}",
             row.grouping if row.grouping.startswith("multi-head") else row.grouping.split(":")[0]
             + f" ({view.heads} q / {view.key_value_heads} kv heads)"]
    parts = [f"{k} = {canonical._value(v)}" for k, v in kind.written()  # the normaliser as the spec writes it
             if k not in ("window", "scale") and v not in (False, 0, 0.0)]
    if self_attention and view.qk_norm != "none":
        parts.append(f"qk_norm = {view.qk_norm}")
    if parts:
        lines.append(", ".join(parts))
    return lines


def _ffn_lines(view: nodes.Stack) -> list[str]:
    act = f"{'gated ' if view.gated else ''}{view.activation}, d_ff = {view.d_ff}"
    if isinstance(view.ffn, nodes.MoE):
        moe = view.ffn
        shared = f" + shared expert ({moe.shared})" if moe.shared else ""
        return [f"mixture of {moe.experts} experts, top {moe.top_k}{shared}", act]
    return ["dense", act]


def _normalization(view: nodes.Stack | nodes.Normalization) -> str:
    norm = view.normalization if isinstance(view, nodes.Stack) else view
    if isinstance(norm, nodes.RMSNorm):
        return "RMSNorm (1 + w)" if norm.offset else "RMSNorm"
    return "LayerNorm"


def _sublayers(layer: Unit, view: nodes.Stack, cross: bool,
               rows: dict[int, AttentionReport]) -> list[DrawnSublayer]:
    found, seen = [], {}
    for part in view.sublayers(cross):
        base = MEMBERS[part.kind]
        seen[base] = seen.get(base, 0) + 1
        member = base if seen[base] == 1 else f"{base}_{seen[base]}"
        unit = layer.members[member]
        own = _normalization(part.normalization) if part.normalization is not None else ""
        if isinstance(part, nodes.Stream):  # a norm of the stream: no residual of its own
            found.append(DrawnSublayer(member, "norm", "none", 1.0, TITLES["norm"], [own or _normalization(view)],
                                       unit_params(unit), normalization=own))
            continue
        row = rows.get(id(unit))
        lines = _ffn_lines(view) if part.kind == "ffn" else _attention_lines(row, view, part.kind == "attention")
        norms = [m for m in (f"{member}_norm", f"{member}_output_norm", f"{member}_gain") if m in layer.members]
        found.append(DrawnSublayer(member, part.kind, part.norm, part.scale, TITLES[part.kind], lines,
                                   unit_params(unit) + sum(unit_params(layer.members[m]) for m in norms), row,
                                   own, _gain(part), _skip(part)))
    return found


def _gain(part: nodes.Sublayer) -> str:
    if isinstance(part.gain, nodes.LayerScale):
        return f"LayerScale ({part.gain.init:g})"
    return "ReZero" if isinstance(part.gain, nodes.ReZero) else ""


def _skip(part: nodes.Sublayer) -> str:
    if isinstance(part.skip, nodes.ScaleBy):
        return f"skip x {part.skip.value:g}"
    return {nodes.DeepNorm: "skip: DeepNorm alpha x", nodes.NormedSkip: "skip: normed input"}.get(type(part.skip), "")


def _connections(stack: nodes.Stack) -> list[str]:
    """What joins the stack's layers besides their order: U-net skips, the re-injected input, value residuals,
    and what they share: parameter sets (`share`; a layer box's "per layer" counts one set) and keys and values."""
    found = [words for key, words in (("unet", "U-net skips"), ("reinject", "input re-injected"),
                                      ("value_residual", "value residual")) if getattr(stack, key)]
    sets = len(set(stack.parameter_sets()))
    if sets < stack.layers:
        found.append(f"{sets} parameter set{'s' if sets > 1 else ''} for {stack.layers} layers "
                     f"(share = {canonical._value(stack.share)})")
    if stack.share_kv > 1:
        found.append(f"keys and values shared by {stack.share_kv} layers (share_kv = {stack.share_kv})")
    return found


def _per_layer(stack_unit: Unit, stack: nodes.Stack) -> list[Unit]:
    """The unit each layer runs: its parameter set's (`share`), once per layer."""
    sets = stack_unit.members["layers"].units
    return [sets[s] for s in stack.parameter_sets()]


def _layer_names(plan: list, layers: list[Unit], name: str) -> list[str]:
    """Each layer's drawn kind: its layer kind (the stack's name for its own), marked where it reads another
    layer's keys and values (share_kv)."""
    return [(kind or name) + (" (shared k, v)" if layer.name.startswith("SharedKV") else "")
            for (kind, _), layer in zip(plan, layers)]


def _stack(model: CompiledModel, name: str, rows: dict[int, AttentionReport]) -> DrawnStack:
    arch = model.spec.model
    spec_stack: nodes.Stack = getattr(arch, name)
    unit: Unit = model.program.members[name]
    layers = _per_layer(unit, spec_stack)
    plan = spec_stack.layer_plan()
    names = _layer_names(plan, layers, name)
    cross = name == "decoder" and arch.encoder is not None
    kinds: dict[str, DrawnLayerKind] = {}
    for index, (layer, (kind, view)) in enumerate(zip(layers, plan)):
        key = names[index]
        if key in kinds:
            kinds[key].layers.append(index)
            continue
        parallel = isinstance(view.block, nodes.Parallel)
        kinds[key] = DrawnLayerKind(key, layer.name, [index], parallel, parallel and view.block.norms == 1,
                               _normalization(view), _sublayers(layer, view, cross, rows), unit_params(layer))
    return DrawnStack(name, spec_stack.layers, list(kinds.values()), names,
                      "norm" in unit.members, unit_params(unit), cross, _connections(spec_stack))


def _embedding_lines(arch: nodes.ModelSpec) -> list[str]:
    vocab = arch.vocab
    sizes = f"shared({vocab.size})" if isinstance(vocab, nodes.Shared) else f"separate({vocab.src}, {vocab.tgt})"
    lines = [f"vocab {sizes}, d_model = {arch.d_model}"] if arch.d_embed is None else \
        [f"vocab {sizes}, d_embed = {arch.d_embed}", f"projected to d_model = {arch.d_model}"]
    positions = arch.positions
    args = ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in positions.written()
                     if not isinstance(v, (nodes.Node, tuple)))
    lines.append(f"positions: {positions.kind}" + (f"({args})" if args else ""))
    extras = [x for x, on in (("x sqrt(d_model)", arch.scale_embeddings), ("norm", arch.embedding_norm),
                              (f"{arch.segments} segments", arch.segments)) if on]
    if extras:
        lines.append(", ".join(extras))
    return lines


def _head_lines(arch: nodes.ModelSpec) -> list[str]:
    tie = {"none": "own weights", "decoder": "tied to the target embedding", "all": "tied to both embeddings",
           "encoder": "tied to the embedding", "inputs": "own weights (embeddings tied together)"}[arch.tie]
    lines = [f"Linear to {arch.tgt_vocab}: {tie}"]
    if isinstance(arch.head, nodes.DenseHead):
        lines.insert(0, f"dense head ({arch.head.activation}, norm)")
    if arch.logit_softcap:
        lines.append(f"logits soft-capped at {arch.logit_softcap:g}")
    lines.append("Softmax")
    return lines


def plan_drawing(model: CompiledModel, report: BuildReport) -> Drawing:
    """The drawing of a model compiled (on the meta device) and of its build report."""
    arch = model.spec.model
    rows = _attention_rows(model, report)
    family = family_of(arch)
    return Drawing(arch.name, report.hash, family.name, report.params, report.flops_per_token,
                   _embedding_lines(arch), _head_lines(arch), [_stack(model, s, rows) for s in family.stacks],
                   dict(report.params_by_component))
