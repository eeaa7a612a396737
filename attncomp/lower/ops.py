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


def hide(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Scores with -inf where `mask` hides a key (True = hidden); no mask hides nothing."""
    return scores if mask is None else torch.masked_fill(scores, mask, -math.inf)


def zero_rows(weights: Tensor, mask: Tensor | None) -> Tensor:
    """Attention weights with 0 for queries that `mask` lets see no key (their softmax is NaN)."""
    return weights if mask is None else torch.masked_fill(weights, mask.all(dim=-1, keepdim=True), 0.0)


def attend(mask: Tensor | None) -> Tensor | None:
    """SDPA's attn_mask from a True = hidden mask: True = attend; None stays None."""
    return None if mask is None else torch.logical_not(mask)


def either(mask: Tensor, other: Tensor | None) -> Tensor:
    """Keys hidden by either mask (the second may be absent)."""
    return mask if other is None else torch.logical_or(mask, other)


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


def sinusoidal_halves(positions: Tensor, d_model: int, dtype: torch.dtype) -> Tensor:
    """Marian's layout, sines then cosines: [sin(pos f_i) for all i, cos(pos f_i) for all i],
    f_i = 10000^(-2i/d_model), the paper's frequencies: (T,) -> (T, d_model)."""
    half = torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float64)
    inv_freq = torch.exp(half * (-math.log(10000.0) / d_model))
    angles = positions.to(torch.float64).unsqueeze(1) * inv_freq.unsqueeze(0)  # (T, ceil(d/2))
    table = torch.cat((angles.sin(), angles.cos()[:, : d_model // 2]), dim=-1)
    return table.to(dtype)


def sinusoidal_tensor2tensor(positions: Tensor, d_model: int, dtype: torch.dtype) -> Tensor:
    """tensor2tensor's get_timing_signal_1d (and fairseq's): sines then cosines of pos * f_i,
    f_i = 10000^(-i/(d_model/2 - 1)), a zero column when d_model is odd: (T,) -> (T, d_model)."""
    half = d_model // 2
    inv_freq = torch.exp(torch.arange(half, device=positions.device, dtype=torch.float64)
                         * (-math.log(10000.0) / (half - 1)))
    angles = positions.to(torch.float64).unsqueeze(1) * inv_freq.unsqueeze(0)  # (T, d_model // 2)
    table = torch.cat((angles.sin(), angles.cos(), angles.new_zeros(angles.shape[0], d_model % 2)), dim=-1)
    return table.to(dtype)


def alibi_bias(heads: int, q_len: int, k_len: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """ALiBi's -m_h |i - j|: (h, Tq, Tk); the queries are the last Tq of the Tk positions (a decode step
    has Tq = 1). Slopes as in the paper's code: 2^(-8/n), its powers, for n heads a power of two;
    otherwise those of the power of two below, then every other slope of the one above."""
    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    below = 2 ** math.floor(math.log2(heads))
    slopes = power_of_two(below) + power_of_two(2 * below)[0::2][: heads - below]
    keys = torch.arange(k_len, device=device)
    distance = (keys.unsqueeze(0) - keys[k_len - q_len :].unsqueeze(1)).abs()  # (Tq, Tk) |j - i|
    m = torch.tensor(slopes, device=device, dtype=torch.float64).view(heads, 1, 1)
    return (-m * distance.to(torch.float64)).to(dtype)


def relative_positions(q_len: int, k_len: int, max_distance: int, device: torch.device) -> Tensor:
    """(Tq, Tk) indices clip(j - i, -k, k) + k into a table of 2k + 1 relative positions
    (tensor2tensor's _generate_relative_positions_matrix); the queries are the last Tq positions."""
    keys = torch.arange(k_len, device=device)
    distance = keys.unsqueeze(0) - keys[k_len - q_len :].unsqueeze(1)
    return distance.clamp(-max_distance, max_distance) + max_distance


def additive_mask(bias: Tensor, hidden: Tensor | None) -> Tensor:
    """One float mask for the scores: the positional bias, and -inf where `hidden` (True = hidden)."""
    return bias if hidden is None else bias.masked_fill(hidden, -math.inf)


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


def segment_ids(tokens: Tensor, segments: Tensor | None) -> Tensor:
    """The segment (token type) of each token: `segments` (B, T), or segment 0 everywhere when absent."""
    return torch.zeros_like(tokens) if segments is None else segments


def softcap(logits: Tensor, cap: float) -> Tensor:
    """Soft-capping (Gemma 2's final logits): cap * tanh(logits / cap), smooth, within (-cap, cap)."""
    return torch.tanh(logits / cap) * cap
