"""`attncomp translate --stream` and sampling options on the command line (a random-weight model)."""

from __future__ import annotations

import pytest

from attncomp.cli.main import run
from tests.interop.conftest import random_checkpoint


@pytest.fixture(scope="module")
def model(sample_data, tmp_path_factory):
    return random_checkpoint(sample_data, tmp_path_factory.mktemp("ckpt") / "random.pt", sets=("model.layers=1",
                                                                                             "decode.max_len=src + 2"))


def _lines(tmp_path, lines):
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines))
    return str(tmp_path / "in.txt")


def test_stream_answers_what_a_batch_answers(model, tmp_path, capsys):
    src = _lines(tmp_path, ["the dog sees a cat", "", "a cat"])
    assert run(["translate", str(model), "--input", src, "--beam", "2"]) == 0
    batch = capsys.readouterr().out
    assert run(["translate", str(model), "--input", src, "--beam", "2", "--stream"]) == 0
    assert capsys.readouterr().out == batch and len(batch.split("\n")) == 4


def test_stream_with_output_file_is_a_usage_error(model, tmp_path, capsys):
    src = _lines(tmp_path, ["a"])
    assert run(["translate", str(model), "--input", src, "--stream", "--output", str(tmp_path / "o")]) == 2
    assert "--stream writes each translation to stdout" in capsys.readouterr().err


def test_sampling_gives_nbest_samples_with_scores(model, tmp_path, capsys):
    src = _lines(tmp_path, ["the dog sees a cat"])
    args = ["translate", str(model), "--input", src, "--top-k", "5", "--temperature", "0.9", "--nbest", "6"]
    assert run(args + ["--seed", "3"]) == 0  # more samples than the spec's beam (4) is fine
    rows = [line.split("\t") for line in capsys.readouterr().out.strip().split("\n")]
    assert len(rows) == 6 and all(r[0] == "0" for r in rows)
    scores = [float(r[1]) for r in rows]
    assert scores == sorted(scores, reverse=True)
    assert run(args + ["--seed", "3"]) == 0
    assert [line.split("\t") for line in capsys.readouterr().out.strip().split("\n")] == rows


@pytest.mark.parametrize("option", [["--top-p", "0"], ["--top-p", "1.5"], ["--temperature", "0"], ["--top-k", "0"]])
def test_bad_sampling_options_are_usage_errors(model, option, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run(["translate", str(model), *option])
    assert exit_info.value.code == 2


def test_int8_decoding_translates_every_line(model, tmp_path, capsys):
    src = _lines(tmp_path, ["the dog sees a cat", "", "a cat"])
    assert run(["translate", str(model), "--input", src, "--int8", "--device", "cpu"]) == 0
    assert len(capsys.readouterr().out.split("\n")) == 4


def test_stream_from_stdin_takes_bytes_that_are_not_utf8(model, monkeypatch, capsys):
    import io
    import sys

    stdin = io.TextIOWrapper(io.BytesIO(b"a cat\n\xff\xfe the dog\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert run(["translate", str(model), "--beam", "2", "--stream"]) == 0  # was an internal error
    assert len(capsys.readouterr().out.split("\n")) == 3


def test_a_stream_leaves_the_translators_progress_as_it_was(model):
    from attncomp.loading import load_checkpoint
    from attncomp.data.tokenizer import Tokenizer
    from attncomp.decode.translate import Translator

    compiled, found = load_checkpoint(model)
    tok = {side: Tokenizer(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt")}
    decode = compiled.spec.decode
    translator = Translator(compiled, tok["src"], tok["tgt"], 2, decode.length_penalty, decode.max_len)
    assert len(list(translator.translate_stream(["a cat", "the dog"]))) == 2
    assert translator.progress  # was switched off for good before
