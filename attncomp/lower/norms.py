"""Norms as a stack's normalization asks: a torch.nn leaf (LayerNorm, RMSNorm, with or without their
parameters), or, for RMSNorm with an offset gain (Gemma's x / rms(x) * (1 + w)), a unit of its own:

    OffsetRMSNorm.forward(x) = rms_norm(x) * (1 + weight)      weight starts at 0
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import fx

from attncomp.ir import nodes
from attncomp.lower.units import Builder, Param, Unit, norm

Node = fx.Node


def offset_rms_norm(ctx, dim: int, eps: float) -> Unit:
    unit = Unit("OffsetRMSNorm", "RMSNorm with a (1 + w) gain, w starting at 0 (Gemma)")
    b = Builder(unit, "forward")
    x = b.input("x", ("batch", "seq_len", dim))
    gain = b.call(torch.add, b.param("weight", Param((dim,), "zeros")), 1, name="gain", shape=(dim,))
    normed = b.call(F.rms_norm, x, (dim,), eps=eps, name="x", shape=x.meta["shape"])
    b.output(b.call(torch.mul, normed, gain, name="x", shape=x.meta["shape"]))
    return unit


def apply_norm(b: Builder, ctx, member: str, normalization: nodes.Normalization, dim: int, x: Node,
               name: str | None = None) -> Node:
    """`member`(x): the norm a stack's `normalization` describes, declared on the unit `b` builds."""
    eps = ctx.arch.norm_eps if normalization.eps is None else normalization.eps
    if isinstance(normalization, nodes.RMSNorm) and normalization.offset:
        return b.sub(member, ctx.unit(offset_rms_norm, dim, eps), "forward", x, name=name or member,
                     shape=x.meta.get("shape"))
    return b.leaf(member, norm(normalization, dim, eps), x, name=name)
