"""FlexAttention on CUDA (marked `gpu`, skipped without CUDA): the fused attention's gradients, through
FlexAttention's backward, equal the explicit graph's; the CPU has no FlexAttention backward, so this is
where it is checked (docs/compiler.md, *Which kernel each composition gets*). FlexAttention runs under
torch.compile (uncompiled, ops.flex_attend is the explicit form), so the fused model is compiled."""

from __future__ import annotations

import pytest
import torch

from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.lower import ops
from tests.helpers import batch, real_positions, run_forward
from tests.lower.test_attention_parts import BASE, VARIANTS, _randomised

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
CUDA = torch.device("cuda")


def wide_spec_of(name: str):
    """The test model with heads 16 wide: Inductor's FlexAttention kernel takes none narrower (d_k 4 takes
    the explicit form, which would test nothing here)."""
    return ir.load_flat(BASE.replace("d_model = 16", "d_model = 64").format(model=VARIANTS[name]), f"{name}.attn")


@pytest.mark.parametrize("name", ["softcap_lm", "buckets_softcap", "sinks_local_lm"])
def test_flex_gradients_equal_the_explicit_graphs(name):
    spec = wide_spec_of(name)
    plain = _randomised(compile_spec(spec, passes=(), device=CUDA, dtype=torch.float32))
    fused = compile_spec(spec, device=CUDA, dtype=torch.float32)
    fused.load_state_dict(plain.state_dict())
    src, tgt = (t.to(CUDA) for t in batch(spec))
    keep = real_positions(spec, src, tgt)
    outs = []
    for model in (plain, torch.compile(fused)):
        out = run_forward(model, spec, src, tgt)
        out[keep].sum().backward()
        outs.append(out)
    assert (outs[0] - outs[1])[keep].abs().max() < 1e-4
    grads = dict(plain.named_parameters())
    for n, p in fused.named_parameters():
        assert torch.allclose(p.grad, grads[n].grad, atol=1e-4, rtol=1e-3), n


def test_flex_attend_backward_runs_flex_on_cuda():
    q, k, v = (torch.randn(2, 4, 64, 16, device=CUDA, requires_grad=True) for _ in range(3))
    assert ops.flex_runs(q, k, v)
    bias = torch.randn(4, 64, 64, device=CUDA)
    flex = torch.compile(ops.flex_attend)
    for kwargs in ({"causal": True}, {"bias": bias}):
        got = flex(q, k, v, 0.25, 5.0, **kwargs)
        expected = ops.explicit_attend(q, k, v, 0.25, 5.0, **kwargs)
        g_got = torch.autograd.grad(got.sum(), (q, k, v))
        g_exp = torch.autograd.grad(expected.sum(), (q, k, v))
        assert (got - expected).abs().max() < 1e-4
        assert all(torch.allclose(a, b, atol=1e-4, rtol=1e-3) for a, b in zip(g_got, g_exp))


def test_flex_attend_reads_a_prefix_lm_block_mask_on_cuda():
    """A prefix LM's attention where FlexAttention takes it (mask = prefix with a soft cap): a block mask per row
    from the rows' prefix lengths; forward and gradients equal the explicit form under ops.prefix_mask."""
    q, k, v = (torch.randn(3, 4, 64, 16, device=CUDA, requires_grad=True) for _ in range(3))
    prefix = torch.tensor([0, 17, 64], device=CUDA)
    got = torch.compile(ops.flex_attend)(q, k, v, 0.25, 5.0, causal=True, prefix=prefix)
    expected = ops.explicit_attend(q, k, v, 0.25, 5.0, mask=ops.prefix_mask(64, prefix, CUDA))
    g_got = torch.autograd.grad(got.sum(), (q, k, v))
    g_exp = torch.autograd.grad(expected.sum(), (q, k, v))
    assert (got - expected).abs().max() < 1e-4
    assert all(torch.allclose(a, b, atol=1e-4, rtol=1e-3) for a, b in zip(g_got, g_exp))
