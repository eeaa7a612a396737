"""train.validation { }: BLEU at each evaluation, checkpoint_best.pt, early stopping (kept on resume);
and `attncomp train --init CHECKPOINT`."""

from __future__ import annotations

import functools

import pytest
import torch

from attncomp import checkpoint as ckpt
from attncomp import ir
from attncomp.cli.main import run
from attncomp.compiler import model_factory
from attncomp.data.dataset import PreparedData
from attncomp.errors import TrainingError
from attncomp.ir import nodes
from attncomp.train.runner import RunConfig, Trainer
from attncomp.train.validation import Validator
from attncomp.train.warm_start import check_initial, load_initial, shape_differences
from tests.conftest import ROOT

TINY = str(ROOT / "specs/examples/tiny.attn")
SHORT = ["model.d_model=32", "model.heads=2", "model.d_ff=64", "model.layers=1", "train.steps=12",  # fast
         "train.checkpoint.every=1", "train.batch=tokens(300)", "decode.beam=1", "decode.max_len=4"]
FROZEN = "train.schedule=constant(lr = 1e-30)"  # updates below float32's resolution: ppl never improves


def validator(best: str, patience: int) -> Validator:
    return Validator(nodes.Validation(bleu=1, best=best, patience=patience), model=None, data=None, rank=0)


def test_judge_keeps_the_best_and_counts_evaluations_without_it():
    v = validator("ppl", 2)
    assert v.judge(2, {"ppl": 9.0})["best_step"] == 2 and v.improved
    assert v.judge(4, {"ppl": 9.0}) == {"best": 9.0, "best_step": 2, "stale": 1} and not v.improved  # equal: no
    assert v.judge(6, {"ppl": 8.0})["stale"] == 0 and not v.exhausted
    v.judge(8, {"ppl": 8.5})
    v.judge(10, {"ppl": float("nan")})
    assert v.exhausted and v.best_step == 6
    b = validator("bleu", 1)
    b.judge(2, {"bleu": 3.0})
    assert b.judge(4, {"bleu": 4.0})["best"] == 4.0 and b.judge(6, {"bleu": 1.0})["stale"] == 1 and b.exhausted
    resumed = validator("ppl", 2)
    resumed.restore({"loss": 2.0, "ppl": 8.5, "best": 8.0, "best_step": 6, "stale": 1})
    assert (resumed.best, resumed.best_step, resumed.stale) == (8.0, 6, 1) and not resumed.exhausted


def trainer(data, out, *overrides, init=None, resume=False) -> Trainer:
    """The runner in this process (no launcher, no worker processes: fast), configured as `attncomp train` does."""
    spec = ir.load(TINY, [*SHORT, *overrides])
    out.mkdir(parents=True, exist_ok=True)
    cfg = RunConfig(factory=functools.partial(model_factory, spec), spec_text=ir.to_text(spec),
                    spec_hash=ir.spec_hash(spec), data=str(data), out=str(out), resume=resume, init=init)
    return Trainer(cfg, rank=0, world=1, local_rank=0)


def test_early_stopping_keeps_the_best_and_resume_keeps_the_count(sample_data, tmp_path, capfd):
    out = tmp_path / "run"
    validation = [FROZEN, "train.validation.bleu=2", "train.validation.best=ppl"]
    trainer(sample_data, out, *validation, "train.validation.patience=1").run()
    log = capfd.readouterr().err
    assert "| bleu " in log and "saved checkpoint_00000001.pt and checkpoint_best.pt" in log, log
    assert "early stopping at step 2: ppl has not improved for 1 evaluation(s) (patience 1)" in log, log
    assert [s for s, _ in ckpt.listed(out)] == [1, 2] and (out / ckpt.AVERAGE).exists()
    best, last = ckpt.load(out / ckpt.BEST), ckpt.load(out / "checkpoint_00000002.pt")
    assert best.header.step == 1 and best.header.metrics["best_step"] == 1 and "bleu" in best.header.metrics
    assert last.header.metrics["stale"] == 1 and last.header.metrics["ppl"] == best.header.metrics["ppl"]
    first = ckpt.load(out / "checkpoint_00000001.pt").model
    assert all(torch.equal(best.model[k], first[k]) for k in first)

    trainer(sample_data, out, *validation, "train.validation.patience=1", resume=True).run()
    assert "nothing to train: early stopping at step 2" in capfd.readouterr().err
    # a larger patience continues from the stored count (1): one more evaluation, not two
    trainer(sample_data, out, *validation, "train.validation.patience=2", resume=True).run()
    assert "early stopping at step 3: ppl has not improved for 2 evaluation(s)" in capfd.readouterr().err
    assert [s for s, _ in ckpt.listed(out)] == [1, 2, 3] and ckpt.load(out / ckpt.BEST).header.step == 1


def test_init_starts_a_new_run_from_the_weights(sample_data, tmp_path, capfd):
    trainer(sample_data, tmp_path / "source", "train.steps=1").run()
    path = tmp_path / "source" / "checkpoint_00000001.pt"
    trained = ckpt.load(path)
    fresh = trainer(sample_data, tmp_path / "init", "train.seed=7", init=str(path))
    assert fresh.state.step == 0 and not fresh.optimizer.state
    assert all(torch.equal(fresh.model.state_dict()[k], trained.model[k]) for k in trained.model)
    assert fresh.evaluate()["loss"] == pytest.approx(trained.header.metrics["loss"], rel=1e-6)
    wider = [arg for key in SHORT for arg in ("--set", key)] + ["--set", "model.d_ff=128"]
    wide = tmp_path / "wide"
    assert run(["train", TINY, "--data", str(sample_data), "--out", str(wide), *wider, "--init", str(path)]) == 1
    err = capfd.readouterr().err
    assert "does not fit the model of tiny: shapes differ (checkpoint vs model): " in err, err
    assert "[64, 32] vs [128, 32]" in err and not (tmp_path / "wide" / "run.json").exists()

    export = tmp_path / "export"
    assert run(["export", str(path), "--format", "safetensors", "--out", str(export)]) == 0
    spec = ir.load(TINY, SHORT)
    check_initial(spec, PreparedData(sample_data), str(export))
    model = model_factory(spec)
    load_initial(model, str(export))
    assert all(torch.equal(model.state_dict()[k], trained.model[k]) for k in trained.model)

    class Other:
        path = "other-data"

        def tokenizer(self, side):
            return type("T", (), {"model_bytes": b"another model"})()

    with pytest.raises(TrainingError, match=r"other sentencepiece models than other-data \(src and tgt differ\)"):
        check_initial(spec, Other(), str(export))


def test_shape_differences_name_what_differs():
    have = {"a": (2, 3), "b": (4,), "old": (1,)}
    need = {"a": (2, 3), "b": (5,), "new": (1,)}
    assert shape_differences(have, need) == ["the model has new, the checkpoint does not",
                                             "the checkpoint has old, the model does not",
                                             "shapes differ (checkpoint vs model): b [4] vs [5]"]
