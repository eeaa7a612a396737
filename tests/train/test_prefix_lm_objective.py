"""A prefix LM (`decoder { mask = prefix }`) on parallel text: its batches hold `<s> source <sep> target` with the
prefix `<s> source` per row, its loss predicts `target </s>` only (T5's prefix LM: no loss over the prefix), it
trains (the validation loss falls), and decoding encodes the prompt's prefix in one step."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from attncomp import checkpoint as ckpt
from attncomp import ir
from attncomp.cli.main import run
from attncomp.compiler import compile_spec, model_factory
from attncomp.data.batching import lm_batch, prefix_lm_batch
from attncomp.data.dataset import PreparedData
from attncomp.data.objective import objective_of
from attncomp.decode.beam import CachedStepper, FullStepper, beam_search, prompt_tokens
from attncomp.errors import DataError
from attncomp.train.config import RunConfig
from attncomp.train.runner import Trainer
from attncomp.train.step import TrainStep
from attncomp.vocab import BOS, IGNORE, SEP
from tests.conftest import ROOT

TINY = ["model.d_model=16", "model.heads=2", "model.d_ff=32", "model.layers=2", "model.vocab=shared(256)",
        "model.positions=learned(max_len = 128)", "model.decoder.mask=prefix"]
PREFIX_LM = ir.load(ROOT / "specs/examples/lm.attn", TINY)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The sample corpus, small: parallel, and its target side as monolingual text."""
    out = tmp_path_factory.mktemp("prefix_lm")
    for name, extra in (("parallel", []), ("mono", ["--lang", "tgt"])):
        assert run(["data", "sample", "--out", str(out / name), "--pairs", "400", "--held-out", "30", *extra]) == 0
    return out


def test_the_prefix_is_the_source_and_the_loss_reads_the_target_only(data):
    split = PreparedData(data / "parallel").split("train")
    indices = np.array([3, 0, 7])
    plain, batch = lm_batch(split, indices), prefix_lm_batch(split, indices)
    assert torch.equal(batch["tokens"], plain["tokens"])  # the same sequence, `<s> source <sep> target`
    for row, i in enumerate(indices):
        source, target = split.src[i], split.tgt[i]
        p = int(batch["prefix"][row])
        assert p == len(source)  # <s> and the source's tokens, its </s> left out
        assert batch["tokens"][row, :p].tolist() == [BOS, *source[:-1].tolist()]
        assert batch["tokens"][row, p] == SEP  # the first causal position
        out = batch["tgt_out"][row]
        assert (out[:p] == IGNORE).all()  # the source's tokens and <sep>: predicted from inside the prefix
        assert out[p : p + len(target)].tolist() == target.tolist()  # target </s>, as lm_batch's
        assert int((out != IGNORE).sum()) == len(target)
    objective = objective_of(PREFIX_LM.model, monolingual=False)
    assert objective.name == "prefix_lm"
    loss_tokens = objective.loss(split, 0, 0.0, PREFIX_LM.model.specials)
    assert (loss_tokens == split.tgt.lengths).all()  # an update's caps and its loss count the target


def test_monolingual_data_is_refused_in_one_line():
    with pytest.raises(DataError, match=r"mask = prefix \} reads a pair's source as the prefix") as err:
        objective_of(PREFIX_LM.model, monolingual=True)
    assert "\n" not in str(err.value)


def test_the_loss_is_the_cross_entropy_of_the_target_under_the_prefix_mask(data):
    """TrainStep (the fused loss) over the batch equals -sum log p(target token) of the model's forward with the
    rows' prefix lengths, written here; the causal model's differs (two layers: in one, a target position reads the
    prefix's keys and values, which the mask does not change)."""
    torch.manual_seed(0)
    model = compile_spec(PREFIX_LM, dtype=torch.float64).eval()
    assert model.loss_inputs == ("tokens", "prefix")
    batch = prefix_lm_batch(PreparedData(data / "parallel").split("train"), np.array([1, 2, 5]))
    got = TrainStep(model, smoothing=0.0)(batch)
    logits = model(batch["tokens"], batch["prefix"])
    kept = batch["tgt_out"] != IGNORE
    want = torch.nn.functional.cross_entropy(logits[kept], batch["tgt_out"][kept], reduction="sum")
    assert abs(got[1].item() - want.item()) < 1e-9 and got[2].item() == kept.sum().item()
    causal = torch.nn.functional.cross_entropy(model(batch["tokens"])[kept], batch["tgt_out"][kept], reduction="sum")
    assert abs(causal.item() - want.item()) > 1e-6


def test_a_prefix_lm_trains_on_pairs(data, tmp_path):
    steps = 4
    spec = ir.load_flat(ir.to_text(PREFIX_LM), "<test>", [f"train.steps={steps}", "train.batch=tokens(400)",
                                                           "train.schedule=constant(lr = 3e-3)",
                                                           f"train.checkpoint.every={steps}",
                                                           "train.checkpoint.average_last=1"])
    cfg = RunConfig(factory=functools.partial(model_factory, spec), spec_text=ir.to_text(spec),
                    spec_hash=ir.spec_hash(spec), data=str(data / "parallel"), out=str(tmp_path), log_every=steps)
    trainer = Trainer(cfg, 0, 1, 0)
    before = trainer.evaluate()
    trainer.run()
    after = ckpt.load(tmp_path / f"checkpoint_{steps:08d}.pt").header.metrics
    assert after["loss"] < before["loss"] - 0.05 and np.isfinite(after["ppl"])


def test_decoding_encodes_the_prefix_in_one_step_and_equals_the_full_forward():
    """CachedStepper: init_cache(`<s> source`) fills the cache with the prefix in one call (no decode_step runs
    before the search's first), then <sep> and the target token by token; beam search over it equals beam search
    over the full forward pass with the prompt's prefix (FullStepper)."""
    torch.manual_seed(0)
    model = compile_spec(PREFIX_LM, dtype=torch.float64).eval()
    src = torch.tensor([[9, 30, 41, 3], [17, 8, 200, 3]])  # two sources of one length, each ending in </s>
    stepper = CachedStepper(model, src)
    calls = []
    original = model.decode_step
    model.decode_step = lambda *args: calls.append(1) or original(*args)
    try:
        with torch.no_grad():
            stepper.start(torch.arange(2))
            assert not calls and int(stepper.cache.position[0]) == prompt_tokens(src).shape[1] - 1
            cached = beam_search(CachedStepper(model, src), 2, [8, 8], 3, 0.6)
            full = beam_search(FullStepper(model, src), 2, [8, 8], 3, 0.6)
    finally:
        del model.decode_step
    assert [[h.tokens for h in hyps] for hyps in cached] == [[h.tokens for h in hyps] for hyps in full]
    assert [h.score for hyps in cached for h in hyps] == pytest.approx([h.score for hyps in full for h in hyps],
                                                                      abs=1e-9)
