"""Label-smoothed cross-entropy over the vocabulary, two ways.

`token_losses` is the plain one: logits (N, V) in float32, log_softmax, gather. For a 37,000-token
vocabulary and 25,000 target tokens those logits alone are 3.7 GB, kept for the backward pass.

`linear_cross_entropy` fuses the output projection with the loss and never holds more than one
chunk of logits: for each chunk of rows it computes the logits, the loss terms and at once the
gradient of the loss with respect to the logits (softmax - smoothed one-hot), which it turns into
the gradients of the hidden states and of the weight; backward only scales those. Same FLOPs (the
two backward matmuls move into the forward pass), memory O(chunk x V) instead of O(N x V).

Both return [smoothed loss, negative log-likelihood, target tokens], summed over real targets: a padded
target is attncomp.vocab.IGNORE, never a token id, so a vocabulary without <pad> loses no token.
The model's own transform of its logits (its protocol's `logit_scale` and `logit_softcap`: `logit_map`, with
the soft-cap of attncomp.logits, the one the graphs call) is part of the fused loss too, so training sees the
logits the model's forward computes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attncomp.logits import softcap as soft_cap
from attncomp.vocab import IGNORE


def _wide(dtype: torch.dtype) -> torch.dtype:
    """At least float32 for the softmax and the sums; float64 stays float64."""
    return torch.promote_types(dtype, torch.float32)


def logit_map(logits: torch.Tensor, scale: float = 1.0, softcap: float | None = None) -> torch.Tensor:
    """What the model does to its projected logits: times `scale`, then soft-capped (attncomp.logits)."""
    if scale != 1.0:
        logits = logits * scale
    return logits if softcap is None else soft_cap(logits, softcap)


def token_losses(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    logp = F.log_softmax(logits.to(_wide(logits.dtype)), dim=-1)
    real = target != IGNORE
    nll = -logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    loss = (1.0 - smoothing) * nll + smoothing * -logp.mean(dim=-1)  # the uniform part of the target
    zero = torch.zeros((), device=logits.device)
    return torch.stack([torch.where(real, loss, zero).sum(), torch.where(real, nll, zero).sum(),
                        real.sum().to(logp.dtype)])


def _matmul_dtype(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    """The dtype autocast gives a matmul here (bf16 on GPU under the runner's autocast), else `dtype`."""
    if device.type == "cuda" and torch.is_autocast_enabled("cuda"):
        return torch.get_autocast_dtype("cuda")
    return dtype


def _chunks(rows, chunk: int, pieces: int | None) -> list[tuple]:
    """(start, end) of each chunk of rows: of `chunk` rows, or `pieces` of them whatever `rows` is — the
    first pieces - 1 of rows // pieces rows, the last to the end (an end of None), so that with `rows`
    symbolic (torch.compile, dynamic shapes) no bound depends on its value."""
    if pieces is None:
        return [(start, start + chunk) for start in range(0, rows, chunk)]
    size = rows // pieces
    return [(i * size, (i + 1) * size if i < pieces - 1 else None) for i in range(pieces)]


class _LinearCrossEntropy(torch.autograd.Function):
    """Per chunk of rows, with logits l = h W^T, p = softmax(l) and eps the label smoothing:

        loss = (1 - eps) (lse - l_t) + eps (lse - mean(l)),  lse = l_max - log p_max (exact: p_max >= 1/V)
        d loss / d l = p - (1 - eps) onehot(t) - eps / V

    Only p is a (chunk x V) tensor in float32 (one softmax kernel), cast once to the matmul dtype. The
    one-hot and the uniform parts of the gradient are applied after the matmuls, exactly: -(1 - eps) W[t]
    and -(eps / V) sum(W) for the hidden states, -(1 - eps) h into the rows t and -(eps / V) sum(h) for
    the weight. Padding rows are zeroed in h (weight gradient) and in the hidden-state gradient.

    With a logit scale s or a soft cap c (logits s l, or c tanh(s l / c)), the gradient is no longer a
    one-hot and a uniform part after the matmuls: per chunk it is the whole (chunk x V) d loss / d l,
    times s (and 1 - tanh^2), through the two matmuls.

    The returned totals are summed out of place: PyTorch 2.11 under torch.compile routes the gradient
    of a returned tensor that forward changed in place to the wrong output (pytorch/pytorch#180642),
    which gave every parameter a zero gradient, and the compiled step trained nothing.
    """

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, smoothing: float,
                chunk: int, needs_grad: bool, pieces: int | None, scale: float = 1.0,
                softcap: float | None = None) -> torch.Tensor:
        wide = _wide(hidden.dtype)
        mm = _matmul_dtype(hidden.device, hidden.dtype)
        w = weight.to(mm)
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros(weight.shape, dtype=_wide(weight.dtype), device=weight.device)
        h_sum = torch.zeros(weight.shape[1], dtype=grad_weight.dtype, device=weight.device)
        totals = torch.zeros(3, dtype=wide, device=hidden.device)
        vocab = weight.shape[0]
        mapped = scale != 1.0 or softcap is not None
        for start, end in _chunks(hidden.shape[0], chunk, pieces):
            h, t = hidden[start:end], target[start:end]
            real = (t != IGNORE).unsqueeze(-1)
            t = t.clamp(min=0)  # a padded target's row gathers some id and is multiplied by 0
            logits = h.to(mm) @ w.T  # (n, V): one chunk at a time
            if mapped:
                logits = logit_map(logits.to(wide), scale, softcap)
            p = torch.softmax(logits, dim=-1, dtype=wide)
            top, top_index = logits.max(dim=-1, keepdim=True)
            lse = top.to(wide) - p.gather(-1, top_index).log()
            nll = lse - logits.gather(-1, t.unsqueeze(-1)).to(wide)
            loss = (1.0 - smoothing) * nll + smoothing * (lse - logits.mean(dim=-1, keepdim=True, dtype=wide))
            # out of place: the returned tensor (see the class docstring)
            totals = totals + torch.stack([(loss * real).sum(), (nll * real).sum(), real.sum().to(wide)])
            if not needs_grad:  # evaluation: no gradients to prepare
                continue
            if mapped:
                _mapped_gradients(p, logits, t, real, h, weight, smoothing, scale, softcap, mm,
                                  grad_hidden[start:end], grad_weight)
                continue
            g = p.to(mm)  # the softmax part of d loss / d logits
            h_real = h.to(grad_weight.dtype) * real
            w_t = weight.index_select(0, t).to(wide)
            gh = (g @ w).to(wide) - (1.0 - smoothing) * w_t - (smoothing / vocab) * weight.sum(0, dtype=wide)
            grad_hidden[start:end] = (gh * real).to(hidden.dtype)
            grad_weight += (g.T @ h_real.to(mm)).to(grad_weight.dtype)
            grad_weight.index_add_(0, t, h_real, alpha=-(1.0 - smoothing))
            h_sum += h_real.sum(0)
        if needs_grad:
            grad_weight -= (smoothing / vocab) * h_sum  # the uniform part, once for all chunks
        ctx.save_for_backward(grad_hidden, grad_weight.to(weight.dtype))
        return totals

    @staticmethod
    def backward(ctx, grad_totals: torch.Tensor):
        grad_hidden, grad_weight = ctx.saved_tensors
        scale = grad_totals[0]  # only the smoothed loss is trained; nll and counts are for reporting
        return (grad_hidden * scale.to(grad_hidden.dtype), grad_weight * scale.to(grad_weight.dtype),
                None, None, None, None, None, None, None)


