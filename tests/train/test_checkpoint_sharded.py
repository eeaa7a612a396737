"""Sharded checkpoints under --fsdp (DCP): written per worker, resumed on other worker counts, consolidated."""

from __future__ import annotations

import torch

from attncomp import checkpoint as ckpt
from attncomp.cli.main import run
from tests.conftest import ROOT

TINY = str(ROOT / "specs/examples/tiny.attn")
SHORT = ["--set", "train.steps=8", "--set", "train.checkpoint.every=4", "--set", "train.batch=tokens(600)",
         "--max-tokens-per-gpu", "4096"]
TOLERANCE = 2e-5  # different reduction orders over 1, 2 or 4 workers; see test_runner


def train(data, out, *extra):
    return run(["train", TINY, "--data", str(data), "--out", str(out), *SHORT, *extra])


def differs(a: dict, b: dict) -> float:
    noise = [k for k in a if k.endswith("k_proj.bias")]  # zero true gradient: Adam amplifies rounding (test_runner)
    return max((a[k] - b[k]).abs().max().item() for k in a if k not in noise)


def test_fsdp_saves_shards_that_resume_on_one_and_four_workers_and_read_everywhere(sample_data, tmp_path):
    assert train(sample_data, tmp_path / "two", "--procs", "2", "--fsdp") == 0
    step4 = tmp_path / "two" / "checkpoint_00000004"
    assert step4.is_dir() and sorted(p.name for p in step4.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    assert ckpt.load(step4, model=False).header.sharded
    straight = ckpt.load(tmp_path / "two" / "checkpoint_00000008").model
    for workers in ("1", "4"):
        out = tmp_path / f"on{workers}"
        out.mkdir()
        (out / step4.name).symlink_to(step4, target_is_directory=True)
        assert train(sample_data, out, "--procs", workers, *(["--fsdp"] if workers == "4" else []), "--resume") == 0
        resumed = out / ("checkpoint_00000008" if workers == "4" else "checkpoint_00000008.pt")
        assert differs(ckpt.load(resumed).model, straight) < TOLERANCE, workers
    assert differs(ckpt.load(tmp_path / "on1" / "checkpoint_00000004").model, straight) > 10 * TOLERANCE  # it trained on

    # the sharded run's checkpoints, read without a process group
    shards = ckpt.load(step4)
    assert run(["consolidate", str(tmp_path / "two"), "-o", str(tmp_path / "one.pt")]) == 0  # the newest: step 8
    whole = ckpt.load(tmp_path / "one.pt")
    assert not whole.header.sharded and whole.header.step == 8 and whole.optimizer["state"]
    assert all(torch.equal(whole.model[k], straight[k]) for k in straight)
    assert run(["average", str(tmp_path / "two"), "-o", str(tmp_path / "avg.pt")]) == 0
    mean = {k: ((shards.model[k].double() + straight[k].double()) / 2).float() for k in straight}
    assert all(torch.equal(ckpt.load(tmp_path / "avg.pt").model[k], mean[k]) for k in mean)
    (tmp_path / "in.txt").write_text("a b c\n")
    assert run(["translate", str(step4), "--input", str(tmp_path / "in.txt"), "--beam", "1",
                "--output", str(tmp_path / "out.txt")]) == 0
    (step4 / "__1_0.distcp").write_bytes(b"torn")  # a damaged shard: not readable, so never counted or averaged
    assert not ckpt.readable(step4) and ckpt.last_readable(tmp_path / "two", 2, warn=print) == [
        tmp_path / "two" / "checkpoint_00000008"]
