"""Issue 43, item 2: a compiled library's failure is one line naming the file and what to do (attncomp.native).
Before, a tokenizer.json whose pre-tokenizer `Split` pattern backtracks catastrophically (`(a+)+$` on
"aaa...b") imported with exit 0, and translate, eval and `data prepare --tokenizers` then died with
pyo3_runtime.PanicException (a BaseException) and a Rust backtrace."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attncomp.cli.main import run
from attncomp.errors import DataError
from attncomp.native import native

SPLIT = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}
LONG_RUN = "a" * 5000 + "b"


def _backtracking(tokenizer_json: str) -> str:
    record = json.loads(tokenizer_json)
    record["pre_tokenizer"] = SPLIT
    return json.dumps(record)


def _one_line(capsys, *names: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err and "panicked" not in err, err
    assert "stack backtrace" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], err
    return lines[0]


def test_import_refuses_a_pre_tokenizer_that_backtracks(imported_gpt2, tmp_path, capsys):
    d = tmp_path / "src"
    shutil.copytree(imported_gpt2["src"], d)
    (d / "tokenizer.json").write_text(_backtracking((d / "tokenizer.json").read_text()))
    assert run(["import", str(d), "--out", str(tmp_path / "out")]) == 2
    assert "regular expression" in _one_line(capsys, "tokenizer.json")
    assert not (tmp_path / "out").exists()


def _stored_backtracking(imported_gpt2, tmp_path):
    """The imported checkpoint with its stored tokenizer.json's pre-tokenizer replaced: what an envelope made
    by hand, or by an attncomp before the import-time check, may hold."""
    payload = torch.load(imported_gpt2["ckpt"], weights_only=True)
    record = json.loads(payload["tokenizers"]["src"].numpy().tobytes())
    record["tokenizer"] = _backtracking(record["tokenizer"])
    stored = torch.frombuffer(bytearray(json.dumps(record).encode()), dtype=torch.uint8)
    payload["tokenizers"] = {"src": stored, "tgt": stored.clone()}
    torch.save(payload, tmp_path / "crafted.pt")
    (tmp_path / "long.txt").write_text(LONG_RUN + "\n")
    return tmp_path / "crafted.pt", tmp_path / "long.txt"


def test_a_panic_at_use_is_one_line(imported_gpt2, tmp_path, capsys):
    ckpt, text = _stored_backtracking(imported_gpt2, tmp_path)
    assert run(["translate", str(ckpt), "--input", str(text), "--device", "cpu",
                "--output", str(tmp_path / "out.txt")]) == 2
    assert "tokenizer" in _one_line(capsys)
    assert not (tmp_path / "out.txt").exists()
    assert run(["eval", str(ckpt), "--src", str(text), "--ref", str(text), "--device", "cpu"]) == 2
    _one_line(capsys)
    (tmp_path / "mono.xx").write_text(("the quick fox\n" * 20) + LONG_RUN + "\n")
    assert run(["data", "prepare", "--train", str(tmp_path / "mono"), "--lang", "xx", "--tokenizers", str(ckpt),
                "--out", str(tmp_path / "prepared"), "--workers", "1"]) == 2
    _one_line(capsys)
    assert not (tmp_path / "prepared").exists()


def test_native_maps_a_base_exception_but_passes_ctrl_c_and_exits():
    class PanicException(BaseException):  # pyo3_runtime's is a BaseException too
        pass

    with pytest.raises(DataError, match=r"^tokenizer\.json: boom; fix it$"):
        with native("tokenizer.json", "fix it"):
            raise PanicException("boom\nstack backtrace: ...")
    for passed in (KeyboardInterrupt(), SystemExit(3)):
        with pytest.raises(type(passed)):
            with native("tokenizer.json"):
                raise passed
