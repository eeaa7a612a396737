"""Well-formed but hostile state files (issue 23, items 4 and 6): JSON nested past the parser, of the
wrong shape, with NaN where a number is due, in import's config files, run.json and a checkpoint's
metrics; a spec that cannot do what its validation asks. Each is one error line, before any work;
each test failed on the behaviour before the fix."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from attncomp import checkpoint as ckpt
from attncomp.errors import SpecError, UsageError
from attncomp.train.cluster import read_run_record
from bench.hostile_corpus import copy_run
from tests.conftest import ROOT
from tests.train.test_checkpoint import train_checkpoint

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("metrics", [{"best": 1.0, "best_step": float("nan"), "stale": 0},
                                     {"best": 1.0, "best_step": 4, "stale": -1},
                                     {"best": float("inf"), "best_step": 4, "stale": 0},
                                     {"best": 1.0, "best_step": 1e300, "stale": 0},
                                     {"best": 1.0}])
def test_a_checkpoints_judgement_of_the_wrong_shape_is_refused(tmp_path, metrics):
    payload = train_checkpoint().payload()
    payload["metrics"] = metrics
    torch.save(payload, tmp_path / "c.pt")
    with pytest.raises(ckpt.CheckpointError, match="field 'metrics'"):
        ckpt.load(tmp_path / "c.pt")


RUN_RECORDS = {"nested": DEEP, "a list": "[]", "extended a string": '{"extended": "x"}',
               "step NaN": '{"extended": [{"from": "c", "step": NaN, "changes": []}]}',
               "step a string": '{"extended": [{"from": "c", "step": "4", "changes": []}]}'}


@pytest.mark.parametrize("case", sorted(RUN_RECORDS))
def test_a_hostile_run_record_is_refused_before_training(case, tmp_path, sandbox, tiny_artifacts):
    run = copy_run(tiny_artifacts, tmp_path / "run")
    (run / "run.json").write_text(RUN_RECORDS[case])
    argv = ["train", str(tiny_artifacts["spec"]), "--data", str(tiny_artifacts["data"]), "--out", str(run),
            "--resume", "--procs", "1"]
    outcome = sandbox.run(argv, timeout=120)
    assert outcome.code == 2 and "is not a run record" in outcome.stderr, outcome.summary()
    assert "move it away (rename or delete it) and run again" in outcome.stderr, outcome.summary()  # what to do
    assert not outcome.problems(bad_value=True), outcome.summary()
    assert (run / "run.json").read_text() == RUN_RECORDS[case]  # kept for a person to look at
    (run / "run.json").rename(run / "run.json.damaged")  # doing what the line says: nothing else reads it
    assert read_run_record(run) == {}  # so --resume goes on (resuming itself is tests/train's)


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    pytest.importorskip("transformers")
    from tests.interop.test_marian_import import marian_directory

    return marian_directory(tmp_path_factory.mktemp("marian") / "opus")[0]


def edited(marian, tmp_path, name, text):
    directory = tmp_path / "opus"
    shutil.copytree(marian, directory)
    (directory / name).write_text(text)
    return directory


CONFIG_CASES = {"nested": DEEP, "a list": "[]", "d_model a string": {"d_model": "32"},
                "d_model a list": {"d_model": [32]}, "dropout NaN": {"dropout": float("nan")},
                "layers negative": {"encoder_layers": -2}, "vocab_size a float": {"vocab_size": 1e9}}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_a_hostile_marian_config_is_one_usage_error(marian, tmp_path, case):
    from attncomp.interop.marian_import import import_directory

    change = CONFIG_CASES[case]
    config = json.loads((marian / "config.json").read_text())
    text = change if isinstance(change, str) else json.dumps({**config, **change})
    with pytest.raises(UsageError, match="config.json"):
        import_directory(edited(marian, tmp_path, "config.json", text))


@pytest.mark.parametrize("name,text", [("generation_config.json", DEEP), ("generation_config.json", "[]"),
                                       ("generation_config.json", '{"num_beams": "4"}'),
                                       ("vocab.json", DEEP), ("vocab.json", "[]"), ("vocab.json", '{"a": NaN}'),
                                       ("vocab.json", '{"a": true}')])
def test_hostile_generation_config_and_vocabulary_are_one_usage_error(marian, tmp_path, name, text):
    from attncomp.interop.marian_import import import_directory

    with pytest.raises(UsageError, match=name):
        import_directory(edited(marian, tmp_path, name, text))


@pytest.mark.parametrize("name", ["source.spm", "target.spm"])
def test_an_empty_sentencepiece_model_is_one_usage_error(marian, tmp_path, name):
    """An empty file parses as a model without pieces; it was imported, and translated into nonsense."""
    from attncomp.interop.marian_import import import_directory

    with pytest.raises(UsageError, match=f"{name} is not a sentencepiece model"):
        import_directory(edited(marian, tmp_path, name, ""))


@pytest.mark.parametrize("kind", ["fifo", "dir", "dev_zero", "broken link"])
def test_an_optional_file_that_is_not_a_file_is_refused_not_skipped(marian, tmp_path, kind):
    """generation_config.json as a pipe, a directory, a device or a link to nothing was taken as absent (its
    num_beams silently dropped); it is refused like any file of the directory that is not a regular file."""
    from attncomp.interop.marian_import import import_directory

    directory = edited(marian, tmp_path, "generation_config.json", "")
    target = directory / "generation_config.json"
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dir":
        target.mkdir()
    else:
        target.symlink_to("/dev/zero" if kind == "dev_zero" else directory / "nowhere")
    with pytest.raises(UsageError, match="generation_config.json"):
        import_directory(directory)


def test_bleu_validation_of_an_encoder_only_spec_is_refused_before_training(tmp_path, sandbox, tiny_artifacts):
    from attncomp import ir

    with pytest.raises(SpecError, match="encoder-only model does not generate"):
        ir.load(str(ROOT / "specs/examples/bert.attn"), ["train.validation.bleu=8"])
    outcome = sandbox.run(["train", str(ROOT / "specs/examples/bert.attn"), "--set", "train.validation.bleu=8",
                           "--data", str(tiny_artifacts["data"]), "--out", str(tmp_path / "run")], timeout=60)
    assert outcome.code == 2 and "does not generate text" in outcome.stderr and not outcome.problems()
    assert not (tmp_path / "run").exists()
