"""The training job (attncomp.train.job): plain data that the command line parses into, checked before
any worker starts; the resume rules beside the run state."""

from __future__ import annotations

import pydantic
import pytest

from attncomp import ir, train
from attncomp.cli.main import _parser
from attncomp.cli.train_command import _job
from attncomp.errors import UsageError
from attncomp.train.job import devices
from attncomp.train.run_state import resume_changes
from tests.conftest import ROOT

TINY = str(ROOT / "specs/examples/tiny.attn")


def test_a_job_is_plain_data_that_round_trips_through_json():
    job = train.Job(spec=TINY, overrides=("train.steps=3",), data=train.DataOptions(path="d"),
                    parallelism=train.Parallelism(procs=2, fsdp=True),
                    checkpointing=train.CheckpointOptions(resume=True))
    assert train.Job.model_validate_json(job.model_dump_json()) == job
    with pytest.raises(pydantic.ValidationError):
        train.Job(spec=TINY, data=train.DataOptions(path="d"), steps=3)  # a typo is an error, not a default


def test_the_command_line_only_parses_into_the_job():
    args = _parser().parse_args(["train", TINY, "--data", "d", "--procs", "2", "--resume", "--plain-loss",
                                 "--set", "train.steps=3", "--max-tokens-per-gpu", "1000", "--stop-at", "5"])
    job = _job(args)
    assert job == train.Job(spec=TINY, overrides=("train.steps=3",),
                            data=train.DataOptions(path="d", max_tokens_per_worker=1000),
                            parallelism=train.Parallelism(procs=2),
                            checkpointing=train.CheckpointOptions(resume=True, stop_at=5),
                            execution=train.Execution(fused_loss=False))


def test_device_choice():
    assert devices(train.Parallelism(), 0) == ("cpu", 1)
    assert devices(train.Parallelism(), 2) == ("cuda", 1)
    assert devices(train.Parallelism(procs=3), 2) == ("cpu", 3)
    assert devices(train.Parallelism(gpus=2), 2) == ("cuda", 2)
    for parallelism, message in [(train.Parallelism(gpus=1, procs=1), "not both"),
                                 (train.Parallelism(gpus=2), "this machine has 1")]:
        with pytest.raises(UsageError, match=message):
            devices(parallelism, 1)


def test_resume_may_change_only_the_run_length_and_decoding():
    spec = ir.load(TINY)
    stored = ir.to_text(spec)
    assert resume_changes(ir.load(TINY, ["train.steps=9999"]), stored, "ckpt") == \
        [f"train.steps: {spec.train.steps} -> 9999"]
    with pytest.raises(UsageError, match="another architecture or recipe: model.decoder.d_ff"):
        resume_changes(ir.load(TINY, ["model.d_ff=32"]), stored, "ckpt")
