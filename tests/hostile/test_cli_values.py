"""Every command refuses bad option values and unusable paths with argparse's one-line error (exit 2).

Each case failed before cli/args.py: the value was taken (`average --last 0` averaged everything,
`--alpha nan` decoded with NaN scores, `--time-limit -1` stopped at once) or a traceback came later.
"""

from __future__ import annotations

import os
import re

import pytest
import torch

from attncomp.cli import args as types
from attncomp.cli.main import run
from attncomp.errors import UsageError
from tests.conftest import ROOT

TRAIN = ["train", "spec.attn", "--data", "data"]
TRANSLATE = ["translate", "model.pt"]
EVAL = ["eval", "model.pt"]
PREPARE = ["data", "prepare", "--train", "corpus", "--out", "out"]

BAD_VALUES = [
    (["average", "run", "-o", "avg.pt", "--last", "0"], "--last", "must be at least 1"),
    (["average", "run", "-o", "avg.pt", "--last", "-1"], "--last", "must be at least 1"),
    ([*TRAIN, "--log-every", "0"], "--log-every", "must be at least 1"),
    ([*TRAIN, "--log-interval", "0"], "--log-interval", "greater than 0"),
    ([*TRAIN, "--max-tokens-per-gpu", "0"], "--max-tokens-per-gpu", "must be at least 1"),
    ([*TRAIN, "--procs", "0"], "--procs", "must be at least 1"),
    ([*TRAIN, "--gpus", "-2"], "--gpus", "must be at least 1"),
    ([*TRAIN, "--stop-at", "0"], "--stop-at", "must be at least 1"),
    ([*TRAIN, "--time-limit", "-5"], "--time-limit", "greater than 0"),
    ([*TRAIN, "--time-limit", "nan"], "--time-limit", "finite"),
    ([*TRAIN, "--time-limit", "ten"], "--time-limit", "expected a number"),
    ([*TRANSLATE, "--beam", "0"], "--beam", "must be at least 1"),
    ([*TRANSLATE, "--nbest", "0"], "--nbest", "must be at least 1"),
    ([*TRANSLATE, "--batch-tokens", "-1"], "--batch-tokens", "must be at least 1"),
    ([*TRANSLATE, "--alpha", "-0.5"], "--alpha", "0 or more"),
    ([*TRANSLATE, "--alpha", "nan"], "--alpha", "finite"),
    ([*TRANSLATE, "--alpha", "inf"], "--alpha", "finite"),
    ([*TRANSLATE, "--device", "foo"], "--device", "expected cpu, cuda or cuda:N"),
    ([*TRANSLATE, "--device", "cpu:1"], "--device", "expected cpu, cuda or cuda:N"),
    ([*TRANSLATE, "--device", "cuda:99"], "--device", "CUDA device"),
    ([*EVAL, "--beam", "-3"], "--beam", "must be at least 1"),
    (["data", "sample", "--out", "out", "--pairs", "0"], "--pairs", "must be at least 1"),
    (["data", "sample", "--out", "out", "--held-out", "0"], "--held-out", "must be at least 1"),
    (["data", "sample", "--out", "out", "--vocab-size", "7"], "--vocab-size", "must be at least 8"),
    ([*PREPARE, "--vocab-size", "1.5"], "--vocab-size", "expected a whole number"),
    ([*PREPARE, "--src-vocab-size", "0"], "--src-vocab-size", "must be at least 8"),
    ([*PREPARE, "--character-coverage", "0"], "--character-coverage", "at most 1"),
    ([*PREPARE, "--character-coverage", "1.5"], "--character-coverage", "at most 1"),
    ([*PREPARE, "--max-len", "1"], "--max-len", "must be at least 2"),
    ([*PREPARE, "--seed", "-1"], "--seed", "must be at least 0"),
    ([*PREPARE, "--src", "../en"], "--src", "language suffix"),
    (["demo", "--procs", "0"], "--procs", "must be at least 1"),
]


