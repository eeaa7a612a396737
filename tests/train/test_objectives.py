"""The two objectives beyond translation: masked LM (encoder-only) and causal LM on monolingual text
(decoder-only): corruption rates, loss positions, the fused loss with an output bias, and a few real
updates of each through the runner on the sample corpus."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from attncomp import checkpoint as ckpt
from attncomp import ir
from attncomp.cli.main import run
from attncomp.compiler import compile_spec, model_factory
from attncomp.data import masking
from attncomp.data.batching import mlm_batch, mono_batch
from attncomp.data.dataset import PreparedData
from attncomp.train.config import RunConfig
from attncomp.train.runner import Trainer
from attncomp.train.step import TrainStep
from attncomp.vocab import BOS, DEFAULT, EOS, IGNORE, PAD, SEP, SPECIAL_TOKENS
from tests.conftest import ROOT

TINY = ["model.d_model=16", "model.heads=2", "model.d_ff=32", "model.layers=1", "model.vocab=shared(256)"]
BERT = ir.load(ROOT / "specs/examples/bert.attn", TINY + ["model.positions=learned(max_len = 128)"])
LM = ir.load(ROOT / "specs/examples/lm.attn", TINY + ["model.positions=learned(max_len = 128)"])


def test_masking_rates_on_a_big_batch():
    g = np.random.default_rng(0)
    tokens = g.integers(SPECIAL_TOKENS, 1000, size=(400, 250))
    tokens[:, -1], tokens[:, 0] = EOS, BOS  # specials are never chosen
    inputs, target = masking.corrupt(7, 0.15, 0.8, 0.1, 1000, np.arange(400), tokens)
    picked = target != IGNORE
    assert not picked[:, [0, -1]].any()
    real = tokens.shape[0] * (tokens.shape[1] - 2)
    assert abs(picked.sum() / real - 0.15) < 0.005  # 99,200 draws: the standard error is 0.0011
    assert (target[picked] == tokens[picked]).all()
    masked = (inputs == DEFAULT.mask) & picked
    kept = (inputs == tokens) & picked
    replaced = picked & ~masked & ~kept
    n = picked.sum()
    assert abs(masked.sum() / n - 0.8) < 0.01 and abs(replaced.sum() / n - 0.1) < 0.01  # 14,900 chosen
    assert abs(kept.sum() / n - 0.1) < 0.012  # a random draw may hit the token itself (1 in 995)
    assert (inputs[replaced] >= SPECIAL_TOKENS).all() and (inputs[replaced] < 1000).all()
    assert (inputs[~picked] == tokens[~picked]).all()


def test_masking_depends_on_the_sentence_not_the_batch(sample_data):
    split = PreparedData(sample_data).split("train")
    batch = functools.partial(mlm_batch, seed=3, rate=0.15, mask=0.8, random=0.1, vocab=256)
    together = batch(split, np.array([5, 9, 40]))
    alone = batch(split, np.array([9]))
    width = alone["src"].shape[1]
    assert torch.equal(together["src"][1, :width], alone["src"][0])
    assert torch.equal(together["tgt_out"][1, :width], alone["tgt_out"][0])
    counts = masking.chosen_counts(3, 0.15, split.src)
    assert counts[[5, 9, 40]].tolist() == (together["tgt_out"] != IGNORE).sum(1).tolist()


def test_pairs_of_a_model_with_segments_read_source_then_target(sample_data):
    """segments >= 2: `source </s> target </s>` with segment ids 0 then 1, masked as one sentence; the
    batcher's loss-token counts are the chosen positions of the pair."""
    from attncomp.data.batching import pair_mlm_batch

    split = PreparedData(sample_data).split("train")
    indices = np.array([5, 9, 40])
    got = pair_mlm_batch(split, indices, seed=3, rate=0.15, mask=0.0, random=0.0, vocab=256)  # chosen: kept
    for row, i in enumerate(indices):
        s, t = split.src.lengths[i], split.tgt.lengths[i]
        pair = np.concatenate([split.src.tokens[split.src.offsets[i]:][:s],
                               split.tgt.tokens[split.tgt.offsets[i]:][:t]])
        assert got["src"][row, : s + t].tolist() == pair.tolist() and (got["src"][row, s + t:] == PAD).all()
        assert got["segments"][row].tolist() == [0] * s + [1] * t + [0] * (got["src"].shape[1] - s - t)
    counts = masking.chosen_counts(3, 0.15, split.src) + masking.chosen_counts(3, 0.15, split.tgt,
                                                                                 after=split.src.lengths)
    assert counts[indices].tolist() == (got["tgt_out"] != IGNORE).sum(1).tolist()


