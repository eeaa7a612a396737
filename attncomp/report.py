"""The build report: what a compiled spec is, measured from its graphs before any training.

- parameters, total (tied weights once) and by component;
- training FLOPs per target token (forward and backward: the matrix products of the optimised graphs,
  counted from their nodes' shapes by attncomp.lower.flops) with 64-token source and target sentences;
- each attention: where it is, whether it was fused, its mask (read from the graph: the nodes that
  build SDPA's attn_mask, or the explicit attention's masked_fill), and which SDPA kernels it can use in bf16
  on an sm80+ GPU (the rules of PyTorch's sdp_utils), with the reason for each one it cannot;
- the spec's `expect` lines, checked.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import fx

from attncomp import ir
from attncomp.ir import nodes
from attncomp.lower import CompiledModel, family_of, ops
from attncomp.lower.flops import FLOP_LENGTH, training_flops
from attncomp.lower.units import Unit



@dataclass
class AttentionReport:
    site: str  # "encoder self-attention", ...
    layers: int
    kind: str
    fused: bool
    mask: str  # "none", "causal", "padding", "band + padding", ...
    d_k: int
    d_v: int
    backends: dict[str, str] = field(default_factory=dict)  # backend -> "yes" or the reason why not
    grouping: str = ""  # "multi-head (8 heads)", "grouped-query: 8 query heads over 2 key/value heads ...", ...
    kernel: str = ""  # "sdpa", "flex" or "explicit", and why


@dataclass
class BuildReport:
    name: str
    hash: str
    params: int
    params_by_component: dict[str, int]
    flops_per_token: float
    fused_attention: int
    attention: list[AttentionReport]
    layer_kinds: list[dict]  # {"stack", "kind" (the stack's own layers: its name), "layers"}
    expect: list[dict]
    expect_ok: bool

    def to_json(self) -> dict:
        return asdict(self)


def count_params(model: CompiledModel) -> tuple[int, dict[str, int]]:
    """Trainable parameters, each shared tensor once, grouped by top-level component."""
    by: Counter[str] = Counter()
    for name, p in model.named_parameters():  # named_parameters() yields a tied tensor once
        top = name.split(".")[0]
        embeddings = top in ("embed", "src_embed", "tgt_embed", "segment_embed", "output") or ".pos." in name
        by["embeddings" if embeddings else top] += p.numel()
    return sum(by.values()), dict(by)


def _backends(kind: str, mask: str, d_k: int, d_v: int) -> dict[str, str]:
    """Which SDPA kernels an attention can use in bf16 on sm80+, and why not (sdp_utils' rules)."""
    if kind == "additive":
        reason = "not fused: explicit attention (additive scores, relative values, or fuse_attention not run)"
        return {"flash": reason, "efficient": reason, "math": "explicit ops, no SDPA"}
    flash = []
    if mask not in ("none", "causal"):
        article = "an" if mask[0] in "aeiou" else "a"  # an alibi + causal mask
        flash.append(f"needs no explicit mask (this one has {article} {mask} mask)")
    if d_k != d_v:
        flash.append(f"needs d_k = d_v (here {d_k} and {d_v})")
    if max(d_k, d_v) > 256:
        flash.append(f"head size {max(d_k, d_v)} > 256")
    efficient = []
    if d_k % 8 or d_v % 8:
        efficient.append(f"head sizes must be multiples of 8 in bf16 (here {d_k}, {d_v})")
    return {"flash": "; ".join(flash) or "yes", "efficient": "; ".join(efficient) or "yes", "math": "yes"}


def _flex_backends(d_k: int, d_v: int) -> dict[str, str]:
    """ops.flex_attend's rule: FlexAttention under torch.compile, for heads at least 16 wide."""
    if min(d_k, d_v) < 16:
        return {"flex": f"no: heads narrower than 16 (here {d_k}, {d_v}) take the explicit form (Inductor's "
                        "FlexAttention kernel needs 16)"}
    return {"flex": "yes, under torch.compile: FlexAttention with the spec's score_mod (and a block mask where "
                    "causal or local); uncompiled, and CPU training (no CPU backward), take the explicit form"}


def kernel_of(kind, arch: nodes.ModelSpec, got: str) -> str:
    """The kernel an attention got, and why (the rule of docs/compiler.md, *Which kernel*)."""
    if got == "sdpa":
        return "sdpa: its scale, positional bias and mask are SDPA's arguments (scale=, attn_mask=, is_causal=)"
    if got == "flex":
        return "flex: soft-capped scores (a score function) or sinks (a log-sum-exp correction), which SDPA cannot take"
    if kind.kind == "additive":
        return "explicit: additive scores are no dot product"
    if isinstance(arch.positions, nodes.Relative) and arch.positions.values:
        return "explicit: relative positions' value term"
    if (getattr(kind, "softcap", 0) or getattr(kind, "sinks", False)) and arch.dropout.attention:
        return "explicit: soft-capping or sinks with attention dropout (FlexAttention has no dropout)"
    return "explicit: fuse_attention not run, or no rule matched"


def _describe_mask(mask) -> str:
    """What a mask is, read from the nodes that build it (ops.padding_mask, ops.band_mask, ...)."""
    if not isinstance(mask, fx.Node):
        return "none"
    if mask.op == "placeholder":  # what the stack hands its layers
        return {"padding_mask": "padding", "position_bias": "buckets"}.get(mask.target, mask.target)
    if mask.target in (torch.logical_not, ops.attend):
        return _describe_mask(mask.args[0])
    if mask.target is ops.either:
        return " + ".join(_describe_mask(m) for m in mask.args)
    if mask.target is torch.logical_or:
        return " + ".join(_describe_mask(m) for m in mask.args)
    if mask.target is ops.padding_mask:
        return "padding"
    if mask.target is ops.causal_mask:
        return "causal"
    if mask.target is ops.band_mask:
        return "causal band" if mask.args[2] else "band"
    return _describe_bias(mask)


def _describe_bias(node: fx.Node) -> str:
    """A positional bias on the scores (ALiBi, relative), alone or with the mask that hides keys."""
    if node.target is ops.additive_mask:
        return f"{_describe_mask(node.args[0])} + {_describe_mask(node.args[1])}"
    if node.target is ops.alibi_bias:
        return "alibi"
    if node.target is torch.mul and isinstance(node.args[0], fx.Node) and node.args[0].target is torch.einsum:
        return "relative"  # q . a^K / sqrt(d_k)
    return node.name


def _mask_of(attention: fx.Node) -> str:
    """The mask of one attention in the graph: SDPA's attn_mask or is_causal, or the -inf masked_fill
    that the explicit attention applies to its scores."""
    if attention.target is F.scaled_dot_product_attention:
        if attention.kwargs.get("is_causal"):
            return "causal"
        return _describe_mask(attention.kwargs.get("attn_mask"))
    if attention.target is ops.flex_attend:
        parts = [_describe_bias(attention.kwargs["bias"])] if "bias" in attention.kwargs else []
        band = "window" in attention.kwargs
        parts += [("causal band" if attention.kwargs.get("causal") else "band") if band else "causal"] \
            if band or attention.kwargs.get("causal") else []
        parts += [_describe_mask(attention.kwargs["mask"])] if "mask" in attention.kwargs else []
        return " + ".join(parts) or "none"
    seen, todo = set(), [attention]
    while todo:  # back from `weights @ v` to the scores' masked_fill (a handful of nodes)
        node = todo.pop()
        if node.target is torch.softmax:
            return _explicit_mask(node.args[0])
        seen.add(node)
        todo.extend(n for n in node.all_input_nodes if n not in seen and n.op == "call_function")
    return "none"


def _explicit_mask(scores: fx.Node) -> str:
    """The mask of explicit scores: [hide(] [add(s, bias)] [, mask)] (attncomp.lower.attention)."""
    parts = []
    if scores.target is ops.hide:
        parts.append(_describe_mask(scores.args[1]))
        scores = scores.args[0]
    if scores.target is torch.add and isinstance(scores.args[1], fx.Node):
        parts.insert(0, _describe_bias(scores.args[1]))
    return " + ".join(parts) or "none"


def _gqa_backends(backends: dict[str, str], attention: fx.Node) -> dict[str, str]:
    """SDPA with enable_gqa: on CUDA the flash kernel takes it and the memory-efficient one does not
    (pytorch/pytorch#139586); fuse_attention passes it only where no mask rules flash out."""
    if not attention.kwargs.get("enable_gqa"):
        return backends
    return {**backends, "efficient": "takes no enable_gqa (grouped k/v heads); flash or math runs"}


def grouping(heads: int, kv_heads: int, attention: fx.Node) -> str:
    """How query heads share key/value heads, and how the graph realises it (SDPA's enable_gqa, or
    k and v repeated to every query head)."""
    if kv_heads == heads:
        return f"multi-head ({heads} heads)"
    form = "multi-query" if kv_heads == 1 else "grouped-query"
    how = "SDPA enable_gqa" if attention.kwargs.get("enable_gqa") else "k/v heads repeated"
    return f"{form}: {heads} query heads over {kv_heads} key/value head{'s' * (kv_heads > 1)} " \
           f"({heads // kv_heads} per group, {how})"


def _attention_sites(model: CompiledModel) -> list[tuple[str, str, Unit, int, nodes.Stack]]:
    """(stack, role, attention unit, how many layers use it, the stack as those layers see it) for every
    attention of the model's stacks."""
    sites = []
    for stack_name in family_of(model.spec.model).stacks:
        layers = model.program.members[stack_name].members["layers"].units
        plan = getattr(model.spec.model, stack_name).layer_plan()
        for role in ("self_attn", "cross_attn"):
            used: Counter[Unit] = Counter()
            seen: dict[Unit, nodes.Stack] = {}
            for layer, (_, view) in zip(layers, plan):
                if role in layer.members:
                    used[layer.members[role]] += 1
                    seen.setdefault(layer.members[role], view)
            sites += [(stack_name, role, unit, count, seen[unit]) for unit, count in used.items()]
    return sites


def layer_kinds(spec: nodes.Spec) -> list[dict]:
    """Per stack, its layer kinds in order of first use and how many layers each has ("" is the stack's own)."""
    rows = []
    for stack_name in family_of(spec.model).stacks:
        counts = Counter(kind for kind, _ in getattr(spec.model, stack_name).layer_plan())
        rows += [{"stack": stack_name, "kind": kind or stack_name, "layers": n} for kind, n in counts.items()]
    return rows


def attention_report(model: CompiledModel) -> list[AttentionReport]:
    """One row per attention unit of each stack, read from its training graph (`forward`)."""
    rows = []
    for stack_name, role, unit, layers, stack in _attention_sites(model):
        kind = stack.attention.kind if role == "self_attn" else stack.cross_attention.kind
        graph = unit.methods["forward"].graph
        fused = [n for n in graph.nodes if n.op == "call_function" and n.target is F.scaled_dot_product_attention]
        flex = [n for n in graph.nodes if n.op == "call_function" and n.target is ops.flex_attend]
        attention = fused[0] if fused else flex[0] if flex else next(
            n for n in graph.nodes if n.op == "call_function" and n.target is torch.matmul and n.meta.get("var") == "heads")
        mask = _mask_of(attention)
        site = f"{stack_name} self-attention" if role == "self_attn" else "encoder-decoder attention"
        spec_kind = stack.attention if role == "self_attn" else stack.cross_attention
        backends = _flex_backends(stack.d_k, stack.d_v) if flex else \
            _gqa_backends(_backends(kind if fused else "additive", mask, stack.d_k, stack.d_v), attention)
        rows.append(AttentionReport(site, layers, kind, bool(fused or flex), mask, stack.d_k, stack.d_v, backends,
                                    grouping(stack.heads, stack.key_value_heads, attention),
                                    kernel_of(spec_kind, model.spec.model, "sdpa" if fused else "flex" if flex
                                              else "explicit")))
    return rows


def check_expect(spec: nodes.Spec, params: int, flops: float) -> list[dict]:
    rows = []
    for key, measured in (("params", params), ("flops", flops)):
        tolerance = getattr(spec.expect, key)
        if tolerance is None:
            continue
        low, high = tolerance.bounds()
        rows.append({"key": key, "measured": measured, "expected": tolerance.value, "low": low, "high": high,
                     "ok": tolerance.admits(measured)})
    return rows


def build_report(model: CompiledModel) -> BuildReport:
    """The report of a model compiled on the meta device."""
    params, by = count_params(model)
    flops = training_flops(model)  # what FlopCounterMode counts over forward and backward (tests/lower/test_flops.py)
    expect = check_expect(model.spec, params, flops)
    attention = attention_report(model)
    return BuildReport(
        name=model.spec.model.name, hash=ir.spec_hash(model.spec), params=params, params_by_component=by,
        flops_per_token=flops, fused_attention=sum(a.layers for a in attention if a.fused),
        attention=attention, layer_kinds=layer_kinds(model.spec), expect=expect,
        expect_ok=all(r["ok"] for r in expect),
    )


def _millions(n: float) -> str:
    return f"{n / 1e6:.2f}M"


def format_report(report: BuildReport) -> str:
    lines = [f"{report.name}  (sha256 {report.hash[:16]})",
             f"  parameters      {_millions(report.params)}  ({report.params:,})"]
    for part, n in report.params_by_component.items():
        lines.append(f"    {part:<13} {_millions(n)}")
    lines.append(f"  training FLOPs  {report.flops_per_token / 1e9:.3f} GFLOP per target token "
                 f"(forward + backward, {FLOP_LENGTH}-token sentences)")
    if any(row["kind"] != row["stack"] for row in report.layer_kinds):  # a stack of several layer kinds
        lines.append("  layer kinds     " + ", ".join(f"{r['stack']}: {r['layers']} x {r['kind']}"
                                                        for r in report.layer_kinds))
    flex = sum(a.layers for a in report.attention if a.kernel.startswith("flex"))
    lines.append(f"  fused attention {report.fused_attention - flex} scaled_dot_product_attention calls in forward"
                 + (f", {flex} flex_attention" if flex else ""))
    for a in report.attention:
        state = "fused" if a.fused else "explicit"
        lines.append(f"    {a.site:<26} x{a.layers:<3} {a.kind:<10} {state:<8} mask: {a.mask:<14} "
                     f"d_k={a.d_k} d_v={a.d_v}")
        if a.kernel:
            lines.append(f"      {'kernel':<10} {a.kernel}")
        if a.grouping and not a.grouping.startswith("multi-head"):
            lines.append(f"      {'heads':<10} {a.grouping}")
        for backend, verdict in a.backends.items():
            lines.append(f"      {backend:<10} {verdict}")
    for row in report.expect:
        verdict = "ok" if row["ok"] else "FAILED"
        lines.append(f"  expect {row['key']:<8} {row['measured']:,.0f} in [{row['low']:,.0f}, {row['high']:,.0f}]: "
                     f"{verdict}")
    return "\n".join(lines)

