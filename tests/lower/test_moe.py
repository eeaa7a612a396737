"""`ffn = moe(...)`: the MixtureOfExperts unit against the explicit mixture, every expert on every token
weighted by its routing weight (zero where not chosen), in float64; a layer kind mixes dense and sparse
layers; decode steps equal the full forward; the canonical text of a spec without experts is unchanged."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attncomp
from attncomp import ir
from attncomp.passes import DEFAULT_PASSES
from tests.conftest import ROOT
from tests.helpers import assert_decode_steps

SPEC = """model m {{
  d_model = 32  heads = 4  d_ff = 24  vocab = shared(64)  positions = rope  norm = pre  normalization = rmsnorm
  dropout {{ residual = 0.0 }}
  decoder {{ layers = 3  activation = {activation}  ffn = {ffn}
            layer dense {{ start = 1  count = 1  ffn = dense  d_ff = 40 }} }}
}}
"""
CASES = {"mixtral": ("swiglu", "moe(experts = 4, top_k = 2)"),
         "qwen2_moe": ("swiglu", "moe(experts = 5, top_k = 3, renormalize = false, shared = 16)"),
         "ungated_shared": ("gelu", "moe(experts = 3, top_k = 1, shared = 8, shared_gate = false)"),
         "one_expert": ("relu", "moe(experts = 1, top_k = 1)")}


def _model(case: str, passes=DEFAULT_PASSES):
    activation, ffn = CASES[case]
    spec = ir.load_flat(SPEC.format(activation=activation, ffn=ffn), "<test>")
    torch.manual_seed(0)
    model = attncomp.compile(spec, passes=passes, dtype=torch.float64).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def _explicit(moe, spec_ffn, x: torch.Tensor) -> torch.Tensor:
    """sum_e w_e(x) expert_e(x) with w_e the routing weight, 0 for experts not among the top_k."""
    probs = F.softmax(moe.router(x), dim=-1)
    top, chosen = probs.topk(spec_ffn.top_k, dim=-1)
    if spec_ffn.renormalize:
        top = top / top.sum(-1, keepdim=True)
    weights = torch.zeros_like(probs).scatter(-1, chosen, top)
    out = sum(weights[..., e, None] * expert(x) for e, expert in enumerate(moe.experts))
    if spec_ffn.shared:
        shared = moe.shared(x)
        out = out + (torch.sigmoid(moe.shared_gate(x)) * shared if spec_ffn.shared_gate else shared)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_mixture_equals_the_explicit_sum_over_experts(case):
    model = _model(case)
    spec_ffn = model.spec.model.decoder.ffn
    x = torch.randn(2, 7, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for i in (0, 2):  # the sparse layers; layer 1 is the dense kind
        moe = model.decoder.layers[i].ffn
        with torch.no_grad():
            assert (moe(x) - _explicit(moe, spec_ffn, x)).abs().max() < 1e-12
    assert type(model.decoder.layers[1].ffn).__name__ != type(model.decoder.layers[0].ffn).__name__
    assert model.decoder.layers[1].ffn.fc1.out_features == 40


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_unfused_and_cached_steps_agree(case):
    model, unfused = _model(case), _model(case, passes=())
    tokens = torch.randint(5, 64, (2, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = unfused(tokens)
        assert (model(tokens) - expected).abs().max() < 1e-12
        assert_decode_steps(model, model.init_cache(tokens), tokens, expected, 1e-12)


def test_experts_train_their_router_and_experts():
    model = _model("qwen2_moe").train()
    tokens = torch.randint(5, 64, (2, 8), generator=torch.Generator().manual_seed(3))
    model(tokens).logsumexp(-1).mean().backward()
    moe = model.decoder.layers[0].ffn
    for p in (moe.router.weight, moe.shared_gate.weight, moe.shared.fc1.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0
    assert sum(e.fc2.weight.grad is not None and e.fc2.weight.grad.abs().sum() > 0 for e in moe.experts) >= 3


def test_a_dense_spec_keeps_its_canonical_text():
    text = ir.to_text(ir.load(ROOT / "specs/examples/llama.attn"))
    assert "ffn = dense" not in text and "moe(" not in text  # bias { ffn = false } is the biases
    assert "ffn = moe(experts = 4, top_k = 2" in ir.to_text(ir.load(ROOT / "specs/examples/mixtral.attn"))
