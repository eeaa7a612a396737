"""The position-wise feed-forward unit (section 3.3): FFN(x) = W_2 act(W_1 x + b_1) + b_2, or gated.

    plain   fc2(dropout(act(fc1(x))))                  act: relu, gelu (erf) or silu
    gated   fc2(dropout(act(gate(x)) * fc1(x)))        swiglu: silu, geglu: gelu (Shazeer 2020)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attncomp.ir import nodes
from attncomp.lower.units import Builder, Unit, linear

ACTIVATIONS = {"relu": torch.relu, "gelu": F.gelu, "silu": F.silu, "swiglu": F.silu, "geglu": F.gelu}


def feed_forward(ctx, stack: nodes.Stack) -> Unit:
    arch = ctx.arch
    unit = Unit("FeedForward", "The position-wise feed-forward network")
    d, d_ff, bias = stack.d_model, stack.d_ff, arch.bias
    b = Builder(unit, "forward")
    x = b.input("x", ("batch", "seq_len", d))
    act = ACTIVATIONS[stack.activation]
    if stack.gated:
        gate = b.call(act, b.leaf("gate", linear(d, d_ff, bias.of("fc1")), x), name="gate")
        hidden = b.call(torch.mul, gate, b.leaf("fc1", linear(d, d_ff, bias.of("fc1")), x, name="up"), name="hidden")
    else:
        hidden = b.call(act, b.leaf("fc1", linear(d, d_ff, bias.of("fc1")), x, name="hidden"), name="hidden")
    hidden = b.dropout(hidden, arch.dropout.activation)
    b.output(b.leaf("fc2", linear(d_ff, d, bias.of("fc2")), hidden, name="out"))
    unit.reorder(("fc1", "fc2", "gate"))
    return unit