def test_mlm_loss_reads_the_chosen_positions_only_and_trains_the_output_bias():
    spec = BERT.model_copy(update={"model": BERT.model.model_copy(update={"dropout": BERT.model.dropout.model_copy(
        update={"residual": 0.0, "embedding": 0.0, "attention": 0.0})})})
    model = compile_spec(spec, dtype=torch.float64)
    with torch.no_grad():
        model.output_bias.normal_(generator=torch.Generator().manual_seed(0))
    src = torch.randint(5, 256, (3, 11), generator=torch.Generator().manual_seed(1))
    target = torch.full_like(src, IGNORE)
    target[0, 2], target[1, 5], target[2, 9] = 17, 30, 200
    batch = {"src": src, "tgt_out": target}
    losses = {}
    for fused in (True, False):
        model.zero_grad()
        loss = TrainStep(model, 0.1, fused_loss=fused)(batch)
        loss[0].backward()
        losses[fused] = (loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters()})
    assert losses[True][0][2].item() == 3  # three target tokens: the chosen positions
    logits = model(src)
    expected = torch.nn.functional.cross_entropy(logits[target != IGNORE], target[target != IGNORE], reduction="sum")
    assert abs(losses[True][0][1].item() - expected.item()) < 1e-9
    assert (losses[True][0] - losses[False][0]).abs().max() < 1e-9
    for key, grad in losses[True][1].items():
        assert (grad - losses[False][1][key]).abs().max() < 1e-9, key
    assert losses[True][1]["output_bias"].abs().max() > 0


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    """The sample corpus, small: parallel, and its target side as monolingual text."""
    out = tmp_path_factory.mktemp("objectives")
    for name, extra in (("parallel", []), ("mono", ["--lang", "tgt"])):
        assert run(["data", "sample", "--out", str(out / name), "--pairs", "400", "--held-out", "30", *extra]) == 0
    return out


def _train(spec, data, out, steps=4):
    """(validation metrics before, after) `steps` updates of the runner, in this process."""
    spec = ir.load_flat(ir.to_text(spec), "<test>", [f"train.steps={steps}", "train.batch=tokens(400)",
                                                      "train.schedule=constant(lr = 3e-3)",
                                                      f"train.checkpoint.every={steps}",
                                                      "train.checkpoint.average_last=1"])
    cfg = RunConfig(factory=functools.partial(model_factory, spec), spec_text=ir.to_text(spec),
                    spec_hash=ir.spec_hash(spec), data=str(data), out=str(out), log_every=steps)
    trainer = Trainer(cfg, 0, 1, 0)
    first = trainer.evaluate()
    trainer.run()
    return first, ckpt.load(out / f"checkpoint_{steps:08d}.pt").header.metrics


def test_encoder_only_trains_as_a_masked_lm_on_the_sample_corpus(small_data, tmp_path):
    before, after = _train(BERT, small_data / "parallel", tmp_path / "bert")
    assert after["loss"] < before["loss"] and np.isfinite(after["ppl"])


def test_decoder_only_trains_on_monolingual_text(small_data, tmp_path):
    data = PreparedData(small_data / "mono")
    assert data.monolingual
    batch = mono_batch(data.split("train"), np.array([0, 1]))
    assert (batch["tokens"][:, 0] == BOS).all() and (batch["tgt_out"] == SEP).sum() == 0
    first = data.split("train").tgt[0]
    assert batch["tgt_out"][0, : len(first)].tolist() == first.tolist() and first[-1] == EOS
    before, after = _train(LM, small_data / "mono", tmp_path / "lm")
    assert after["loss"] < before["loss"]
