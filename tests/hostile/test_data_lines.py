"""Issue 43, item 5: data preparation bounds each line and field (attncomp.data.text.MAX_LINE_BYTES) and refuses
one over it with its line number before sentencepiece trains; a lone surrogate in a JSONL field is undecodable
text like any other; a named pipe as a corpus is refused with the reason (corpora are read more than once).
Before, one 100 MB JSONL line took 6 GB and, under a 4 GB limit, aborted with std::bad_alloc after
sentencepiece had trained; a `"\\ud800"` in a JSONL line was a UnicodeEncodeError (exit 70)."""

from __future__ import annotations

import json
import os

import pytest

from attncomp.cli.main import run
from attncomp.data.text import MAX_LINE_BYTES

GOOD = [json.dumps({"src": f"a b c {i}", "tgt": f"d e f {i}"}) for i in range(40)]


def _prepare(source, out, *extra) -> int:
    return run(["data", "prepare", "--train", str(source), "--out", str(out), "--vocab-size", "40",
                "--workers", "1", *extra])


def _one_line(capsys, *names: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    assert "training sentencepiece" not in err, err  # refused before anything long starts
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], err
    return lines[0]


def test_a_jsonl_line_over_the_limit_is_refused_with_its_number(tmp_path, capsys):
    rows = GOOD[:2] + [json.dumps({"src": "x" * (MAX_LINE_BYTES + 10), "tgt": "y"})] + GOOD[2:]
    (tmp_path / "pairs.jsonl").write_text("\n".join(rows) + "\n")
    assert _prepare(tmp_path / "pairs.jsonl", tmp_path / "out", "--src-column", "src", "--tgt-column", "tgt") == 2
    assert f"{MAX_LINE_BYTES:,} bytes" in _one_line(capsys, "pairs.jsonl:3")
    assert not (tmp_path / "out").exists()


def test_a_text_line_over_the_limit_is_refused_with_its_number(tmp_path, capsys):
    lines = [f"a b c {i}" for i in range(40)]
    (tmp_path / "c.xx").write_text("\n".join(lines) + "\n")
    (tmp_path / "c.yy").write_text("\n".join(lines[:5] + ["z" * (MAX_LINE_BYTES + 1)] + lines[6:]) + "\n")
    assert _prepare(tmp_path / "c", tmp_path / "out", "--src", "xx", "--tgt", "yy") == 2
    _one_line(capsys, "c.yy:6")
    assert not (tmp_path / "out").exists()


def test_a_lone_surrogate_in_a_jsonl_field_is_undecodable_text(tmp_path, capsys):
    rows = GOOD[:1] + ['{"src": "a \\ud800 b", "tgt": "c"}'] + GOOD[1:]
    (tmp_path / "pairs.jsonl").write_text("\n".join(rows) + "\n")
    assert _prepare(tmp_path / "pairs.jsonl", tmp_path / "out", "--src-column", "src", "--tgt-column", "tgt") == 2
    assert "surrogate" in _one_line(capsys, "pairs.jsonl:2")
    assert not (tmp_path / "out").exists()


def test_a_parquet_field_over_the_limit_is_refused_with_its_row(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    src = [f"a b c {i}" for i in range(40)]
    tgt = src[:9] + ["z" * (MAX_LINE_BYTES + 1)] + src[10:]
    pq.write_table(pa.table({"src": src, "tgt": tgt}), tmp_path / "pairs.parquet")
    assert _prepare(tmp_path / "pairs.parquet", tmp_path / "out", "--src-column", "src", "--tgt-column", "tgt") == 2
    _one_line(capsys, "pairs.parquet", "row 10")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["prefix", "jsonl"])
def test_a_named_pipe_as_a_corpus_is_refused_with_the_reason(kind, tmp_path, capsys):
    if kind == "prefix":
        os.mkfifo(tmp_path / "c.xx")
        (tmp_path / "c.yy").write_text("a\n")
        argv = [tmp_path / "c", tmp_path / "out", "--src", "xx", "--tgt", "yy"]
    else:
        os.mkfifo(tmp_path / "c.jsonl")
        argv = [tmp_path / "c.jsonl", tmp_path / "out"]
    assert _prepare(*argv) == 2
    assert "more than once" in _one_line(capsys, "c.")
