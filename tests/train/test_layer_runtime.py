"""Layers as units at run time: regional compilation (--compile compiles each layer body once, not
the whole step) and per-layer activation checkpointing (--checkpoint-layers)."""

from __future__ import annotations

import pytest
import torch

from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.lower import loops
from attncomp.train.step import TrainStep, compiled
from tests.conftest import ROOT
from tests.helpers import batch, small


def _batch(spec):
    src, tgt = batch(spec)
    return {"src": src, "tgt_in": tgt[:, :-1], "tgt_out": tgt[:, 1:]}


def _grads(step, data):
    step.model.zero_grad()
    loss = step(data)[0]
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in step.model.named_parameters()}


def test_checkpointed_layers_compute_the_same_loss_and_gradients(monkeypatch):
    spec = small(ir.load(ROOT / "specs/base.attn"))
    model = compile_spec(spec, dtype=torch.float64).train()
    step, data = TrainStep(model, 0.1), _batch(spec)
    plain = _grads(step, data)
    calls = []
    real = loops.checkpoint
    monkeypatch.setattr(loops, "checkpoint", lambda *a, **k: calls.append(1) or real(*a, **k))
    model.checkpoint_layers()
    again = _grads(step, data)
    assert len(calls) == spec.model.encoder.layers + spec.model.decoder.layers  # each layer, recomputed
    assert (plain[0] - again[0]).abs() < 1e-12
    assert all((plain[1][k] - again[1][k]).abs().max() < 1e-12 for k in plain[1])
    model.eval()
    calls.clear()
    model(data["src"], data["tgt_in"])
    assert not calls  # recomputation is for training only


@pytest.mark.slow
def test_regional_compilation_compiles_each_layer_kind_once_and_trains():
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    spec = small(ir.load(ROOT / "specs/base.attn"))
    model = compile_spec(spec).train()
    eager = compile_spec(spec).train()
    eager.load_state_dict(model.state_dict())
    step = compiled(TrainStep(model, 0.1), backend="aot_eager")
    data = _batch(spec)
    (loss, grads), (want, wanted) = _grads(step, data), _grads(TrainStep(eager, 0.1), data)
    assert (loss - want).abs() < 1e-4
    assert all((grads[k] - wanted[k]).abs().max() < 1e-4 for k in grads)
    assert all(g.abs().sum() > 0 for k, g in grads.items() if "weight" in k)  # every weight gets a gradient
    layers = sum(len(layers) for layers in model.layer_lists())
    graphs = int(counters["stats"]["unique_graphs"])
    assert 2 <= graphs < layers  # an encoder layer and a decoder layer body, not one graph per layer
    src, tgt = batch(spec)
    longer = {"src": torch.cat([src, src], 1), "tgt_in": torch.cat([tgt, tgt], 1)[:, :-1],
              "tgt_out": torch.cat([tgt, tgt], 1)[:, 1:]}
    _grads(step, longer)
    assert int(counters["stats"]["unique_graphs"]) == graphs  # dynamic shapes: a new length compiles nothing
