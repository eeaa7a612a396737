"""The runner end to end with two CPU workers through the elastic launcher: DDP with accumulation against one
worker, FSDP against DDP and resumed, validation BLEU under FSDP. Apart from tests/train/test_runner.py (its
helpers) so that pytest-xdist's loadfile gives the two files to both workers."""

from __future__ import annotations

import pytest

from attncomp.cli.main import run
from attncomp import checkpoint as ckpt
from tests.train.test_runner import SHORT, TINY, params, train

DDP = ["--procs", "2", "--max-tokens-per-gpu", "4096", *SHORT]


@pytest.fixture(scope="module")
def ddp(sample_data, tmp_path_factory):
    """Two DDP workers, 12 updates, validation BLEU decoded by rank 0 and heard by all (which leaves the weights
    as they were: the FSDP test compares its updates with these): one run for the two tests below."""
    out = tmp_path_factory.mktemp("ddp") / "two"
    validation = ["--set", "train.validation.bleu=2", "--set", "train.validation.best=ppl"]
    assert run(["train", TINY, "--data", str(sample_data), "--out", str(out), *DDP, *validation]) == 0
    return out


def test_two_workers_and_one_worker_with_accumulation_agree(ddp, sample_data, tmp_path):
    assert "bleu" in ckpt.load(ddp / ckpt.BEST).header.metrics
    assert train(sample_data, tmp_path / "one", "--max-tokens-per-gpu", "200") == 0  # accumulates
    a, b = params(ddp / "checkpoint_00000012.pt"), params(tmp_path / "one" / "checkpoint_00000012.pt")
    # A key bias adds q.b_k to every score of a query, which softmax ignores: its true gradient is 0,
    # and Adam turns the rounding noise it gets into steps of about lr either way. It stays at noise level.
    noise = [k for k in a if k.endswith("k_proj.bias")]
    assert max((a[k] - b[k]).abs().max().item() for k in a if k not in noise) < 2e-5
    assert all(a[k].abs().max() < 2e-3 and b[k].abs().max() < 2e-3 for k in noise)
    assert any((a[k] - params(tmp_path / "one" / "checkpoint_00000004.pt")[k]).abs().max() > 1e-3 for k in a)


def test_fsdp_computes_the_same_updates_as_ddp_and_resumes(ddp, sample_data, tmp_path, capsys):
    assert run(["train", TINY, "--data", str(sample_data), "--out", str(tmp_path / "fsdp"), "--fsdp", *DDP,
                "--stop-at", "8"]) == 0
    assert run(["train", TINY, "--data", str(sample_data), "--out", str(tmp_path / "fsdp"), "--fsdp", *DDP,
                "--resume"]) == 0
    a, b = params(ddp / "checkpoint_00000012.pt"), params(tmp_path / "fsdp" / "checkpoint_00000012")
    noise = [k for k in a if k.endswith("k_proj.bias")]  # see the test above
    assert max((a[k] - b[k]).abs().max().item() for k in a if k not in noise) < 2e-5


def test_fsdp_validation_bleu_decodes_the_gathered_weights(sample_data, trained_tiny, tmp_path):
    # under FSDP no worker holds the model: rank 0 decodes with the weights gathered from both workers, and
    # scores what one process scores from the checkpoint saved at the same step
    from attncomp.loading import load_checkpoint
    from attncomp.data.dataset import PreparedData
    from attncomp.decode.bleu import bleu

    out = tmp_path / "fsdp"
    assert run(["train", TINY, "--data", str(sample_data), "--out", str(out), "--procs", "2", "--fsdp",
                "--init", str(trained_tiny / "checkpoint_00000300.pt"), "--set", "train.steps=2",
                "--set", "train.checkpoint.every=2", "--set", "train.validation.bleu=20",
                "--set", "train.validation.best=bleu"]) == 0
    logged = ckpt.load(out / "checkpoint_00000002").header.metrics["bleu"]
    model, _ = load_checkpoint(out / "checkpoint_00000002")
    data = PreparedData(sample_data)
    assert logged > 0 and logged == bleu(model, data, data.split("valid"), 20)[0]
    assert ckpt.load(out / ckpt.BEST).header.metrics["bleu"] == logged


def test_fsdp_needs_two_workers(sample_data, tmp_path, capsys):
    assert train(sample_data, tmp_path / "run", "--fsdp") == 2
    assert "needs at least 2" in capsys.readouterr().err
