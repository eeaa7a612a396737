"""Small named operations the lowered graphs call as single nodes.

Each is one idea with one spelling, so passes can recognise it by its target (a causal mask is
`causal_mask`, whatever its size) and printed graphs stay short. Masks use True = hidden, the
convention of `masked_fill`; `fuse_attention` flips them for SDPA, whose True means "attend".
"""

from __future__ import annotations

import math

import torch
from torch import Tensor



def joined(i: int, layers: int, x: Tensor, x0: Tensor, outputs: list, unet: Tensor | None,
           x_weights: Tensor | None, x0_weights: Tensor | None) -> Tensor:
    """Layer i's input, of `layers`, with the connections across layers: a U-net skip brings layer
    j = L-1-i's output (j < L/2) times unet[j]; then the stack's input x0 is re-injected,
    x_weights[i-1] x + x0_weights[i-1] x0."""
    j = layers - 1 - i
    if unet is not None and j < layers // 2:
        x = x + unet[j] * outputs[j]
    if x_weights is not None and i > 0:
        x = x_weights[i - 1] * x + x0_weights[i - 1] * x0
    return x


def lambda_init(i: int) -> float:
    """Differential attention's lambda_init in layer i of its stack (from 0), where the spec leaves it to the depth
    (Ye et al. 2024): 0.8 - 0.6 exp(-0.3 (l - 1)) at depth l = i + 1. The stack's loop hands it to each layer."""
    return 0.8 - 0.6 * math.exp(-0.3 * i)


def value_residual(v: Tensor, first: Tensor | None, weights: Tensor) -> tuple[Tensor, Tensor]:
    """Value residual learning (ResFormer): a layer's values mixed with the first layer's,
    l_1 V_n + l_2 V_1, and V_1 for the layers after; the first layer (first is None) is its own V_1."""
    first = v if first is None else first
    return weights[0] * v + weights[1] * first, first


def padding_mask(tokens: Tensor, pad: int) -> Tensor:
    """(B, T) tokens -> (B, 1, 1, T) bool, True where the key is padding."""
    return torch.eq(tokens, pad).unsqueeze(1).unsqueeze(2)


