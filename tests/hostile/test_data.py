"""Damaged data directories and bad input text: one clear DataError (exit 2), never a hang or a traceback."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from attncomp.cli.main import run
from attncomp.data.dataset import PreparedData
from attncomp.errors import DataError


@pytest.fixture
def data(sample_data, tmp_path):
    """A private copy of the sample corpus to damage."""
    return shutil.copytree(sample_data, tmp_path / "data", ignore=shutil.ignore_patterns("text"))


def _edit_manifest(directory, edit):
    manifest = json.loads((directory / "manifest.json").read_text())
    edit(manifest)
    (directory / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["vocab"].pop("src_size"), "field vocab.src_size is missing"),
    (lambda m: m.pop("dtype"), "field dtype is missing"),
    (lambda m: m["splits"]["train"].pop("pairs"), "field splits.train.pairs is missing"),
    (lambda m: m["splits"].pop("train"), "field splits.train is missing"),
    (lambda m: m.update(splits=[]), "field splits is missing or not an object"),
    (lambda m: m["vocab"].update(src_size="256"), 'vocab.src_size should be a whole number >= 8, found "256"'),
    (lambda m: m["vocab"].update(shared=1), "vocab.shared should be true/false"),
    (lambda m: m["splits"]["valid"].update(tgt_tokens=-4), "splits.valid.tgt_tokens should be a whole number >= 0"),
    (lambda m: m["splits"]["train"].update(pairs=True), "splits.train.pairs should be a whole number >= 1"),
    (lambda m: m["splits"]["train"].update(pairs=0), "splits.train.pairs should be a whole number >= 1"),
    (lambda m: m["vocab"].update(src_model="../../etc/passwd"), "vocab.src_model should be a file name"),
    (lambda m: m.update(dtype="float64"), "dtype should be uint16 or int32"),
])
def test_a_manifest_with_a_missing_or_wrong_field_is_one_clear_error(data, edit, message, capsys):
    _edit_manifest(data, edit)
    with pytest.raises(DataError, match="manifest.json: field"):
        PreparedData(data)
    assert run(["data", "info", str(data)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def _damage_idx(directory, damage):
    idx = directory / "train.src.idx"
    offsets = np.fromfile(idx, dtype=np.int64)
    damage(offsets)
    offsets.tofile(idx)


def _shuffle_keeping_count_and_last(offsets):
    middle = offsets[:-1].copy()
    np.random.default_rng(0).shuffle(middle)
    offsets[:-1] = middle


@pytest.mark.parametrize("damage, message", [
    (_shuffle_keeping_count_and_last, "is corrupt"),  # spun forever before: negative lengths in the batcher
    (lambda o: o.__setitem__(slice(5, 7), o[5:7][::-1].copy()), "offset 6"),
    (lambda o: o.__setitem__(0, 3), "the first offset is 3, not 0"),
    (lambda o: o.__setitem__(-1, o[-1] - 1), "the last offset is"),
    (lambda o: o.__setitem__(4, o[3]), "does not follow offset 3"),  # an empty sentence: no </s>
])
def test_corrupt_idx_offsets_are_found_when_a_split_is_opened(data, damage, message):
    _damage_idx(data, damage)
    with pytest.raises(DataError, match="train.src.idx is corrupt") as err:
        PreparedData(data).split("train")
    assert message in str(err.value)


def test_idx_of_the_wrong_size_and_token_ids_beyond_the_vocabulary(data):
    (data / "valid.tgt.idx").write_bytes((data / "valid.tgt.idx").read_bytes()[:-3])
    with pytest.raises(DataError, match=r"valid.tgt.idx has \d+ bytes"):
        PreparedData(data).split("valid")
    tokens = np.fromfile(data / "train.tgt.bin", dtype=np.uint16)
    tokens[10] = 300  # the vocabulary has 256
    tokens.tofile(data / "train.tgt.bin")
    with pytest.raises(DataError, match="holds token id 300, but the vocabulary has 256"):
        PreparedData(data).split("train")


def _prepare(tmp_path, *args) -> tuple[int, str]:
    return run(["data", "prepare", "--out", str(tmp_path / "out"), "--vocab-size", "64", *args])


@pytest.fixture
def corpus(sample_data, tmp_path):
    """The first 300 sample pairs as tmp_path/c.src and c.tgt."""
    for side in ("src", "tgt"):
        lines = (sample_data / f"text/train.{side}").read_text().splitlines()[:300]
        (tmp_path / f"c.{side}").write_text("\n".join(lines) + "\n")
    return tmp_path / "c"


@pytest.mark.parametrize("setup, message", [
    (lambda c: (c.parent / "c.tgt").unlink(), "no {c}.tgt or {c}.tgt.gz"),
    (lambda c: ((c.parent / "c.tgt").unlink(), (c.parent / "c.tgt").mkdir()), "{c}.tgt is a directory"),
    (lambda c: (c.parent / "c.tgt").write_bytes(b"hello\n\x00\x01\x02binary\n"), "{c}.tgt:2: a NUL byte at column 1"),
    (lambda c: (c.parent / "c.src").write_bytes(b"ok\n\xff\xfe\n"), "{c}.src:2: not UTF-8 text"),
    (lambda c: (c.parent / "c.tgt").write_text("one line\n"), "{c}.src has 300 lines but {c}.tgt has 1"),
    (lambda c: [(c.parent / f"c.{s}").write_text("") for s in ("src", "tgt")], "the train text ({c}) has no lines"),
    (lambda c: None, None),  # good text, but --max-len 2 keeps no pair
])
def test_bad_input_text_is_one_clear_error(corpus, tmp_path, setup, message, capsys):
    setup(corpus)
    code = _prepare(tmp_path, "--train", str(corpus), "--max-len", "2" if message is None else "256")
    err = capsys.readouterr().err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    if message is None:  # every pair is longer than 2 tokens: a directory with nothing to train on, before
        assert code == 2 and "error: no training pair is kept: all 300" in err, err
    else:
        assert code == 2 and f"error: {message.format(c=corpus)}" in err, err


def test_prepare_logs_its_stages_with_their_times(corpus, tmp_path, capsys):
    assert _prepare(tmp_path, "--train", str(corpus), "--valid", str(corpus)) == 0
    err = capsys.readouterr().err  # not a terminal: no bars, timed lines
    for stage in ("read the text: ", "sentencepiece: ", "encode and write train: ", "encode and write valid: "):
        assert any(line.startswith(stage) and line.endswith("s") for line in err.splitlines()), (stage, err)
    assert "train: 300 pairs, " in err and "\r" not in err


@pytest.mark.parametrize("args, message", [
    (["--src", "en", "--tgt", "en"], "--src and --tgt are both 'en'"),
    (["--src-vocab-size", "100"], "need --separate-vocab"),
])
def test_prepare_options_that_contradict_each_other(corpus, tmp_path, args, message, capsys):
    assert _prepare(tmp_path, "--train", str(corpus), *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err
