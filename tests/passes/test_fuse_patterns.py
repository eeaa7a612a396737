"""fuse_attention on attention written by hand in many spellings (symbolically traced), after
canonicalize; and the cases that must not fuse."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import fx, nn

from attncomp.lower import ops
from attncomp.passes import count_fused, run_passes

B, H, T, D = 2, 3, 5, 8


class Attention(nn.Module):
    """One attention core; `variant` picks the spelling."""

    def __init__(self, variant: str):
        super().__init__()
        self.variant = variant
        self.drop = nn.Dropout(0.0)

    def forward(self, q, k, v, mask):  # mask: True = attend, (B, 1, 1, T)
        s = self.variant
        if s == "nanogpt":  # the scale multiplies, the mask is masked_fill on == 0, softmax function
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            att = att.masked_fill(mask == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            return self.drop(att) @ v
        if s == "divide":  # divide by sqrt(d), softmax method, transpose(-1, -2)
            att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D)
            return att.masked_fill(~mask, -1e9).softmax(dim=-1) @ v
        if s == "scale_q":  # the scale applied to q
            q = q * D**-0.5
            return torch.softmax(torch.matmul(q, k.transpose(-2, -1)), -1) @ v
        if s == "upcast":  # softmax in float32, cast back
            att = (q @ k.transpose(-2, -1)) * D**-0.5
            return F.softmax(att.float(), dim=-1).type_as(att) @ v
        if s == "additive_mask":  # a float mask added to the scores
            bias = torch.zeros_like(mask, dtype=q.dtype).masked_fill(~mask, float("-inf"))
            return torch.softmax((q @ k.transpose(-2, -1)) * D**-0.5 + bias, dim=-1) @ v
        if s == "bmm":  # 3-D batched matmul
            q3, k3, v3 = (x.flatten(0, 1) for x in (q, k, v))
            att = torch.bmm(q3, k3.transpose(1, 2)) * D**-0.5
            return torch.bmm(torch.softmax(att, dim=-1), v3).unflatten(0, (B, H))
        if s == "dropout_function":
            att = torch.softmax((q @ k.transpose(-2, -1)) * D**-0.5, dim=-1)
            return F.dropout(att, 0.0, self.training) @ v
        raise ValueError(s)


class Negative(nn.Module):
    def __init__(self, variant: str):
        super().__init__()
        self.variant = variant
        self.scale = nn.Parameter(torch.tensor(D**-0.5))

    def forward(self, q, k, v, mask):
        att = (q @ k.transpose(-2, -1)) * D**-0.5
        if self.variant == "weights_returned":
            w = att.softmax(-1)
            return w @ v, w
        if self.variant == "softmax_other_dim":
            return att.softmax(-2) @ v
        if self.variant == "tensor_scale":
            return ((q @ k.transpose(-2, -1)) * self.scale).softmax(-1) @ v
        if self.variant == "scores_reused":
            return att.softmax(-1) @ v + att.sum()
        raise ValueError(self.variant)


def _inputs():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, dtype=torch.float64, generator=g) for _ in range(3))
    mask = torch.ones(B, 1, 1, T, dtype=torch.bool)
    mask[1, ..., 3:] = False
    return q, k, v, mask


def _optimise(module: nn.Module):
    gm = fx.symbolic_trace(module)
    out, _ = run_passes(gm, ["canonicalize", "fuse_attention", "eliminate_dead_code"])
    return out


@pytest.mark.parametrize("variant", ["nanogpt", "divide", "scale_q", "upcast", "additive_mask", "bmm",
                                     "dropout_function"])
def test_spellings_fuse_and_agree(variant):
    module = Attention(variant).eval()
    fused = _optimise(module)
    assert count_fused(fused.graph) == 1, fused.code
    assert not any(n.target in (torch.softmax, F.softmax, "softmax") for n in fused.graph.nodes)
    args = _inputs()
    expected = module(*args)
    tolerance = 1e-6 if variant == "upcast" else 1e-12  # the reference rounds its softmax through float32
    assert (fused(*args) - expected).abs().max() < tolerance


@pytest.mark.parametrize("variant", ["weights_returned", "softmax_other_dim", "tensor_scale", "scores_reused"])
def test_guarded_cases_stay_explicit(variant):
    module = Negative(variant)
    fused = _optimise(module)
    assert count_fused(fused.graph) == 0, fused.code
    args = _inputs()
    expected, got = module(*args), fused(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for e, g in zip(expected, got):
        assert (e - g).abs().max() < 1e-12


def _causal_graph(length_q: int):
    graph = fx.Graph()
    q, k, v = (graph.placeholder(n) for n in "qkv")
    mask = graph.call_function(ops.causal_mask, (T, torch.device("cpu")))
    s = graph.call_function(torch.mul, (graph.call_function(torch.matmul, (q, graph.call_function(
        torch.transpose, (k, -2, -1)))), D**-0.5))
    s = graph.call_function(torch.masked_fill, (s, mask, -math.inf))
    graph.output(graph.call_function(torch.matmul, (graph.call_function(torch.softmax, (s, -1)), v)))
    return fx.GraphModule(nn.Module(), graph)


def test_causal_mask_becomes_is_causal():
    gm = _causal_graph(T)
    expected = gm(*_inputs()[:3])
    fused, _ = run_passes(gm, ["canonicalize", "fuse_attention", "eliminate_dead_code"])
    (node,) = [n for n in fused.graph.nodes if n.target is F.scaled_dot_product_attention]
    assert node.kwargs["is_causal"] is True and "attn_mask" not in node.kwargs
    assert not any(n.target is ops.causal_mask for n in fused.graph.nodes)
    assert (fused(*_inputs()[:3]) - expected).abs().max() < 1e-12


def test_dropout_only_in_training():
    graph = fx.Graph()
    q, k, v = (graph.placeholder(n) for n in "qkv")
    s = graph.call_function(torch.matmul, (q, graph.call_function(torch.transpose, (k, -2, -1))))
    w = graph.call_function(torch.softmax, (s, -1))
    training = graph.get_attr("training")
    w = graph.call_function(F.dropout, (w,), {"p": 0.5, "training": training})
    graph.output(graph.call_function(torch.matmul, (w, v)))
    fused, _ = run_passes(fx.GraphModule(nn.Module(), graph), ["canonicalize", "fuse_attention"])
    q, k, v, _ = _inputs()
    fused.eval()
    expected = torch.softmax(q @ k.transpose(-2, -1), -1) @ v
    assert (fused(q, k, v) - expected).abs().max() < 1e-12  # no dropout in eval
    fused.train()
    torch.manual_seed(0)
    assert (fused(q, k, v) - expected).abs().max() > 1e-3  # dropout in training


def test_fully_masked_rows_are_zero_in_both_paths():
    from attncomp import ir
    from tests.conftest import ROOT
    from tests.helpers import pair, small

    spec = small(ir.load(ROOT / "specs/base.attn"))
    plain, fused = pair(spec)
    src = torch.zeros(2, 6, dtype=torch.long)
    src[0] = torch.arange(5, 11)  # row 1 is nothing but padding
    for model in (plain, fused):
        memory = model.encode(src)
        assert torch.isfinite(memory).all()
    assert (plain.encode(src) - fused.encode(src)).abs().max() < 1e-9


def _biased_graph(shared_users: int, bias_reused: bool = False):
    """`shared_users` attentions over one ALiBi bias and one padding mask: add(s, bias), masked_fill(s, mask, -inf)."""
    graph = fx.Graph()
    q, k, v, pad = (graph.placeholder(n) for n in ("q", "k", "v", "pad"))
    bias = graph.call_function(ops.alibi_bias, (H, T, T, torch.device("cpu"), torch.float64))
    outs = []
    for _ in range(shared_users):
        s = graph.call_function(torch.mul, (graph.call_function(torch.matmul, (q, graph.call_function(
            torch.transpose, (k, -2, -1)))), D**-0.5))
        s = graph.call_function(torch.add, (s, bias))
        if bias_reused:  # the biased scores have another user: no fusion
            outs.append(graph.call_function(torch.sum, (s,)))
        s = graph.call_function(torch.masked_fill, (s, pad, -math.inf))
        outs.append(graph.call_function(torch.matmul, (graph.call_function(torch.softmax, (s, -1)), v)))
    graph.output(tuple(outs))
    return fx.GraphModule(nn.Module(), graph)


def test_a_bias_and_a_bool_mask_become_one_float_mask():
    q, k, v, attend = _inputs()
    gm = _biased_graph(2)
    expected = gm(q, k, v, ~attend)
    fused, _ = run_passes(gm, ["canonicalize", "fuse_attention", "eliminate_dead_code"])
    sdpa = [n for n in fused.graph.nodes if n.target is F.scaled_dot_product_attention]
    combined = [n for n in fused.graph.nodes if n.target is ops.additive_mask]
    assert len(sdpa) == 2 and len(combined) == 1  # made once for the pair, shared by both
    assert all(n.kwargs["attn_mask"] is combined[0] and "is_causal" not in n.kwargs for n in sdpa)
    assert all((a - b).abs().max() < 1e-12 for a, b in zip(fused(q, k, v, ~attend), expected))


def test_biased_scores_with_another_user_stay_explicit():
    fused, _ = run_passes(_biased_graph(1, bias_reused=True), ["canonicalize", "fuse_attention"])
    assert count_fused(fused.graph) == 0


def _recorded(gm) -> list[dict]:
    return [n.meta["attention"] for n in gm.graph.nodes if "attention" in n.meta]


def test_the_chosen_kernel_and_its_reason_are_recorded_on_the_kernels_node():
    fused = _optimise(Attention("nanogpt").eval())
    (sdpa,) = [n for n in fused.graph.nodes if n.target is F.scaled_dot_product_attention]
    assert sdpa.meta["attention"]["kernel"] == "sdpa" and "SDPA's arguments" in sdpa.meta["attention"]["reason"]
    assert _recorded(fused) == [sdpa.meta["attention"]]


@pytest.mark.parametrize("variant, reason", [("weights_returned", "weights are read by another op"),
                                             ("tensor_scale", "no scaled q . k^T"),
                                             ("scores_reused", "scores are read by another op")])
def test_an_attention_left_explicit_records_why(variant, reason):
    (record,) = _recorded(_optimise(Negative(variant)))
    assert record["kernel"] == "explicit" and reason in record["reason"]


def test_soft_capped_scores_choose_flex_and_with_dropout_stay_explicit():
    from attncomp.passes.fuse_attention import Parts, choose_kernel

    graph = fx.Graph()
    weights = graph.call_function(torch.softmax, (graph.placeholder("s"), -1))
    assert choose_kernel(Parts(weights))[0] == "sdpa"
    assert choose_kernel(Parts(weights, cap=30.0))[0] == "flex"
    assert choose_kernel(Parts(weights, sinks=weights))[0] == "flex"
    kernel, reason = choose_kernel(Parts(weights, cap=30.0, dropout=(0.1, True)))
    assert kernel == "explicit" and "no dropout" in reason
