"""The build report: what a compiled spec is, measured from its graphs before any training.

- parameters, total (tied weights once) and by component;
- training FLOPs per target token (forward and backward, counted by torch's FlopCounterMode
  while the optimised graph runs on the meta device) with 64-token source and target sentences;
- each attention: where it is, whether it was fused, and which SDPA kernels it can use in bf16
  on an sm80+ GPU (the rules of PyTorch's sdp_utils), with the reason for each one it cannot;
- the spec's `expect` lines, checked.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from attncomp.ir import nodes
from attncomp.lower import CompiledModel

FLOP_BATCH, FLOP_LENGTH = 8, 64


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


@dataclass
class BuildReport:
    name: str
    hash: str
    params: int
    params_by_component: dict[str, int]
    flops_per_token: float
    fused_attention: int
    attention: list[AttentionReport]
    expect: list[dict]
    expect_ok: bool

    def to_json(self) -> dict:
        return asdict(self)


def count_params(model: CompiledModel) -> tuple[int, dict[str, int]]:
    """Trainable parameters, each shared tensor once, grouped by top-level component."""
    by: Counter[str] = Counter()
    for name, p in model.named_parameters():  # named_parameters() yields a tied tensor once
        top = name.split(".")[0]
        by["embeddings" if top in ("embed", "src_embed", "tgt_embed", "output") or ".pos." in name else top] += p.numel()
    return sum(by.values()), dict(by)


def count_flops(model: CompiledModel) -> float:
    """Training FLOPs per target token: forward and backward of the optimised graph, on meta tensors."""
    meta = model if next(model.parameters()).is_meta else None
    if meta is None:
        raise ValueError("count_flops expects a model built on the meta device")
    m = model.spec.model
    shape = (FLOP_BATCH, FLOP_LENGTH)
    tokens = torch.full(shape, 5, dtype=torch.long, device="meta")
    with FlopCounterMode(display=False) as counter:
        if m.encoder is not None and m.decoder is not None:
            out = model(tokens, tokens)
        else:
            out = model(tokens)
        out.float().sum().backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / (FLOP_BATCH * FLOP_LENGTH)


def _backends(kind: str, mask: str, d_k: int, d_v: int) -> dict[str, str]:
    """Which SDPA kernels an attention can use in bf16 on sm80+, and why not (sdp_utils' rules)."""
    if kind == "additive":
        reason = "not fused: explicit attention (additive, or fuse_attention not run)"
        return {"flash": reason, "efficient": reason, "math": "explicit ops, no SDPA"}
    flash = []
    if mask not in ("none", "causal"):
        flash.append(f"needs no explicit mask (this one has a {mask} mask)")
    if d_k != d_v:
        flash.append(f"needs d_k = d_v (here {d_k} and {d_v})")
    if max(d_k, d_v) > 256:
        flash.append(f"head size {max(d_k, d_v)} > 256")
    efficient = []
    if d_k % 8 or d_v % 8:
        efficient.append(f"head sizes must be multiples of 8 in bf16 (here {d_k}, {d_v})")
    return {"flash": "; ".join(flash) or "yes", "efficient": "; ".join(efficient) or "yes", "math": "yes"}


_MASK_NAMES = {  # what an explicit mask is, by site and attention kind
    ("encoder", "self_attn"): {"local": "band + padding", "*": "padding"},
    ("decoder", "self_attn"): {"local": "causal band", "*": "causal"},
    ("decoder", "cross_attn"): {"*": "padding"},
}


def attention_report(model: CompiledModel) -> list[AttentionReport]:
    """One row per attention site of the training forward graph, from the nodes lowering tagged."""
    m = model.spec.model
    found: dict[tuple[str, str], list] = {}
    for node in model.graphs["forward"].nodes:
        prefix = node.meta.get("attention")
        if prefix:
            stack, _, _, role = prefix.split(".")
            found.setdefault((stack, role), []).append(node)
    rows = []
    for (stack_name, role), group in found.items():
        stack = getattr(m, stack_name)
        kind = stack.attention.kind if role == "self_attn" else stack.cross_attention.kind
        fused = all(n.target is F.scaled_dot_product_attention for n in group)
        names = _MASK_NAMES[(stack_name, role)]
        mask = names.get(kind, names["*"])
        site = f"{stack_name} self-attention" if role == "self_attn" else "encoder-decoder attention"
        rows.append(AttentionReport(site, len(group), kind, fused, mask, stack.d_k, stack.d_v,
                                    _backends(kind if fused else "additive", mask, stack.d_k, stack.d_v)))
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
    from attncomp import ir
    from attncomp.passes import count_fused

    params, by = count_params(model)
    flops = count_flops(model)
    expect = check_expect(model.spec, params, flops)
    return BuildReport(
        name=model.spec.model.name, hash=ir.spec_hash(model.spec), params=params, params_by_component=by,
        flops_per_token=flops, fused_attention=count_fused(model.graphs["forward"]),
        attention=attention_report(model), expect=expect, expect_ok=all(r["ok"] for r in expect),
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
    lines.append(f"  fused attention {report.fused_attention} scaled_dot_product_attention calls in forward")
    for a in report.attention:
        state = "fused" if a.fused else "explicit"
        lines.append(f"    {a.site:<26} x{a.layers:<3} {a.kind:<10} {state:<8} mask: {a.mask:<14} "
                     f"d_k={a.d_k} d_v={a.d_v}")
        for backend, verdict in a.backends.items():
            lines.append(f"      {backend:<10} {verdict}")
    for row in report.expect:
        verdict = "ok" if row["ok"] else "FAILED"
        lines.append(f"  expect {row['key']:<8} {row['measured']:,.0f} in [{row['low']:,.0f}, {row['high']:,.0f}]: "
                     f"{verdict}")
    return "\n".join(lines)

