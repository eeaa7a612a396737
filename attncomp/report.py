"""The build report: what a compiled spec is, measured from its graphs before any training.

- parameters, total (tied weights once) and by component;
- training FLOPs per target token (forward and backward: the matrix products of the optimised graphs,
  counted from their nodes' shapes by attncomp.lower.flops) with 64-token source and target sentences;
- each attention: where it is, its mask (as the lowering named it), the kernel fuse_attention chose from its
  parts and why (both recorded in the graph's node metadata, `meta["attention"]`), and which SDPA kernels it
  can use in bf16 on an sm80+ GPU (the rules of PyTorch's sdp_utils), with the reason for each one it cannot;
- the spec's `expect` lines, checked.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

import torch
from torch import fx

from attncomp import ir
from attncomp.ir import nodes
from attncomp.lower import CompiledModel, family_of
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
    calls: int = 1  # kernel calls per layer: 2 for a differential attention (its two maps)


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


def _gqa_backends(backends: dict[str, str], grouped: bool) -> dict[str, str]:
    """SDPA with enable_gqa: on CUDA the flash kernel takes it and the memory-efficient one does not
    (pytorch/pytorch#139586); fuse_attention passes it only where no mask rules flash out."""
    if not grouped:
        return backends
    return {**backends, "efficient": "takes no enable_gqa (grouped k/v heads); flash or math runs"}


def grouping(heads: int, kv_heads: int, grouped: bool) -> str:
    """How query heads share key/value heads, and how the graph realises it (SDPA's enable_gqa, or
    k and v repeated to every query head)."""
    if kv_heads == heads:
        return f"multi-head ({heads} heads)"
    form = "multi-query" if kv_heads == 1 else "grouped-query"
    how = "SDPA enable_gqa" if grouped else "k/v heads repeated"
    return f"{form}: {heads} query heads over {kv_heads} key/value head{'s' * (kv_heads > 1)} " \
           f"({heads // kv_heads} per group, {how})"


def _attention_sites(model: CompiledModel) -> list[tuple[str, str, Unit, int, nodes.Stack]]:
    """(stack, role, attention unit, how many layers use it, the stack as those layers see it) for every
    attention of the model's stacks."""
    sites = []
    for stack_name in family_of(model.spec.model).stacks:
        stack = getattr(model.spec.model, stack_name)
        sets = model.program.members[stack_name].members["layers"].units
        layers = [sets[s] for s in stack.parameter_sets()]  # a parameter set's unit once per layer running it
        plan = stack.layer_plan()
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


def recorded(graph: fx.Graph) -> dict:
    """What the lowering and fuse_attention recorded of a graph's attention (`meta["attention"]`: its mask,
    and its kernel, the reason and whether SDPA took enable_gqa), fuse_attention's default where it did not run."""
    records = [n.meta["attention"] for n in graph.nodes if "attention" in n.meta]
    assert len(records) in (1, 2), records  # two: a differential attention's maps, alike but their masks' nodes
    return {"kernel": "explicit", "reason": "fuse_attention not run", "grouped": False, **records[0]}


def attention_report(model: CompiledModel) -> list[AttentionReport]:
    """One row per attention unit of each stack, read from its training graph (`forward`)."""
    rows = []
    for stack_name, role, unit, layers, stack in _attention_sites(model):
        attention = stack.attention if role == "self_attn" else stack.cross_attention
        normalizer = getattr(attention, "normalizer", nodes.Softmax())
        kind = attention.kind if isinstance(normalizer, nodes.Softmax) else f"{attention.kind} ({normalizer.kind})"
        record = recorded(unit.methods["forward"].graph)
        kernel, mask = record["kernel"], record["mask"]
        cla = "CLA " if unit.name.startswith("SharedKV") else ""  # share_kv: the layers that read keys and values
        site = f"{stack_name} {cla}self-attention" if role == "self_attn" else "encoder-decoder attention"
        calls = 2 if isinstance(normalizer, nodes.Differential) else 1  # a differential map's q and k: d_k / 2
        backends = _flex_backends(stack.d_k // calls, stack.d_v) if kernel == "flex" else _gqa_backends(
            _backends(kind if kernel == "sdpa" else "additive", mask, stack.d_k // calls, stack.d_v),
            record["grouped"])
        rows.append(AttentionReport(site, layers, kind, kernel != "explicit", mask, stack.d_k, stack.d_v, backends,
                                    grouping(stack.heads, stack.key_value_heads, record["grouped"]),
                                    f"{kernel}: {record['reason']}", calls))
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
        flops_per_token=flops, fused_attention=sum(a.layers * a.calls for a in attention if a.fused),
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
    flex = sum(a.layers * a.calls for a in report.attention if a.kernel.startswith("flex"))
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

