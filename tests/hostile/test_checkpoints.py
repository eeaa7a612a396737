"""Never lose a good checkpoint: unreadable ones are skipped, not counted, and named; torn saves are cleaned up."""

from __future__ import annotations

import pytest
import torch

from attncomp import checkpoint as ckpt
from attncomp.cli.main import run
from tests.conftest import ROOT
from tests.train.test_checkpoint import train_checkpoint

TINY = str(ROOT / "specs/examples/tiny.attn")


def run_dir(tmp_path, steps=(4, 8, 12), bad=(16,)):
    tmp_path.mkdir(exist_ok=True)
    for step in steps:
        ckpt.save(train_checkpoint(step, step=step), ckpt.checkpoint_path(tmp_path, step))
    for step in bad:
        ckpt.checkpoint_path(tmp_path, step).write_bytes(b"PK\x03\x04 torn")
    return tmp_path


def test_pruning_counts_and_deletes_only_readable_checkpoints(tmp_path):
    run_dir(tmp_path)
    gone = ckpt.prune(tmp_path, keep=2)
    assert [p.name for p in gone] == ["checkpoint_00000004.pt"]
    assert [s for s, _ in ckpt.listed(tmp_path)] == [8, 12, 16]  # two good ones kept; the bad one left to inspect


def test_resume_and_average_skip_an_unreadable_newest_checkpoint_and_say_which(tmp_path):
    run_dir(tmp_path)
    notes = []
    assert ckpt.latest_readable(tmp_path, warn=notes.append).header.step == 12
    last = ckpt.last_readable(tmp_path, 2, warn=notes.append)
    assert [p.name for p in last] == ["checkpoint_00000008.pt", "checkpoint_00000012.pt"]
    averaged = ckpt.average([*last, tmp_path / "checkpoint_00000016.pt"], warn=notes.append)
    assert averaged.header.averaged == ("checkpoint_00000008.pt", "checkpoint_00000012.pt")
    assert len(notes) == 3 and all("checkpoint_00000016.pt" in n and n.startswith("skipping") for n in notes)
    with pytest.raises(ckpt.CheckpointError, match="checkpoint_00000016.pt"):  # named explicitly: an error
        ckpt.average([*last, tmp_path / "checkpoint_00000016.pt"])


def test_average_command_skips_unreadable_checkpoints_of_a_run(tmp_path, capsys):
    run_dir(tmp_path / "run")
    assert run(["average", str(tmp_path / "run"), "--last", "2", "-o", str(tmp_path / "avg.pt")]) == 0
    err = capsys.readouterr().err
    assert "skipping" in err and "checkpoint_00000016.pt" in err and "averaged 2 checkpoint(s)" in err
    with pytest.raises(SystemExit) as refused:  # an output under a missing folder is a usage error
        run(["average", str(tmp_path / "run"), "-o", str(tmp_path / "nowhere" / "avg.pt")])
    assert refused.value.code == 2
    assert "nowhere does not exist" in capsys.readouterr().err


def test_stale_files_and_directories_of_killed_saves_are_removed(tmp_path):
    run_dir(tmp_path, bad=())
    (tmp_path / "checkpoint_00000016.tmp").mkdir()  # a sharded save killed before its rename
    (tmp_path / "checkpoint_00000016.tmp" / "__0_0.distcp").write_bytes(b"x")
    (tmp_path / "checkpoint_avg.pt.tmp").write_bytes(b"x")
    (tmp_path / "notes.tmp").write_bytes(b"mine")  # not attncomp's
    removed = ckpt.remove_stale(tmp_path)
    assert sorted(p.name for p in removed) == ["checkpoint_00000016.tmp", "checkpoint_avg.pt.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint_00000004.pt", "checkpoint_00000008.pt", "checkpoint_00000012.pt", "notes.tmp"]


