"""Risk (b): eager FlexAttention (no torch.compile around it) with a float soft cap in its score_mod, called again
with another shape, dtype or cap, forward and backward, on the CPU (device guard lifted for the backward).
usage: python flex_eager_caps.py [reset] [aux]   (reset: torch._dynamo.reset() before each call)
"""
import re
import sys

import torch
import torch.nn.attention.flex_attention as flex

flex._validate_device = lambda *a: None  # bench.variant_reference.cpu_backward
RESET = "reset" in sys.argv
AUX = "aux" in sys.argv  # return_aux=AuxRequest(lse=True) as bench/variant_reference.py


def attend(q, k, v, cap, window):
    def softcap(score, b, h, i, j):
        return torch.tanh(score / cap) * cap

    def visible(b, h, i, j):
        return (i >= j) & (i - j <= window)

    mask = flex.create_block_mask(visible, None, None, q.shape[2], k.shape[2], device=q.device)
    if AUX:
        o, aux = flex.flex_attention(q, k, v, score_mod=softcap, block_mask=mask, return_aux=flex.AuxRequest(lse=True))
        return o * aux.lse.exp().unsqueeze(-1)
    return flex.flex_attention(q, k, v, score_mod=softcap, block_mask=mask)


def explicit(q, k, v, cap, window):
    s = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    s = torch.tanh(s / cap) * cap
    i = torch.arange(q.shape[2]).unsqueeze(1)
    j = torch.arange(k.shape[2]).unsqueeze(0)
    s = s.masked_fill(~((i >= j) & (i - j <= window)), float("-inf"))
    if AUX:
        return torch.softmax(s, -1) @ v * torch.logsumexp(s, -1).exp().unsqueeze(-1)
    return torch.softmax(s, -1) @ v


CALLS = [  # (label, batch, length, dtype, cap)
    ("first", 2, 32, torch.float32, 50.0),
    ("same again", 2, 32, torch.float32, 50.0),
    ("another length", 2, 48, torch.float32, 50.0),
    ("another batch", 3, 48, torch.float32, 50.0),
    ("another cap", 3, 48, torch.float32, 2.0),
    ("float64", 3, 48, torch.float64, 2.0),
    ("bfloat16", 3, 48, torch.bfloat16, 2.0),
]


def main():
    print("torch", torch.__version__, "reset" if RESET else "no reset", "aux" if AUX else "")
    for grad in (False, True):
        torch._dynamo.reset()
        for label, b, t, dtype, cap in CALLS:
            if RESET:
                torch._dynamo.reset()
            g = torch.Generator().manual_seed(0)
            q, k, v = (torch.randn(b, 4, t, 16, generator=g).to(dtype).requires_grad_(grad) for _ in range(3))
            try:
                out = attend(q, k, v, cap, 5)
                err = float((out.double() - explicit(*(x.double() for x in (q, k, v)), cap, 5)).abs().max())
                if grad:
                    gq = torch.autograd.grad(out.sum(), (q, k, v))
                    qd, kd, vd = (x.detach().double().requires_grad_() for x in (q, k, v))
                    ge = torch.autograd.grad(explicit(qd, kd, vd, cap, 5).sum(), (qd, kd, vd))
                    err = max(err, *(float((a.double() - e).abs().max()) for a, e in zip(gq, ge)))
                print(f"  {'backward' if grad else 'forward '} {label:15s} ok, difference from explicit {err:.1e}",
                      flush=True)
            except Exception as e:  # noqa: BLE001
                why = re.search(r"Pending unbacked symbols \{[^}]*\}", str(e))
                print(f"  {'backward' if grad else 'forward '} {label:15s} FAILED {type(e).__name__}: "
                      f"{str(e).splitlines()[0][:150]} | {why.group(0) if why else ''}", flush=True)


main()
