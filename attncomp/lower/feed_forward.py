"""The position-wise feed-forward unit (section 3.3): FFN(x) = W_2 act(W_1 x + b_1) + b_2, or gated.

    plain   fc2(dropout(act(fc1(x))))                  act: relu, gelu (erf), gelu_tanh, silu, relu2 (relu(x)^2)
    gated   fc2(dropout(act(gate(x)) * fc1(x)))        swiglu: silu, geglu: gelu, geglu_tanh: gelu_tanh
                                                       (Shazeer 2020)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attncomp.ir import nodes
from attncomp.lower.units import Builder, Unit, linear

# the activation each choice applies (gated ones: to the gate)
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_tanh", "silu": "silu", "relu2": "relu2",
               "swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh"}


def activate(b: Builder, activation: str, x, name: str):
    """act(x) for one of ACTIVATIONS' values."""
    if activation == "gelu_tanh":  # GPT-2's gelu_new, Gemma's gelu_pytorch_tanh
        return b.call(F.gelu, x, approximate="tanh", name=name)
    if activation == "relu2":  # ReLU squared (So et al. 2021, Primer)
        return b.call(torch.square, b.call(torch.relu, x, name=name), name=name)
    return b.call({"relu": torch.relu, "gelu": F.gelu, "silu": F.silu}[activation], x, name=name)


def feed_forward(ctx, stack: nodes.Stack) -> Unit:
    arch = ctx.arch
    unit = Unit("FeedForward", "The position-wise feed-forward network")
    d, d_ff, bias = stack.d_model, stack.d_ff, arch.bias
    b = Builder(unit, "forward")
    x = b.input("x", ("batch", "seq_len", d))
    act = ACTIVATIONS[stack.activation]
    if stack.gated:
        gate = activate(b, act, b.leaf("gate", linear(d, d_ff, bias.of("fc1")), x), name="gate")
        hidden = b.call(torch.mul, gate, b.leaf("fc1", linear(d, d_ff, bias.of("fc1")), x, name="up"), name="hidden")
    else:
        hidden = activate(b, act, b.leaf("fc1", linear(d, d_ff, bias.of("fc1")), x, name="hidden"), name="hidden")
    hidden = b.dropout(hidden, arch.dropout.activation)
    b.output(b.leaf("fc2", linear(d_ff, d, bias.of("fc2")), hidden, name="out"))
    unit.reorder(("fc1", "fc2", "gate"))
    return unit
