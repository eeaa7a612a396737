"""Small named operations the lowered graphs call as single nodes.

Each is one idea with one spelling, so passes can recognise it by its target (a causal mask is
`causal_mask`, whatever its size) and printed graphs stay short. Masks use True = hidden, the
convention of `masked_fill`; `fuse_attention` flips them for SDPA, whose True means "attend".
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attncomp.vocab import BOS, EOS, PAD, SEP, UNK  # noqa: F401  (re-exported for graphs)


def padding_mask(tokens: Tensor, pad: int) -> Tensor:
    """(B, T) tokens -> (B, 1, 1, T) bool, True where the key is padding."""
    return torch.eq(tokens, pad).unsqueeze(1).unsqueeze(2)


def causal_mask(length: int, device: torch.device) -> Tensor:
    """(T, T) bool, True above the diagonal: query i may not see keys after i."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(1)


def band_mask(length: int, window: int, causal: bool, device: torch.device) -> Tensor:
    """(T, T) bool for restricted attention: True where |i - j| > window (or j > i when causal)."""
    pos = torch.arange(length, device=device)
    offset = pos.unsqueeze(0) - pos.unsqueeze(1)  # key j minus query i
    hidden = offset.abs() > window
    return hidden | (offset > 0) if causal else hidden


def fully_masked_rows(mask: Tensor) -> Tensor:
    """True for queries that may see no key at all; their attention output is defined as zero."""
    return mask.all(dim=-1, keepdim=True)


def sinusoidal(positions: Tensor, d_model: int, dtype: torch.dtype) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...): (T,) -> (T, d_model)."""
    half = torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float64)
    inv_freq = torch.exp(half * (-math.log(10000.0) / d_model))
    angles = positions.to(torch.float64).unsqueeze(1) * inv_freq.unsqueeze(0)  # (T, ceil(d/2))
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)[:, :d_model]
    return table.to(dtype)


def dropout_p(p: float, training: bool) -> float:
    """SDPA drops whenever dropout_p > 0, so evaluation must pass 0."""
    return p if training else 0.0


def rope_table(positions: Tensor, dims: int, base: float, dtype: torch.dtype) -> Tensor:
    """Rotary angles for positions (T,): (2, T, dims), cos then sin of pos * base^(-2i/dims), each
    half repeated (HF Llama's layout: dim i pairs with dim i + dims/2); computed in float64."""
    inv_freq = base ** -(torch.arange(0, dims, 2, device=positions.device, dtype=torch.float64) / dims)
    angles = positions.to(torch.float64).unsqueeze(1) * inv_freq.unsqueeze(0)  # (T, dims / 2)
    angles = torch.cat((angles, angles), dim=-1)
    return torch.stack((angles.cos(), angles.sin())).to(dtype)


def rotate(x: Tensor, table: Tensor) -> Tensor:
    """x (B, h, T, d) with its first `dims` dims rotated: x * cos + rotate_half(x) * sin, where
    rotate_half(x) = (-x2, x1) for the halves x1, x2 (Su et al. 2021 as HF Llama writes it)."""
    cos, sin = table[0].to(x.dtype), table[1].to(x.dtype)  # under autocast q and k may be narrower
    dims = cos.shape[-1]
    rot, rest = x[..., :dims], x[..., dims:]
    half = torch.cat((-rot[..., dims // 2:], rot[..., : dims // 2]), dim=-1)
    return torch.cat((rot * cos + half * sin, rest), dim=-1)
