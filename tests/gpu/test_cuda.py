"""GPU checks (marked `gpu`, skipped without CUDA): the fused graph against the unfused one in bf16
under each SDPA backend, CUDA kernels on fully masked rows, a bf16 training step, decoding."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.decode.beam import CachedStepper, beam_search
from attncomp.train.step import TrainStep, compiled
from tests.conftest import ROOT
from tests.helpers import batch, small

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "math": SDPBackend.MATH}


def _pair(spec):
    plain = compile_spec(spec, passes=(), device=CUDA).eval()
    fused = compile_spec(spec, device=CUDA).eval()
    fused.load_state_dict(plain.state_dict())
    return plain, fused


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_fused_matches_unfused_in_bf16_under_each_backend(backend):
    spec = small(ir.load(ROOT / "specs/base.attn"), factor=4)  # d_model 128, head size 16
    plain, fused = _pair(spec)
    src, tgt = batch(spec, b=8, s=32, t=32)
    src[:] = src[:1]  # no padding: the mask-free graph can use every backend
    with torch.autocast("cuda", dtype=torch.bfloat16), torch.no_grad():
        expected = plain.hidden(src.to(CUDA), tgt.to(CUDA))
        with sdpa_kernel(BACKENDS[backend]):
            got = fused.hidden_dense(src.to(CUDA), tgt.to(CUDA))
    assert _relative(got, expected) < 2e-2, backend


@pytest.mark.parametrize("backend", ["efficient", "math"])
def test_padding_masks_under_the_backends_that_take_them(backend):
    # d_k 8 != d_v 32: never flash; the memory-efficient kernel needs head sizes divisible by 8
    spec = small(ir.load(ROOT / "specs/table3/B1.attn"), factor=2)
    plain, fused = _pair(spec)
    src, tgt = batch(spec, b=8, s=32, t=32)
    src[3] = 0  # a sentence of nothing but padding: its attention rows see no key
    with torch.autocast("cuda", dtype=torch.bfloat16), torch.no_grad():
        expected = plain(src.to(CUDA), tgt.to(CUDA))
        with sdpa_kernel(BACKENDS[backend]):
            got = fused(src.to(CUDA), tgt.to(CUDA))
    assert torch.isfinite(got).all()
    assert _relative(got, expected) < 2e-2


def test_bf16_training_step_with_fused_adam():
    spec = small(ir.load(ROOT / "specs/base.attn"), factor=4, dropout=0.1)
    model = compile_spec(spec, device=CUDA).train()
    step = TrainStep(model, 0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    src, tgt = batch(spec, b=8, s=16, t=16)
    data = {"src": src.to(CUDA), "tgt_in": tgt.to(CUDA), "tgt_out": tgt.to(CUDA)}
    losses = []
    for _ in range(5):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step(data)[0] / data["tgt_out"].numel()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]


def test_the_compiled_step_gives_the_eager_gradients_on_the_gpu():
    # as the runner's --compile: inductor, dynamic shapes, bf16 autocast (PyTorch 2.11 once gave zeros here)
    spec = small(ir.load(ROOT / "specs/base.attn"), factor=4)
    model = compile_spec(spec, device=CUDA).eval()  # no dropout: both runs compute one function
    step = TrainStep(model, 0.1, max_tokens=8 * 16)
    src, tgt = batch(spec, b=8, s=16, t=16)
    data = {"src": src.to(CUDA), "tgt_in": tgt.to(CUDA), "tgt_out": tgt.to(CUDA)}
    results = []
    for run in (step, compiled(step)):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            losses = run(data)
        losses[0].backward()
        grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in model.parameters()]
        results.append((losses.detach(), torch.cat([g.flatten() for g in grads])))
        model.zero_grad(set_to_none=True)
    (expected, expected_grad), (got, got_grad) = results
    assert _relative(got, expected) < 1e-2
    assert _relative(got_grad, expected_grad) < 5e-2


def test_decoding_on_gpu_agrees_with_cpu():
    spec = small(ir.load(ROOT / "specs/base.attn"))
    cpu = compile_spec(spec).eval()
    gpu = compile_spec(spec, device=CUDA).eval()
    gpu.load_state_dict(cpu.state_dict())
    src, _ = batch(spec, b=4, s=9)
    a = beam_search(CachedStepper(cpu, src), 4, [8] * 4, beam=4, alpha=0.6)
    b = beam_search(CachedStepper(gpu, src.to(CUDA)), 4, [8] * 4, beam=4, alpha=0.6, device=CUDA)
    assert [h[0].tokens for h in a] == [h[0].tokens for h in b]


def test_throughput_benchmark_runs_on_the_gpu(tmp_path):
    from bench import throughput

    results = throughput.main(["--spec", "base", "--tiny", "--configs", "attncomp,nn.Transformer", "--steps", "2",
                               "--warmup", "1", "--sentences", "16", "--length", "16",
                               "--json", str(tmp_path / "t.json")])
    assert all(r.tokens_per_s > 0 and r.peak_memory_gb > 0 for r in results)


def test_fused_loss_under_bf16_autocast_matches_float64():
    from attncomp.train.loss import linear_cross_entropy, token_losses

    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(3000, 256, dtype=torch.float64, generator=g)
    weight = torch.randn(5000, 256, dtype=torch.float64, generator=g) / 16
    target = torch.randint(4, 5000, (3000,), generator=g)
    h64, w64 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    expected = token_losses(h64 @ w64.T, target, 0.1)
    expected[0].backward()
    h32, w32 = hidden.float().to(CUDA).requires_grad_(), weight.float().to(CUDA).requires_grad_()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got = linear_cross_entropy(h32, w32, target.to(CUDA), 0.1, chunk=1024)
    got[0].backward()
    assert _relative(got.cpu(), expected) < 1e-2
    assert _relative(h32.grad.cpu(), h64.grad) < 2e-2 and _relative(w32.grad.cpu(), w64.grad) < 2e-2
