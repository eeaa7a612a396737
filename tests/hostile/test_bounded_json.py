"""Issue 43, item 1: every JSON attncomp reads goes through one bounded reader (attncomp.files.parse_json):
deep nesting is one line naming the file, never RecursionError (exit 70). Before, twelve places called
json.loads themselves: a tokenizer.json, M2M100's vocab.json, a checkpoint's `data` field, the stored
tokenizer envelope, and a JSONL line."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attncomp.cli.main import run

DEEP = "[" * 5000 + "]" * 5000


def _one_line(capsys, *names: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], err
    return lines[0]


@pytest.mark.parametrize("where", ["whole", "inside"])
def test_a_deep_tokenizer_json_is_refused_at_import(where, imported_gpt2, tmp_path, capsys):
    d = tmp_path / "src"
    shutil.copytree(imported_gpt2["src"], d)
    if where == "whole":
        (d / "tokenizer.json").write_text(DEEP)
    else:  # an otherwise valid file with one deep value
        record = json.loads((d / "tokenizer.json").read_text())
        (d / "tokenizer.json").write_text(json.dumps(record)[:-1] + ', "extra": ' + DEEP + "}")
    assert run(["import", str(d), "--out", str(tmp_path / "out")]) == 2
    assert "nested more than 64" in _one_line(capsys, "tokenizer.json")
    assert not (tmp_path / "out").exists()


def test_a_deep_m2m100_vocab_json_is_one_line(tmp_path):
    from attncomp.errors import UsageError
    from attncomp.interop import hf_tokens
    from tests.interop import hf_tokenizers

    hf_tokenizers.m2m100_files(tmp_path / "m2m")
    (tmp_path / "m2m" / "vocab.json").write_text(DEEP)
    with pytest.raises(UsageError, match=r"vocab\.json .*nested more than 64"):
        hf_tokens._m2m100_files(tmp_path / "m2m")


def _crafted(imported_gpt2, tmp_path, **changes):
    payload = torch.load(imported_gpt2["ckpt"], weights_only=True)
    payload.update(changes)
    torch.save(payload, tmp_path / "crafted.pt")
    return tmp_path / "crafted.pt"


def test_a_deep_data_field_of_a_checkpoint_is_one_line(imported_gpt2, tmp_path, capsys):
    ckpt = _crafted(imported_gpt2, tmp_path, data=DEEP)
    assert run(["translate", str(ckpt), "--input", str(imported_gpt2["input"]), "--device", "cpu"]) == 1
    _one_line(capsys, "crafted.pt", "data")
    assert run(["export", str(ckpt), "--format", "hf", "--out", str(tmp_path / "hf")]) in (1, 2)
    _one_line(capsys, "crafted.pt")
    assert not (tmp_path / "hf").exists()


def test_a_deep_stored_tokenizer_envelope_is_one_line(imported_gpt2, tmp_path, capsys):
    deep = torch.frombuffer(bytearray(('{"format": ' + DEEP + "}").encode()), dtype=torch.uint8)
    ckpt = _crafted(imported_gpt2, tmp_path, tokenizers={"src": deep, "tgt": deep.clone()})
    assert run(["translate", str(ckpt), "--input", str(imported_gpt2["input"]), "--device", "cpu"]) in (1, 2)
    assert "stored tokenizer" in _one_line(capsys)
    assert run(["data", "prepare", "--train", str(tmp_path / "x"), "--lang", "xx", "--tokenizers", str(ckpt),
                "--out", str(tmp_path / "prepared")]) in (1, 2)
    _one_line(capsys)
    assert not (tmp_path / "prepared").exists()


def test_a_deep_jsonl_line_is_refused_with_its_number(tmp_path, capsys):
    rows = [json.dumps({"src": "a b", "tgt": "c d"})] * 3 + ['{"src": ' + DEEP + ', "tgt": "x"}']
    (tmp_path / "pairs.jsonl").write_text("\n".join(rows) + "\n")
    assert run(["data", "prepare", "--train", str(tmp_path / "pairs.jsonl"), "--src-column", "src",
                "--tgt-column", "tgt", "--out", str(tmp_path / "prepared"), "--vocab-size", "40"]) == 2
    assert "nested more than 64" in _one_line(capsys, "pairs.jsonl:4")
    assert not (tmp_path / "prepared").exists()