def _mapped_gradients(p, logits, t, real, h, weight, smoothing, scale, softcap, mm, grad_hidden, grad_weight) -> None:
    """One chunk's gradients through a logit scale and soft cap (see _LinearCrossEntropy), in place."""
    g = p - smoothing / weight.shape[0]
    g.scatter_add_(-1, t.unsqueeze(-1), g.new_full((g.shape[0], 1), -(1.0 - smoothing)))
    if softcap is not None:
        g = g * (1.0 - (logits / softcap) ** 2)  # d (c tanh(x / c)) / dx = 1 - tanh^2 = 1 - (capped / c)^2
    g = (g * real * scale).to(mm)
    grad_hidden.copy_((g @ weight.to(mm)).to(grad_hidden.dtype))
    grad_weight += (g.T @ h.to(mm)).to(grad_weight.dtype)


def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, smoothing: float,
                         chunk: int = 8192, pieces: int | None = None, scale: float = 1.0,
                         softcap: float | None = None) -> torch.Tensor:
    """token_losses(logit_map(hidden @ weight.T, scale, softcap), target) without materialising the logits:
    hidden (N, d), target (N,).

    Rows go in chunks of `chunk`, or with `pieces` in that many equal chunks whatever N is: under
    torch.compile with dynamic shapes a loop over N // chunk would make N a guard, and every new batch
    shape a recompilation."""
    needs_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    return _LinearCrossEntropy.apply(hidden, weight, target, smoothing, chunk, needs_grad, pieces, scale, softcap)
