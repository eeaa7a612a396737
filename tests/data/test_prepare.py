"""`attncomp data prepare`: formats, idempotence, atomicity, and clear errors for bad input."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest

from attncomp.cli.main import run
from attncomp.data.dataset import PreparedData
from attncomp.data.sample_corpus import generate
from attncomp.data.tokenizer import Tokenizer
from attncomp.errors import DataError
from attncomp.vocab import EOS


def _write(directory, name, pairs, gz=False, tsv=False):
    directory.mkdir(parents=True, exist_ok=True)
    opener = (lambda p: gzip.open(p, "wt", encoding="utf-8")) if gz else (lambda p: open(p, "w", encoding="utf-8"))
    if tsv:
        with opener(directory / f"{name}.tsv{'.gz' if gz else ''}") as f:
            f.writelines(f"{s}\t{t}\n" for s, t in pairs)
        return str(directory / f"{name}.tsv{'.gz' if gz else ''}")
    for lang, column in (("en", 0), ("xx", 1)):
        with opener(directory / f"{name}.{lang}{'.gz' if gz else ''}") as f:
            f.writelines(p[column] + "\n" for p in pairs)
    return str(directory / name)


def _prepare(prefix, out, *extra, valid=None):
    args = ["data", "prepare", "--train", prefix, "--src", "en", "--tgt", "xx", "--out", str(out),
            "--vocab-size", "120", *extra]
    return run(args + (["--valid", valid] if valid else []))


@pytest.mark.parametrize("kind", ["plain", "gz", "tsv"])
def test_formats_give_the_same_data(kind, tmp_path):
    pairs = generate(1, 400)
    prefix = _write(tmp_path / "raw", "train", pairs, gz=kind == "gz", tsv=kind == "tsv")
    assert _prepare(prefix, tmp_path / "out") == 0
    data = PreparedData(tmp_path / "out")
    train = data.split("train")
    assert len(train) == 400
    tok = data.tokenizer("src")
    assert tok.decode([train.src[3].tolist()]) == [pairs[3][0]]
    assert train.src[3][-1] == EOS and train.tgt[3][-1] == EOS
    assert data.vocab["src_size"] == 120 and data.vocab["shared"]


def test_running_again_is_a_no_op(tmp_path, capsys):
    prefix = _write(tmp_path / "raw", "train", generate(1, 300))
    assert _prepare(prefix, tmp_path / "out") == 0
    stamp = os.stat(tmp_path / "out" / "train.src.bin").st_mtime_ns
    capsys.readouterr()
    assert _prepare(prefix, tmp_path / "out") == 0
    assert "nothing to do" in capsys.readouterr().err
    assert os.stat(tmp_path / "out" / "train.src.bin").st_mtime_ns == stamp


def test_other_inputs_need_force(tmp_path, capsys):
    assert _prepare(_write(tmp_path / "a", "train", generate(1, 300)), tmp_path / "out") == 0
    other = _write(tmp_path / "b", "train", generate(2, 300))
    assert _prepare(other, tmp_path / "out") == 2
    assert "different preparation" in capsys.readouterr().err
    assert _prepare(other, tmp_path / "out", "--force") == 0
    assert PreparedData(tmp_path / "out").manifest["inputs"]["train"] == [other]


def test_a_half_written_directory_is_never_taken_for_a_good_one(tmp_path, capsys):
    half = tmp_path / "out"
    half.mkdir()
    (half / "train.src.bin").write_bytes(b"\0" * 10)  # what a crash before the manifest leaves
    assert _prepare(_write(tmp_path / "raw", "train", generate(1, 300)), half) == 2
    assert "not a prepared data directory" in capsys.readouterr().err
    with pytest.raises(DataError, match="not a prepared data directory"):
        PreparedData(half)


def test_a_text_file_given_as_data_is_told_to_be_prepared(tmp_path):
    """`attncomp train SPEC --data train.en`: the file is named a file, and how to prepare a directory from it."""
    (tmp_path / "train.en").write_text("a b\n")
    with pytest.raises(DataError, match=r"train.en is a file, not a data directory; make one with `attncomp data "
                                        r"prepare` \(from text: --train PREFIX --src LANG --tgt LANG --out DIR\)"):
        PreparedData(tmp_path / "train.en")
    with pytest.raises(DataError, match="no data directory"):
        PreparedData(tmp_path / "none")


def test_no_temporary_directory_is_left_behind(tmp_path):
    _prepare(_write(tmp_path / "raw", "train", generate(1, 300)), tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "raw"]


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "train.tgt.bin").write_bytes((d / "train.tgt.bin").read_bytes()[:-6]), "is corrupt"),
    (lambda d: (d / "train.src.idx").unlink(), "missing train.src.idx"),
    (lambda d: (d / "manifest.json").write_text("{ not json"), "manifest.json is corrupt"),
    (lambda d: (d / "manifest.json").write_text(json.dumps({"format": "other"})), "not an attncomp data manifest"),
])
def test_corrupt_directories_are_clear_errors(damage, message, tmp_path):
    _prepare(_write(tmp_path / "raw", "train", generate(1, 300)), tmp_path / "out")
    damage(tmp_path / "out")
    with pytest.raises(DataError, match=message):
        PreparedData(tmp_path / "out").split("train")


def test_length_filter_applies_to_training_only(tmp_path):
    pairs = generate(1, 300) + [("long " * 300, "lang " * 300)]
    prefix = _write(tmp_path / "raw", "train", pairs)
    valid = _write(tmp_path / "raw", "valid", pairs[-3:])
    assert _prepare(prefix, tmp_path / "out", "--max-len", "200", valid=valid) == 0
    splits = PreparedData(tmp_path / "out").manifest["splits"]
    assert splits["train"]["pairs"] == 300 and splits["train"]["dropped"] == 1
    assert splits["valid"]["pairs"] == 3


def test_separate_vocabularies(tmp_path):
    prefix = _write(tmp_path / "raw", "train", generate(1, 400))
    assert _prepare(prefix, tmp_path / "out", "--separate-vocab", "--src-vocab-size", "90",
                    "--tgt-vocab-size", "100") == 0
    data = PreparedData(tmp_path / "out")
    assert (data.vocab["src_size"], data.vocab["tgt_size"], data.vocab["shared"]) == (90, 100, False)
    assert data.tokenizer("src").vocab_size == 90 and isinstance(data.tokenizer("tgt"), Tokenizer)


@pytest.mark.parametrize("setup, message", [
    (lambda d: None, "no "),
    (lambda d: (_write(d, "train", [("a", "b")] * 3), (d / "train.xx").write_text("b\n")), "has 3 lines but"),
    (lambda d: (d.mkdir(), (d / "train.en").write_bytes(b"ok\n\xff\xfe\n"), (d / "train.xx").write_text("a\nb\n")),
     "train.en:2: not UTF-8"),
    (lambda d: _write(d, "train", generate(1, 3)), "could not train a 5000-token vocabulary"),
])
def test_bad_input_is_one_clear_error(setup, message, tmp_path, capsys):
    setup(tmp_path / "raw")
    assert _prepare(str(tmp_path / "raw" / "train"), tmp_path / "out", "--vocab-size", "5000") == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "Traceback" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("given, langs, message", [
    ("train.en", ("en", "xx"), "error: no raw/train.en.en or raw/train.en.en.gz (a --train/--valid/--test PREFIX "
                               "names PREFIX.en files); train.en is one side's file: give the prefix without .en, "
                               "and --src/--tgt its suffixes"),
    ("train", ("src", "tgt"), "; there are train.{en,xx}: name the suffixes with --src and --tgt (or --lang)"),
])
def test_a_prefix_slip_is_told_what_was_meant(given, langs, message, tmp_path, monkeypatch, capsys):
    """`--train train.en` (a file, as a Trainer's --train_file) or suffixes other than --src/--tgt's."""
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "raw", "train", [("a b", "c d")] * 3)
    assert run(["data", "prepare", "--train", f"raw/{given}", "--src", langs[0], "--tgt", langs[1],
                "--out", "out"]) == 2
    assert message in capsys.readouterr().err


def test_bad_tsv_row(tmp_path, capsys):
    (tmp_path / "t.tsv").write_text("a\tb\nonly one column\n")
    assert _prepare(str(tmp_path / "t.tsv"), tmp_path / "out") == 2
    assert "t.tsv:2: expected 2 tab-separated columns, found 1" in capsys.readouterr().err


def test_token_arrays_are_compact(sample_data):
    data = PreparedData(sample_data)
    assert data.dtype == np.uint16
    assert (sample_data / "text" / "test.src").exists()


def test_one_language_fills_both_sides_with_its_text(tmp_path, capsys):
    pairs = generate(1, 300)
    prefix = _write(tmp_path / "raw", "train", pairs)
    args = ["data", "prepare", "--train", prefix, "--lang", "xx", "--out", str(tmp_path / "mono"),
            "--vocab-size", "120"]
    assert run(args) == 0
    data = PreparedData(tmp_path / "mono")
    train = data.split("train")
    assert data.monolingual and len(train) == 300 and data.manifest["languages"] == {"src": "xx", "tgt": "xx"}
    assert data.tokenizer("tgt").decode([train.tgt[7][:-1].tolist()]) == [pairs[7][1]]
    assert np.array_equal(train.src.tokens, train.tgt.tokens) and np.array_equal(train.src.offsets, train.tgt.offsets)
    assert run(args) == 0 and "nothing to do" in capsys.readouterr().err
    assert not PreparedData(_prepared_parallel(prefix, tmp_path)).monolingual


def _prepared_parallel(prefix, tmp_path):
    assert _prepare(prefix, tmp_path / "parallel") == 0
    return tmp_path / "parallel"


def test_one_language_refuses_two_languages_options(tmp_path, capsys):
    prefix = _write(tmp_path / "raw", "train", generate(1, 20))
    assert run(["data", "prepare", "--train", prefix, "--lang", "xx", "--separate-vocab",
                "--out", str(tmp_path / "o")]) == 2
    assert "--lang prepares one language" in capsys.readouterr().err
