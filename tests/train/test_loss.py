"""The fused projection + cross-entropy equals the plain loss: values and gradients, float64."""

from __future__ import annotations

import pytest
import torch

from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.train.loss import linear_cross_entropy, token_losses
from attncomp.train.step import TrainStep
from attncomp.vocab import IGNORE
from tests.conftest import ROOT
from tests.helpers import batch, small


@pytest.mark.parametrize("smoothing, chunk", [(0.0, 7), (0.1, 5), (0.2, 1000)])
def test_fused_loss_matches_the_plain_loss(smoothing, chunk):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(23, 16, dtype=torch.float64, generator=g, requires_grad=True)
    weight = torch.randn(40, 16, dtype=torch.float64, generator=g, requires_grad=True)
    target = torch.randint(0, 40, (23,), generator=g)
    target[[0, 1]] = 0  # id 0 is a token like any other (a vocabulary without <pad>: GPT-2's "!")
    target[[3, 9, 10]] = IGNORE  # padding
    fused = linear_cross_entropy(hidden, weight, target, smoothing, chunk)
    plain = token_losses(hidden @ weight.T, target, smoothing)
    assert torch.allclose(fused, plain, atol=1e-10)
    assert fused[2].item() == plain[2].item() == 20  # every target but the 3 padded ones
    (g_h, g_w) = torch.autograd.grad(fused[0] * 0.37, (hidden, weight))
    (e_h, e_w) = torch.autograd.grad(plain[0] * 0.37, (hidden, weight))
    assert (g_h - e_h).abs().max() < 1e-10 and (g_w - e_w).abs().max() < 1e-10


@pytest.mark.parametrize("scale, softcap", [(0.3, None), (1.0, 2.0), (0.3, 2.0), (2.5, 30.0)])
@pytest.mark.parametrize("smoothing, chunk", [(0.0, 7), (0.1, 5)])
def test_fused_loss_with_a_logit_scale_and_soft_cap_matches_the_explicit_form(scale, softcap, smoothing, chunk):
    """The model's logit_scale and logit_softcap in the fused loss: token_losses(cap * tanh(scale * h W^T / cap))."""
    from attncomp.train.loss import logit_map

    g = torch.Generator().manual_seed(2)
    hidden = torch.randn(23, 16, dtype=torch.float64, generator=g, requires_grad=True)
    weight = torch.randn(40, 16, dtype=torch.float64, generator=g, requires_grad=True)
    target = torch.randint(5, 40, (23,), generator=g)
    target[[3, 9, 10]] = IGNORE
    fused = linear_cross_entropy(hidden, weight, target, smoothing, chunk, scale=scale, softcap=softcap)
    logits = hidden @ weight.T * scale
    explicit = token_losses(logits if softcap is None else softcap * torch.tanh(logits / softcap), target, smoothing)
    assert torch.allclose(fused, explicit, atol=1e-10)
    assert torch.allclose(token_losses(logit_map(hidden @ weight.T, scale, softcap), target, smoothing), explicit,
                          atol=1e-12)  # the plain loss's map is the same
    (g_h, g_w) = torch.autograd.grad(fused[0] * 0.37, (hidden, weight))
    (e_h, e_w) = torch.autograd.grad(explicit[0] * 0.37, (hidden, weight))
    assert (g_h - e_h).abs().max() < 1e-10 and (g_w - e_w).abs().max() < 1e-10


def test_fused_loss_is_exact_for_far_apart_logits_in_float32():
    """Logits hundreds apart underflow most softmax entries; the loss must stay finite and right."""
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(12, 8, dtype=torch.float64, generator=g) * 30
    weight = torch.randn(50, 8, dtype=torch.float64, generator=g)
    target = torch.randint(5, 50, (12,), generator=g)
    expected = token_losses(hidden @ weight.T, target, 0.1)
    got = linear_cross_entropy(hidden.float(), weight.float(), target, 0.1, chunk=5)
    assert torch.isfinite(got).all()
    assert torch.allclose(got.double(), expected, rtol=1e-5)


def test_train_step_fused_and_plain_agree_on_a_tied_model():
    spec = small(ir.load(ROOT / "specs/base.attn"))
    model = compile_spec(spec, dtype=torch.float64)
    src, tgt = batch(spec)
    data = {"src": src, "tgt_in": tgt, "tgt_out": tgt}
    grads = []
    for fused in (True, False):
        model.zero_grad()
        losses = TrainStep(model, 0.1, fused_loss=fused, chunk=4)(data)
        losses[0].backward()
        grads.append({k: p.grad.clone() for k, p in model.named_parameters()})
    assert all((grads[0][k] - grads[1][k]).abs().max() < 1e-9 for k in grads[0])  # embed.weight is tied


@pytest.mark.parametrize("path", ["specs/base.attn", "specs/examples/local.attn"])
def test_dense_graph_equals_the_padded_one_without_padding(path):
    import torch.nn.functional as F

    spec = small(ir.load(ROOT / path))
    model = compile_spec(spec, dtype=torch.float64).eval()
    src, tgt = batch(spec)
    src[:] = src[:1]  # no padding anywhere
    assert (model.hidden(src, tgt) - model.hidden_dense(src, tgt)).abs().max() < 1e-12
    from torch.overrides import TorchFunctionMode

    masks = []

    class Record(TorchFunctionMode):  # the masks SDPA receives when hidden_dense runs
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is F.scaled_dot_product_attention:
                masks.append((kwargs or {}).get("attn_mask"))
            return func(*args, **(kwargs or {}))

    with Record():
        model.hidden_dense(src, tgt)
    m = spec.model
    assert len(masks) == m.encoder.layers + 2 * m.decoder.layers
    local_encoder = m.encoder.attention.kind == "local"
    assert sum(mask is not None for mask in masks) == (m.encoder.layers if local_encoder else 0)  # only the band
