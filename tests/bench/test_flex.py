"""bench/flex.py compiles each composition with its soft cap as a constant (bench.flex.compiled: dynamic=False).
Under automatic dynamic shapes, compiling the same function again for another cap (50, then 0) made the cap a
symbolic float, and FlexAttention's backward then failed to trace the score_mod that reads it: the last composition
on the H200 (PyTorch 2.11, bench/results/h200-2026-11-26b/flex.log). Here it is checked on the CPU, through
FlexAttention's eager backward (Inductor has no CPU backward for it: backend aot_eager, the device guard lifted by
bench.variant_reference.cpu_backward), for every composition in bench/flex.py's order, in float64."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from attncomp.lower import ops
from bench import flex
from bench.variant_reference import AuxRequest, cpu_backward


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()  # automatic dynamic shapes remember what earlier tests compiled
    yield


def attend(q, k, v, scale, cap=0.0, bias=None, causal=False, sinks=None, window=None):
    """ops.flex_attend's FlexAttention branch at equal query and key lengths (ops.flex_attend itself takes the
    explicit form on the CPU wherever a gradient is wanted)."""
    def score_mod(score, b, h, i, j):
        if cap:
            score = torch.tanh(score / cap) * cap
        return score if bias is None else score + bias[h, i, j]

    def visible(b, h, i, j):
        seen = i >= j if causal else torch.ones_like(i, dtype=torch.bool)
        return seen if window is None else seen & (i - j <= window) & (j - i <= window)

    mask = create_block_mask(visible, None, None, q.shape[2], k.shape[2], device=q.device) \
        if causal or window is not None else None
    if sinks is None:
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=mask, scale=scale)
    out, aux = flex_attention(q, k, v, score_mod=score_mod, block_mask=mask, scale=scale,
                              return_aux=AuxRequest(lse=True))
    return out * torch.sigmoid(aux.lse - sinks.view(1, -1, 1)).unsqueeze(-1)


def test_every_composition_compiles_with_its_own_soft_cap_and_its_gradients_equal_the_explicit_forms():
    heads, length = 2, 32
    g = torch.Generator().manual_seed(0)
    base = [torch.randn(1, heads, length, 16, generator=g, dtype=torch.float64) for _ in range(3)]
    with cpu_backward():
        for name, spec in flex.COMPOSITIONS.items():  # one compiled function, caps 50, 0, 0, 0, 50: as bench/flex.py
            kwargs = {key: value.double() if isinstance(value, torch.Tensor) else value
                      for key, value in flex._arguments(spec, heads, length, torch.device("cpu")).items()}
            kwargs["window"] = 5 if "window" in kwargs else None  # shorter than the sequence, so that it acts
            outs, grads = [], []
            for fn in (flex.compiled(attend, backend="aot_eager"), ops.explicit_attend):
                q, k, v = (t.clone().requires_grad_() for t in base)
                out = fn(q, k, v, 0.25, **kwargs)
                outs.append(out)
                grads.append(torch.autograd.grad(out.square().sum(), (q, k, v)))
            assert (outs[0] - outs[1]).abs().max() < 1e-12 * outs[1].abs().max(), name
            # 1e-6: with sinks, the gradients of q and k through compiled FlexAttention's log-sum-exp are 1.7e-8
            # from the explicit form's (uncompiled: 7e-16); every other composition's are within 1e-14
            for got, expected in zip(*grads):
                assert (got - expected).abs().max() < 1e-6 * expected.abs().max(), name