def causal_mask(length: int, device: torch.device) -> Tensor:
    """(T, T) bool, True above the diagonal: query i may not see keys after i."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(1)


def prefix_mask(length: int, prefix: Tensor | None, device: torch.device) -> Tensor:
    """A prefix LM's mask (`mask = prefix`), (B, 1, T, T) bool, True = hidden: query i of row b sees key j where
    j < prefix[b] or j <= i, every key of the row's prefix both ways and causal after it. A prefix of 0 (or less)
    is causal, one of T or more sees the whole row; `prefix` None: no row has a prefix, causal_mask (T, T)."""
    causal = torch.ones(length, length, dtype=torch.bool, device=device).triu(1)  # (a helper calls no other)
    if prefix is None:
        return causal
    keys = torch.arange(length, device=device)
    return causal & (keys >= prefix.view(-1, 1, 1, 1))


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


def scaled_rope_table(positions: Tensor, dims: int, base: float, dtype: torch.dtype, scaling: str, factor: float,
                      original_max_len: int = 0, low_freq_factor: float = 1.0, high_freq_factor: float = 4.0,
                      beta_fast: float = 32.0, beta_slow: float = 1.0, attention_factor: float | None = None,
                      truncate: bool = True, short_factor: tuple[float, ...] = (),
                      long_factor: tuple[float, ...] = ()) -> Tensor:
    """rope_table with the inverse frequencies of a context extension, transformers' ROPE_INIT_FUNCTIONS
    (modeling_rope_utils) formula for formula, in float64: `linear` divides them by factor; `dynamic` (NTK)
    grows the base with the length L = the last position + 1 past original_max_len (transformers' seq_len);
    `llama3` divides the long wavelengths by factor and blends the middle ones; `yarn` ramps between
    interpolated and original frequencies and scales cos and sin by attention_factor; `longrope` divides each
    pair's frequency by its own factor, the long ones where L = the last position + 1 is past original_max_len
    (transformers' seq_len, as dynamic's), and scales cos and sin by attention_factor."""
    f64 = dict(device=positions.device, dtype=torch.float64)
    exponents = torch.arange(0, dims, 2, **f64) / dims
    inv_freq = 1.0 / (base ** exponents)
    scale = 1.0
    if scaling == "linear":
        inv_freq = inv_freq / factor
    elif scaling == "dynamic":
        length = (positions.max() + 1).to(torch.float64).clamp(min=original_max_len)
        grown = base * ((factor * length / original_max_len) - (factor - 1)) ** (dims / (dims - 2))
        inv_freq = 1.0 / (grown ** exponents)
    elif scaling == "llama3":
        wavelen = 2 * math.pi / inv_freq
        long, short = original_max_len / low_freq_factor, original_max_len / high_freq_factor
        smooth = (original_max_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        inv_freq = torch.where(wavelen > long, inv_freq / factor, torch.where(wavelen < short, inv_freq, blended))
    elif scaling == "yarn":
        def correction(rotations: float) -> float:  # the dim that turns `rotations` times over original_max_len
            return dims * math.log(original_max_len / (rotations * 2 * math.pi)) / (2 * math.log(base))
        low, high = correction(beta_fast), correction(beta_slow)
        if truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dims - 1)
        ramp = ((torch.arange(dims // 2, **f64) - low) / (high - low if high != low else 0.001)).clamp(0, 1)
        kept = 1 - ramp  # the share of each original (extrapolated) frequency
        inv_freq = 1.0 / (factor * base ** exponents) * (1 - kept) + inv_freq * kept
        scale = attention_factor if attention_factor is not None else \
            (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)
    elif scaling == "longrope":
        longer = (positions.max() + 1) > original_max_len  # a tensor: no host sync on the accelerator
        ext = torch.where(longer, torch.tensor(long_factor, **f64), torch.tensor(short_factor, **f64))
        inv_freq = 1.0 / (ext * base ** exponents)
        scale = attention_factor if attention_factor is not None else \
            (math.sqrt(1 + math.log(factor) / math.log(original_max_len)) if factor > 1 else 1.0)
    angles = positions.to(torch.float64).unsqueeze(1) * inv_freq.unsqueeze(0)  # (T, dims / 2)
    angles = torch.cat((angles, angles), dim=-1)
    return (torch.stack((angles.cos(), angles.sin())) * scale).to(dtype)


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


# soft-capping, tanh(x / cap) * cap: defined once, below the compiler, for the loss too; named here (in this
# module's order, which the generated modules' helpers keep)
from attncomp.logits import softcap  # noqa: E402


def bucket_index(q_len: int, k_len: int, count: int, max_distance: int, bidirectional: bool,
                 device: torch.device) -> Tensor:
    """(Tq, Tk) T5 buckets of the distances j - i, the queries the last Tq of Tk positions (transformers'
    T5Attention._relative_position_bucket, its float32 logarithm included, so the buckets agree):
    exact below count / 2 (of the half a direction has when bidirectional), log-spaced up to
    max_distance, farther distances in the last bucket; causal buckets see only j <= i."""
    keys = torch.arange(k_len, device=device)
    distance = keys.unsqueeze(0) - keys[k_len - q_len:].unsqueeze(1)  # j - i
    buckets = torch.zeros_like(distance)
    if bidirectional:
        count //= 2
        buckets = buckets + (distance > 0).long() * count
        distance = distance.abs()
    else:
        distance = -torch.clamp(distance, max=0)
    exact = count // 2
    large = exact + (torch.log(distance.float() / exact) / math.log(max_distance / exact)
                     * (count - exact)).long()
    large = torch.clamp(large, max=count - 1)
    return buckets + torch.where(distance < exact, distance, large)


def bucket_bias(table: Tensor) -> Tensor:
    """A looked-up (Tq, Tk, h) bias table as the scores' (h, Tq, Tk) bias."""
    return table.permute(2, 0, 1)


def sink_softmax(scores: Tensor, sinks: Tensor) -> Tensor:
    """softmax over the keys and one more logit per head that holds no value (gpt-oss's sinks):
    the weights of the real keys, which sum to less than one."""
    column = sinks.to(scores.dtype).view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
    return torch.softmax(torch.cat((scores, column), dim=-1), -1)[..., :-1]


def sigmoid_weights(scores: Tensor, bias: float) -> Tensor:
    """Sigmoid attention's weights (Ramapuram et al. 2024): sigmoid(s + b) for each key on its own, not
    normalised across the keys; a hidden key's score is -inf, so it weighs 0."""
    return torch.sigmoid(scores + bias)


def differential_lambda(lambda_q1: Tensor, lambda_k1: Tensor, lambda_q2: Tensor, lambda_k2: Tensor,
                        lambda_init: float) -> Tensor:
    """Differential attention's lambda (Ye et al. 2024): exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init."""
    return torch.exp(torch.dot(lambda_q1, lambda_k1)) - torch.exp(torch.dot(lambda_q2, lambda_k2)) + lambda_init


def flex_runs(*tensors: Tensor | None) -> bool:
    """Whether FlexAttention can serve a call on these tensors: not on the CPU where a gradient is wanted
    (its backward has no CPU kernel), so CPU training takes the explicit form (flex_attend's rule)."""
    return not (tensors[0].device.type == "cpu" and torch.is_grad_enabled()
                and any(t is not None and t.requires_grad for t in tensors))


def flex_attend(q: Tensor, k: Tensor, v: Tensor, scale: float, cap: float = 0.0, bias: Tensor | None = None,
                mask: Tensor | None = None, causal: bool = False, rows: bool = False,
                sinks: Tensor | None = None, window: int | None = None, prefix: Tensor | None = None) -> Tensor:
    """Attention through FlexAttention (torch.nn.attention.flex_attention): the spec's score function
    (soft-capping, a positional bias, a mask that hides keys: True = hidden) as its score_mod, causality as
    its block mask (queries the last Tq of Tk positions), as is a local `window` (|i - j| <= window, and
    j <= i when causal: ops.band_mask's keys). FlexAttention runs under torch.compile, where it is one
    fused kernel; uncompiled, and on the CPU where a gradient is wanted (flex_runs' rule, written out
    here: the generated module copies this function alone), this computes the explicit form instead, as
    the lowering writes it: uncompiled FlexAttention is PyTorch's unfused reference, which materialises
    the scores too (and fails to differentiate a score function that reads a float once it is called again
    with another value of it: "Pending unbacked symbols", PyTorch 2.11 and 2.13 alike). Heads
    narrower than 16 take the explicit form too: Inductor's FlexAttention kernel needs d_k, d_v >= 16.
    `rows`: a query that sees no key gets zeros. `prefix` (B,), with causal: row b's first prefix[b] keys are
    seen by every query too (a prefix LM, ops.prefix_mask), in the block mask. `sinks`: a logit
    per head in every softmax that holds no value, FlexAttention's output scaled by the log-sum-exp
    correction exp(lse) / (exp(lse) + exp(sink)) = sigmoid(lse - sink)."""
    offset = k.shape[2] - q.shape[2]
    if q.device.type == "meta" or not torch.compiler.is_compiling() or min(q.shape[-1], v.shape[-1]) < 16 or \
            q.device.type == "cpu" and torch.is_grad_enabled() and any(
                t is not None and t.requires_grad for t in (q, k, v, bias, sinks)):
        # (meta: the build report's counts; heads under 16 wide: Inductor's FlexAttention kernel takes none)
        s = torch.mul(torch.matmul(q, torch.transpose(k, -2, -1)), scale)
        s = torch.tanh(s / cap) * cap if cap else s
        s = s if bias is None else torch.add(s, bias)
        if causal or window is not None:
            keys = torch.arange(k.shape[2], device=q.device)
            distance = keys.unsqueeze(0) - keys[offset:].unsqueeze(1)  # j - i
            hidden_keys = distance > 0 if causal else torch.zeros_like(distance, dtype=torch.bool)
            hidden_keys = hidden_keys | (distance.abs() > window) if window is not None else hidden_keys
            if causal and prefix is not None:  # (B, 1, Tq, Tk): the row's prefix is seen both ways
                hidden_keys = hidden_keys & (keys >= prefix.view(-1, 1, 1, 1))
            s = torch.masked_fill(s, hidden_keys, -math.inf)
        s = s if mask is None else torch.masked_fill(s, mask, -math.inf)
        if sinks is None:
            w = torch.softmax(s, -1)
        else:
            column = sinks.to(s.dtype).view(1, -1, 1, 1).expand(*s.shape[:-1], 1)
            w = torch.softmax(torch.cat((s, column), dim=-1), -1)[..., :-1]
        if rows and mask is not None:
            w = torch.masked_fill(w, mask.all(dim=-1, keepdim=True), 0.0)
        return torch.matmul(w, v)
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])  # bias and mask as views of the scores' shape
    full_bias = None if bias is None else bias.reshape((1,) * (4 - bias.dim()) + tuple(bias.shape)).expand(shape)
    hidden = None if mask is None else mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape)).expand(shape)

    def score_mod(score, b, h, i, j):
        if cap:
            score = torch.tanh(score / cap) * cap
        if full_bias is not None:
            score = score + full_bias[b, h, i, j]
        if hidden is not None:
            score = torch.where(hidden[b, h, i, j], -math.inf, score)
        return score

    def visible(b, h, i, j):
        seen = i + offset >= j if causal else torch.ones_like(i, dtype=torch.bool)
        if window is not None:
            seen = seen & (i + offset - j <= window) & (j - i - offset <= window)
        if causal and prefix is not None:
            seen = seen | (j < prefix[b])
        return seen

    rows_ = None if prefix is None else q.shape[0]  # a block mask per row where rows' prefixes differ
    blocks = create_block_mask(visible, rows_, None, q.shape[2], k.shape[2], device=q.device) \
        if causal or window is not None else None
    if sinks is None:
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=blocks, scale=scale)
    out, lse = flex_attention(q, k, v, score_mod=score_mod, block_mask=blocks, scale=scale, return_lse=True)
    return out * torch.sigmoid(lse - sinks.to(lse.dtype).view(1, -1, 1)).unsqueeze(-1).to(out.dtype)


