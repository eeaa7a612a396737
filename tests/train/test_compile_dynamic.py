"""--compile on the runner's batches: a new batch shape must not compile the step again, and the compiled
step's gradients are the eager step's.

On a GPU the first `attncomp train --compile` recompiled the whole step for every update (the fused
loss's chunk loop made the row count a guard) and trained nothing in five minutes. Dynamo's guards do
not depend on the backend, so the count of compiled graphs is checked here with a counting backend.
"""

from __future__ import annotations

import torch
from torch._dynamo.testing import CompileCounter

from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.train.loss import linear_cross_entropy, token_losses
from attncomp.train.step import TrainStep, compiled
from tests.conftest import ROOT

SHAPES = [(8, 10, 12), (6, 14, 9), (12, 7, 7), (5, 20, 18), (9, 11, 13)]  # sentences, source, target length


def _batch(vocab: int, b: int, s: int, t: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    return {"src": torch.randint(5, vocab, (b, s), generator=g), "tgt_in": torch.randint(5, vocab, (b, t), generator=g),
            "tgt_out": torch.randint(5, vocab, (b, t), generator=g)}


def test_new_batch_shapes_reuse_the_compiled_step():
    torch._dynamo.reset()
    spec = ir.load(ROOT / "specs/examples/tiny.attn")
    step = TrainStep(compile_spec(spec).train(), 0.1, chunk=64, max_tokens=max(b * t for b, _, t in SHAPES))
    counter = CompileCounter()
    run = compiled(step, backend=counter)
    g = torch.Generator().manual_seed(0)
    counts = []
    for i, shape in enumerate(SHAPES):
        run(_batch(spec.model.tgt_vocab, *shape, g), i % 2 == 0)[0].backward()
        counts.append(counter.frame_count)
    # regional: each layer kind (an encoder layer, a decoder layer) once with source padding masks and
    # once without (hidden_dense); none per shape
    assert counts[1] <= 4 and counts[-1] == counts[1]


def test_the_compiled_step_gives_the_eager_gradients():
    # PyTorch 2.11 under torch.compile (any backend) gave the fused loss's inputs all-zero gradients while
    # an in-place sum in its forward (pytorch/pytorch#180642): the compiled runner trained nothing
    torch._dynamo.reset()
    spec = ir.load(ROOT / "specs/examples/tiny.attn")
    model = compile_spec(spec, dtype=torch.float64).eval()  # no dropout: both runs compute one function
    step = TrainStep(model, 0.1, chunk=64, max_tokens=120)
    batch = _batch(spec.model.tgt_vocab, 8, 10, 12, torch.Generator().manual_seed(2))
    expected = step(batch)
    expected[0].backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    got = compiled(step, backend=CompileCounter())(batch)
    got[0].backward()
    assert torch.allclose(got, expected, rtol=1e-12)
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.allclose(p.grad, grads[name], rtol=1e-9, atol=1e-12), name


def test_the_fused_loss_never_changes_what_it_returns_in_place():
    # what PyTorch 2.11's torch.compile got wrong (above): checked here on whatever PyTorch CI runs
    g = torch.Generator().manual_seed(3)
    hidden = torch.randn(37, 8, dtype=torch.float64, generator=g, requires_grad=True)
    weight = torch.randn(11, 8, dtype=torch.float64, generator=g, requires_grad=True)
    target = torch.randint(0, 11, (37,), generator=g)
    for pieces in (None, 3):
        assert linear_cross_entropy(hidden, weight, target, 0.1, chunk=8, pieces=pieces)._version == 0


def test_a_fixed_number_of_chunks_gives_the_same_loss():
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(37, 8, dtype=torch.float64, generator=g, requires_grad=True)
    weight = torch.randn(11, 8, dtype=torch.float64, generator=g, requires_grad=True)
    target = torch.randint(0, 11, (37,), generator=g)
    expected = token_losses(hidden @ weight.T, target, 0.1)
    for pieces in (1, 3, 5, 40):  # 40 > rows: some chunks are empty
        got = linear_cross_entropy(hidden, weight, target, 0.1, pieces=pieces)
        assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12), pieces
    got[0].backward()
    h, w = hidden.detach().requires_grad_(), weight.detach().requires_grad_()
    token_losses(h @ w.T, target, 0.1)[0].backward()
    assert torch.allclose(hidden.grad, h.grad, atol=1e-12) and torch.allclose(weight.grad, w.grad, atol=1e-12)
