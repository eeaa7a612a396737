"""Soft-capping, the one definition: the graphs' attention scores and final logits call it (attncomp.lower.ops
names it, and a generated module copies it), and the loss applies it to the logits of its fused projection
with the transform a model declares through its protocol (attncomp.protocol: logit_scale, logit_softcap)."""

from __future__ import annotations

import torch
from torch import Tensor


def softcap(x: Tensor, cap: float) -> Tensor:
    """Soft-capping, tanh(x / cap) * cap (Gemma 2's attention scores and final logits): smooth, and within
    (-cap, cap)."""
    return torch.tanh(x / cap) * cap
