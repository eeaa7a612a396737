"""Mixtures of experts (`ffn = moe(...)`) against transformers: tiny random Mixtral, Qwen2-MoE and Qwen3-MoE
models saved with save_pretrained in float64 import with logits equal to transformers' within 1e-12 (full
forward, fused and unfused, and cached decoding step by step); import then export gives every tensor back
bit for bit; what the language cannot say is refused in one line; and the router's load-balancing loss
(attncomp.lower.experts) equals transformers' load_balancing_loss_func on the same router logits."""

from __future__ import annotations

import pytest
import torch

from attncomp.ir import nodes
from attncomp.lower.experts import load_balancing_loss
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-12
FAMILIES = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe")
VARIANTS = (("mixtral", dict(sliding_window=4)),  # local(window = 3) attention
            ("mixtral", dict(num_experts_per_tok=1)),  # top 1: the renormalised weight is 1
            ("qwen2_moe", dict(norm_topk_prob=True, num_experts_per_tok=3)),
            ("qwen3_moe", dict(norm_topk_prob=False)))

pytestmark = pytest.mark.usefixtures("one_thread")


def _tokens(b: int = 2, t: int = 9, seed: int = 1) -> torch.Tensor:
    return torch.randint(3, hf_models.VOCAB, (b, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family,changes", [(f, {}) for f in FAMILIES] + list(VARIANTS), ids=str)
def test_logits_and_cached_steps_equal_transformers(family, changes, tmp_path, monkeypatch):
    hf, imported, ours = hf_models.imported(family, tmp_path, monkeypatch, **changes)
    moe = imported.spec.model.decoder.ffn
    config = hf.config
    assert isinstance(moe, nodes.MoE) and moe.top_k == config.num_experts_per_tok
    assert moe.aux_loss == config.router_aux_loss_coef
    assert moe.renormalize == getattr(config, "norm_topk_prob", True)
    assert moe.shared == getattr(config, "shared_expert_intermediate_size", 0)
    tokens = _tokens()
    with torch.no_grad():
        expected = hf(tokens).logits
    hf_models.assert_same_logits(ours, expected, tokens, atol=TOLERANCE, unfused=True)


def test_state_dict_names_are_transformers_own(tmp_path, monkeypatch):
    """One attncomp tensor per saved tensor: the router, each expert's gate, fc1, fc2, the shared expert and
    its gate (Qwen2-MoE)."""
    _, imported, _ = hf_models.imported("qwen2_moe", tmp_path, monkeypatch)
    layer = {k.removeprefix("decoder.layers.0.ffn.") for k in imported.weights if k.startswith("decoder.layers.0.ffn.")}
    assert layer == {"router.weight", "shared_gate.weight", *(f"shared.{p}.weight" for p in ("gate", "fc1", "fc2")),
                     *(f"experts.{e}.{p}.weight" for e in range(4) for p in ("gate", "fc1", "fc2"))}


@pytest.mark.parametrize("family", FAMILIES)
def test_import_then_export_gives_every_tensor_back(family, tmp_path):
    hf_models.assert_export_gives_every_tensor_back(hf_models.model(family), tmp_path)


REFUSED = (("qwen2_moe", dict(decoder_sparse_step=2), "decoder_sparse_step = 2"),
           ("qwen2_moe", dict(mlp_only_layers=[0]), "mlp_only_layers = [0]"),
           ("qwen3_moe", dict(mlp_only_layers=[1]), "mlp_only_layers = [1]"),
           ("mixtral", dict(router_jitter_noise=0.1), "router_jitter_noise = 0.1"),
           ("olmoe", dict(clip_qkv=0.5), "clip_qkv = 0.5"))


@pytest.mark.parametrize("family,changes,named", REFUSED, ids=str)
def test_what_the_language_cannot_say_is_refused_in_one_line(family, changes, named, tmp_path, capsys):
    from attncomp.cli.main import run

    source = hf_models.save(hf_models.model(family, **changes), tmp_path / "source")
    capsys.readouterr()
    assert run(["import", str(source), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and named in err and "no spec equivalent" in err


def _router_logits(layers: int = 3, tokens: int = 14, experts: int = 5) -> tuple:
    g = torch.Generator().manual_seed(3)
    return tuple(torch.randn(tokens, experts, generator=g, dtype=torch.float64) * 2 for _ in range(layers))


@pytest.mark.parametrize("top_k", [1, 2, 4])
def test_load_balancing_loss_equals_transformers(top_k):
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

    logits = _router_logits()
    expected = load_balancing_loss_func(logits, 5, top_k)
    assert torch.allclose(load_balancing_loss(logits, 5, top_k).float(), expected, rtol=1e-6, atol=0)
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[0, 5:] = False
    mask[1, 6:] = False  # padding: left out of both shares
    expected = load_balancing_loss_func(logits, 5, top_k, attention_mask=mask.long())
    assert torch.allclose(load_balancing_loss(logits, 5, top_k, mask).float(), expected, rtol=1e-6, atol=0)


def _aux_of(step, batch: dict) -> float:
    """What TrainStep adds to the smoothed loss for the routers, per target token, over the coefficient."""
    with torch.no_grad():
        with_aux = step(batch)
        plain = step._losses(batch, False)
        step.model.aux_loss(None)  # forget what the plain pass recorded
    assert torch.equal(with_aux[1:], plain[1:])  # the NLL and the token count are the cross-entropy's alone
    return float((with_aux[0] - plain[0]) / (0.02 * plain[2]))


def test_load_balancing_loss_of_a_model_equals_transformers(tmp_path, monkeypatch):
    """The routers' logits an imported Mixtral records in training (attncomp.lower.experts.Routers) give
    transformers' aux_loss, padding left out as its attention_mask does, and TrainStep adds
    router_aux_loss_coef (0.02) times it per target token to the smoothed loss."""
    from attncomp.train.step import TrainStep
    from attncomp.vocab import IGNORE

    hf, _, ours = hf_models.imported("mixtral", tmp_path, monkeypatch)
    step = TrainStep(ours, smoothing=0.0, fused_loss=False)
    tokens, target = _tokens(), _tokens(seed=2)
    padded = target.clone()
    padded[1, 6:] = IGNORE
    with torch.no_grad():
        full = hf(tokens, output_router_logits=True).aux_loss
        masked = hf(tokens, attention_mask=(padded != IGNORE).long(), output_router_logits=True).aux_loss
    assert abs(_aux_of(step, {"tokens": tokens, "tgt_out": target}) - float(full)) < 1e-6
    assert abs(_aux_of(step, {"tokens": tokens, "tgt_out": padded}) - float(masked)) < 1e-6
    assert float(full) != pytest.approx(float(masked))