def _refused(argv, capsys) -> str:
    """Run argv; it must stop in argument parsing with exit 2; the error line."""
    with pytest.raises(SystemExit) as stop:
        run(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("argv, option, message", BAD_VALUES, ids=[" ".join(c[0][-2:]) for c in BAD_VALUES])
def test_bad_values_are_refused_before_anything_runs(argv, option, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _refused(argv, capsys)
    assert f"argument {option}" in line and message in line, line


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_refused(capsys):
    line = _refused([*TRANSLATE, "--device", "cuda"], capsys)
    assert "this machine has no CUDA device" in line


def _paths(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    (tmp_path / "adir").mkdir()
    return {"missing parent": str(tmp_path / "no" / "such" / "x.txt"), "file in the way": str(afile / "x.txt"),
            "a directory": str(tmp_path / "adir"), "a file": str(afile)}


@pytest.mark.parametrize("command, option, case, message", [
    (TRANSLATE, "--output", "missing parent", "does not exist"),
    (TRANSLATE, "--output", "file in the way", "is a file, not a directory"),
    (TRANSLATE, "--output", "a directory", "is a directory"),
    (EVAL, "--output", "a directory", "is a directory"),
    (["average", "run", "--last", "2"], "-o", "missing parent", "does not exist"),
    (["average", "run", "--last", "2"], "-o", "a directory", "is a directory"),
    (TRAIN, "--out", "a file", "is a file, not a directory"),
    (TRAIN, "--out", "file in the way", "is a file, not a directory"),
    (["data", "sample"], "--out", "a file", "is a file, not a directory"),
    (PREPARE[:4], "--out", "file in the way", "is a file, not a directory"),
    (["demo"], "--out", "a file", "is a file, not a directory"),
    (TRANSLATE, "--input", "a directory", "is a directory, not a file"),
    (EVAL, "--src", "missing parent", "no such file"),
])
def test_unusable_paths_are_refused(command, option, case, message, tmp_path, capsys):
    line = _refused([*command, option, _paths(tmp_path)[case]], capsys)
    assert f"argument {option}" in line and message in line, line


@pytest.mark.parametrize("argv", [
    [*TRANSLATE, "--output", "x" * 5000], [*TRANSLATE, "--input", "d/" * 3000], [*TRAIN, "--out", "r" * 300],
    ["average", "run", "-o", "a" * 300], ["data", "sample", "--out", "s" * 300], [*EVAL, "--src", "a\0b"],
])
def test_names_too_long_or_with_nul_are_refused(argv, capsys):
    line = _refused(argv, capsys)
    assert "File name too long" in line or "cannot contain NUL" in line, line
    assert len(line) < 300  # the path is shortened in the message


@pytest.mark.parametrize("argv", [
    ["data", "info", "d" * 5000], [*PREPARE[:2], "--train", "t" * 5000, "--out", "out"],
    [*PREPARE[:2], "--train", "t" * 5000 + ".tsv", "--out", "out"], [*PREPARE[:2], "--train", "a\0b", "--out", "out"],
])
def test_data_paths_too_long_or_with_nul_are_one_clear_error(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and len(err) < 300, err


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_no_permission_is_refused(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    line = _refused([*TRANSLATE, "--output", str(locked / "out.txt")], capsys)
    assert "no permission" in line
    line = _refused([*TRAIN, "--out", str(locked / "run")], capsys)
    assert "no permission" in line


@pytest.mark.parametrize("src, ref, message", [
    ("", "", "no source lines"),
    ("a\nb\n", "a\n", "2 source lines but 1 reference lines"),
])
def test_eval_refuses_empty_and_mismatched_files(src, ref, message, tmp_path, capsys):
    (tmp_path / "s").write_text(src)
    (tmp_path / "r").write_text(ref)
    code = run(["eval", str(tmp_path / "missing.pt"), "--src", str(tmp_path / "s"), "--ref", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == UsageError.exit_code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_atomic_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("old\n")

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(types.os, "replace", crash)
    with pytest.raises(UsageError, match="(?i)no space left on device"):
        types.write_text_atomic(target, "new\n" * 1000)
    monkeypatch.undo()
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["out.txt"]
    types.write_text_atomic(target, "new\n")
    assert target.read_text() == "new\n"


# a checkpoint of tiny.attn kept with the tests (what a trained one would show here, without training one)
CHECKPOINT = str(ROOT / "tests/fixtures/legacy/checkpoint.pt")


def test_nbest_beyond_the_beam_is_refused(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("the dog sees a cat\n")
    assert run(["translate", CHECKPOINT, "--input", str(tmp_path / "in.txt"), "--nbest", "5", "--beam", "2"]) == 2
    err = capsys.readouterr().err
    assert "--nbest 5 asks for more hypotheses than the beam keeps (2)" in err and "Traceback" not in err


def test_translate_logs_sentences_and_rate_without_a_terminal(tmp_path, capsys):
    lines = ["the dog sees a cat", "a cat", "the house is red", "we go home", "it rains"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    assert run(["translate", CHECKPOINT, "--input", str(tmp_path / "in.txt"),
                "--output", str(tmp_path / "out.txt"), "--device", "cpu"]) == 0
    err = capsys.readouterr().err  # captured: not a terminal, so no bar but a line with the count and the rate
    assert re.search(r"^translate: 5 sent in [\d.]+s \([\d,.]+ sent/s\)$", err, re.M), err
    assert "\r" not in err and len((tmp_path / "out.txt").read_text().splitlines()) == 5