def test_average_counts_are_at_least_one(tmp_path, capsys):
    run_dir(tmp_path / "run")
    for last in ("0", "-1"):
        with pytest.raises(SystemExit) as refused:  # argparse's usage error, before anything is read
            run(["average", str(tmp_path / "run"), "--last", last, "-o", str(tmp_path / "avg.pt")])
        assert refused.value.code == 2 and "--last: must be at least 1" in capsys.readouterr().err


def test_a_run_never_loses_a_good_checkpoint_to_an_unreadable_one(sample_data, tmp_path, capfd):
    out = tmp_path / "run"
    base = ["train", TINY, "--data", str(sample_data), "--out", str(out), "--procs", "1", "--set", "train.steps=8",
            "--set", "train.checkpoint.every=4", "--set", "train.checkpoint.keep=2", "--set", "train.batch=tokens(600)"]
    assert run([*base, "--stop-at", "4"]) == 0
    (out / "checkpoint_00000006.pt").write_bytes(b"PK\x03\x04 torn")  # an unreadable newest checkpoint
    (out / "checkpoint_00000008.pt.tmp").write_bytes(b"half")  # a save killed halfway
    assert run([*base, "--resume"]) == 0
    log = capfd.readouterr().err  # the worker's notes
    assert "removed" in log and "checkpoint_00000008.pt.tmp" in log and not (out / "checkpoint_00000008.pt.tmp").exists()
    assert "skipping" in log and "checkpoint_00000006.pt" in log and "resumed from" in log
    # keep = 2 readable ones, 4 and 8 (the old pruning counted the bad one and deleted step 4) ...
    assert [s for s, _ in ckpt.listed(out)] == [4, 6, 8]
    # ... and average_last = 2 readable ones (the old average failed on the bad one)
    assert ckpt.load(out / ckpt.AVERAGE).header.averaged == ("checkpoint_00000004.pt", "checkpoint_00000008.pt")


@pytest.mark.parametrize("fault, message", [
    ("nan", "field 'model': layer.bias has 1 non-finite value(s)"),
    ("no tokenizers", "field 'tokenizers' is missing"),
    ("step text", "field 'step' should be a non-negative integer, found str"),
])
def test_decoding_a_bad_checkpoint_is_one_clear_line(tmp_path, capsys, fault, message):
    bad = train_checkpoint().payload()
    if fault == "nan":
        bad["model"]["layer.bias"][0] = float("nan")
    elif fault == "no tokenizers":
        del bad["tokenizers"]
    else:
        bad["step"] = "4"
    torch.save(bad, tmp_path / "bad.pt")
    (tmp_path / "in.txt").write_text("a b c\n")
    for command in (["translate", "--input"], ["eval", "--ref", str(tmp_path / "in.txt"), "--src"]):
        assert run([command[0], str(tmp_path / "bad.pt"), *command[1:], str(tmp_path / "in.txt")]) == 1
        err = capsys.readouterr().err
        assert err == f"error: {tmp_path / 'bad.pt'}: {message}" + err.split(message, 1)[1] and err.count("\n") == 1, err


def test_checkpoints_with_other_tokenizers_are_not_averaged(tmp_path, capsys):
    """Token ids of another sentencepiece model name other pieces: the average took the last one's header."""
    import dataclasses

    ckpt.save(train_checkpoint(1, step=4), tmp_path / "a.pt")
    other = train_checkpoint(2, step=8)
    other.header = dataclasses.replace(other.header, tokenizers={"src": torch.zeros(3, dtype=torch.uint8),
                                                                  "tgt": torch.zeros(3, dtype=torch.uint8)})
    ckpt.save(other, tmp_path / "b.pt")
    assert run(["average", str(tmp_path / "b.pt"), str(tmp_path / "a.pt"), "-o", str(tmp_path / "avg.pt")]) == 1
    assert "a.pt has other tokenizers than" in capsys.readouterr().err and not (tmp_path / "avg.pt").exists()