def explicit_attend(q: Tensor, k: Tensor, v: Tensor, scale: float, cap: float = 0.0, bias: Tensor | None = None,
                    mask: Tensor | None = None, causal: bool = False, rows: bool = False,
                    sinks: Tensor | None = None, window: int | None = None) -> Tensor:
    """What flex_attend computes, from the lowering's own ops (the tests' reference)."""
    s = torch.mul(torch.matmul(q, torch.transpose(k, -2, -1)), scale)
    if cap:
        s = softcap(s, cap)
    if bias is not None:
        s = torch.add(s, bias)
    if window is not None:
        s = hide(s, band_mask(k.shape[2], window, causal, q.device)[k.shape[2] - q.shape[2]:])
    elif causal:
        s = hide(s, torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).triu(1 + k.shape[2]
                                                                                              - q.shape[2]))
    w = torch.softmax(hide(s, mask), -1) if sinks is None else sink_softmax(hide(s, mask), sinks)
    return torch.matmul(zero_rows(w, mask) if rows else w, v)


def route(logits: Tensor, top_k: int, renormalize: bool) -> tuple[Tensor, Tensor]:
    """A mixture of experts' router: (weights, chosen), each token's top_k experts by softmax(logits) (in at
    least float32) and their probabilities, renormalised to sum to one where `renormalize` (Mixtral)."""
    probs = torch.softmax(logits, dim=-1, dtype=torch.promote_types(logits.dtype, torch.float32))
    weights, chosen = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(logits.dtype), chosen


def mix_experts(experts: "torch.nn.ModuleList", x: Tensor, weights: Tensor, chosen: Tensor) -> Tensor:
    """(N, d) tokens -> sum over each token's chosen experts of weight * expert(token): every expert runs
    once, on the tokens routed to it (index_select), and adds its weighted outputs back (index_add)."""
    out = torch.zeros_like(x)
    for e, expert in enumerate(experts):
        token, slot = torch.where(chosen == e)  # the tokens that chose expert e, and in which of their top_k
        out = out.index_add(0, token, expert(x[token]) * weights[token, slot, None])
    return out
