"""The position-wise feed-forward unit (section 3.3): FFN(x) = W_2 act(W_1 x + b_1) + b_2, or gated.

    plain   fc2(dropout(act(fc1(x))))                  act: relu, gelu (erf), gelu_tanh, silu, relu2 (relu(x)^2)
    gated   fc2(dropout(act(gate(x)) * fc1(x)))        swiglu: silu, geglu: gelu, geglu_tanh: gelu_tanh
                                                       (Shazeer 2020)

and with `ffn = moe(experts, top_k, ...)` a mixture of experts of those nets (Mixtral, Qwen2-MoE):

    weights, chosen = top_k of softmax(router(x))      (renormalised to sum to one: Mixtral)
    out = sum over chosen e of weights_e * expert_e(x)  (+ sigmoid(shared_gate(x)) * shared(x): Qwen2-MoE)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attncomp.ir import nodes
from attncomp.lower import ops
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


def feed_forward(ctx, stack: nodes.Stack, name: str = "FeedForward") -> Unit:
    if isinstance(stack.ffn, nodes.MoE):
        return mixture_of_experts(ctx, stack)
    arch = ctx.arch
    unit = Unit(name, "The position-wise feed-forward network" if name == "FeedForward" else
                "An expert: a position-wise feed-forward network")
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


def mixture_of_experts(ctx, stack: nodes.Stack) -> Unit:
    """A router (`router`, experts x d_model, no bias) sends each token to top_k experts (`experts.E`, each a
    feed-forward net of the stack's d_ff and activation) and sums their outputs, weighted; a shared expert
    (`shared`, `shared_gate`) reads every token. State-dict names map one to one to Mixtral's and Qwen2-MoE's."""
    moe, d = stack.ffn, stack.d_model
    dense = stack.model_copy(update={"ffn": nodes.DenseFFN()})
    unit = Unit("MixtureOfExperts", f"A mixture of {moe.experts} experts, top {moe.top_k} per token"
                + (", and a shared expert" if moe.shared else ""))
    expert = ctx.unit(feed_forward, dense, "Expert")
    b = Builder(unit, "forward")
    x = b.input("x", ("batch", "seq_len", d))
    tokens = b.call(torch.flatten, x, 0, 1, name="tokens", shape=("tokens", d))
    logits = b.leaf("router", linear(d, moe.experts, False), tokens, name="router_logits")
    routed = b.call(ops.route, logits, moe.top_k, moe.renormalize, name="routed")
    weights = b.item(routed, 0, "weights", shape=("tokens", moe.top_k))
    chosen = b.item(routed, 1, "chosen", shape=("tokens", moe.top_k))
    experts = b.layers("experts", [expert] * moe.experts)
    out = b.call(ops.mix_experts, experts, tokens, weights, chosen, name="out", shape=("tokens", d))
    if moe.shared:
        shared = ctx.unit(feed_forward, dense.model_copy(update={"d_ff": moe.shared}), "SharedExpert")
        common = b.sub("shared", shared, "forward", tokens, name="shared", shape=("tokens", d))
        if moe.shared_gate:
            gate = b.call(torch.sigmoid, b.leaf("shared_gate", linear(d, 1, False), tokens, name="gate"), name="gate")
            common = b.call(torch.mul, gate, common, name="shared", shape=("tokens", d))
        out = b.call(torch.add, out, common, name="out", shape=("tokens", d))
    b.output(b.method("view_as", out, x, name="out", shape=("batch", "seq_len", d)))
    unit.reorder(("router", "experts", "shared", "shared_gate"))
    return unit
