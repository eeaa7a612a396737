"""The leftovers of issue 10: a source line of 200,000 words, empty pass names, train's size limit, and
control characters in errors that are not spec errors. Each test failed on the behaviour before it."""

from __future__ import annotations

import time

import pytest

from attncomp.cli.main import run
from tests.conftest import ROOT

ESCAPES = "a\x1b[2J\rb\u2028c"  # clear the screen, return to column 0, a line separator


def test_a_200000_word_line_is_cut_to_the_source_cap_and_named(tiny_artifacts, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a\n" + "a " * 200_000 + "\n" + "a\n")
    start = time.monotonic()
    assert run(["translate", str(tiny_artifacts["ckpt"]), "--input", str(tmp_path / "in.txt"), "--output",
                str(tmp_path / "out.txt"), "--device", "cpu", "--max-source-tokens", "6"]) == 0
    assert time.monotonic() - start < 60  # minutes before: 200,000 tokens cut to 1023, then 1033 steps
    assert len((tmp_path / "out.txt").read_text().split("\n")) == 4  # one line per input line, and the last \n
    err = capsys.readouterr().err
    assert "1 line(s) were longer than the model reads and were cut to 6 source tokens (line(s) 2;" in err


def test_the_source_cap_defaults_to_the_longest_pair_that_data_prepare_keeps():
    from attncomp.cli.decode_command import MAX_SOURCE_TOKENS
    from attncomp.cli.main import _parser

    for command in ("translate", "eval"):
        assert _parser().parse_args([command, "x.pt"]).max_source_tokens == MAX_SOURCE_TOKENS == 256


def test_decoding_steps_are_bounded_by_the_source_cap(tiny_artifacts):
    import torch

    from attncomp.loading import load_checkpoint
    from attncomp.decode.translate import Translator
    from attncomp.ir import nodes

    from attncomp.data.tokenizer import tokenizer_of

    model, found = load_checkpoint(tiny_artifacts["ckpt"], device=torch.device("cpu"))
    src, tgt = (tokenizer_of(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt"))
    for max_len in (nodes.Fixed(length=1 << 20), nodes.SrcPlus(offset=1 << 20)):
        translator = Translator(model, src, tgt, beam=1, alpha=0.0, max_len=max_len, max_source_tokens=256)
        assert translator.source_limit() == 256 and translator.output_limit(255) == 512


@pytest.mark.parametrize("passes", [",,,", ",", "fuse_qkv,,canonicalize", " ,fuse_qkv"])
def test_empty_pass_names_are_refused_with_the_known_passes(passes, capsys):
    with pytest.raises(SystemExit) as stop:
        run(["build", "x.attn", "--passes", passes])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--passes: an empty pass name" in err and "canonicalize, fuse_attention, fuse_qkv" in err


def test_train_refuses_a_spec_over_the_size_limit_before_reading_data(tmp_path, capsys):
    spec = tmp_path / "huge.attn"
    spec.write_text(f'extends "{ROOT / "specs/base.attn"}"\n'
                    "model huge { layers = 1024  d_model = 65536  vocab = shared(16777216) }\n")
    argv = ["train", str(spec), "--data", str(tmp_path / "no-data"), "--out", str(tmp_path / "run"), "--procs", "1"]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert "over the limit of 4.0 GiB" in err and "--force" in err and not (tmp_path / "run").exists()
    assert run([*argv, "--force"]) == 2  # past the estimate: the missing data directory is next
    assert "no data directory" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["translate", "{dir}/x.pt", "--device", "cpu"],  # a checkpoint error (TrainingError)
    ["data", "info", "{dir}"],  # a DataError
    ["translate", "x.pt", "--input", "{dir}/missing"],  # argparse's usage error, from cli/args.py
])
def test_errors_escape_control_characters_of_paths(argv, tmp_path, capsys):
    folder = tmp_path / ESCAPES
    folder.mkdir()
    (folder / "x.pt").write_text("not a checkpoint")
    argv = [a.replace("{dir}", str(folder)) for a in argv]
    try:
        code = run(argv)
    except SystemExit as stop:
        code = stop.code
    assert code in (1, 2)
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err and "\u2028" not in err
    assert "a\\x1b[2J\\rb\\u2028c" in err


def test_a_bug_with_control_characters_is_one_escaped_line(monkeypatch, capsys, tmp_path):
    from attncomp.cli import main

    monkeypatch.setenv("ATTNCOMP_TRACEBACK_DIR", str(tmp_path))
    monkeypatch.setattr(main, "_parser", lambda argv=(): _raising_parser(OSError(f"cannot open {ESCAPES}")))
    assert main.run(["check"]) == 70  # a command's word: an unknown one is refused before the parser parses
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "a\\x1b[2J b c" in err  # \r, U+2028: spaces


def _raising_parser(err: Exception):
    class Parser:
        def parse_known_args(self, argv):  # what cli/main.py's _parse calls
            raise err

    return Parser()


def test_a_value_of_100000_digits_is_shortened_in_its_error(tmp_path, capsys):
    (tmp_path / "long.attn").write_text("model x { d_model = " + "9" * 100_000 + " }\n")
    assert run(["check", str(tmp_path / "long.attn")]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert len(first) < 600 and "characters]..." in first and first.endswith("is out of range")


def test_the_corpus_gives_decoding_cases_time_by_the_lines_they_translate(tmp_path):
    """bench/hostile.py judged 77 lines of garbage, decoded to the output bound at ~1 s a line on the
    loaded 2-core machine, a hang at a flat 90 s; blank lines are not decoded, a FIFO is not read."""
    import os

    from bench.hostile_attacks import _decode_limit

    (tmp_path / "garbage").write_bytes(b"\xff\xfe x\n" * 77 + b"\n \n")
    os.mkfifo(tmp_path / "fifo")
    assert _decode_limit(tmp_path / "garbage") == 90 + 2 * 77
    assert _decode_limit(tmp_path / "fifo") == _decode_limit(tmp_path / "missing") == 90


CASE_THREADS = """
import sys
from pathlib import Path

import torch

from bench.hostile import Sandbox

assert torch.get_num_threads() > 1, torch.get_num_threads()  # as the fork server's torch starts: the bug could show
out = Path(sys.argv[1])
print(Sandbox(out).run(["--version"], after=["threads.py"], cwd=out, timeout=60).stdout.strip().splitlines()[-1])
"""


def test_a_corpus_case_runs_torch_on_one_thread(tmp_path):
    """The fork server imported torch before OMP_NUM_THREADS=1 was set: cases decoded on two threads. Run in a
    fresh process without OMP_NUM_THREADS (the suite's workers set it, and one set in this process, or a fork
    server it started, would pass whatever the harness did), so that its fork server's torch starts on two."""
    import os
    import subprocess
    import sys

    if (os.cpu_count() or 1) < 2:
        pytest.skip("torch starts on one thread on a one-core machine")
    (tmp_path / "threads.py").write_text("import torch\nprint(torch.get_num_threads())\n")
    env = {key: value for key, value in os.environ.items()  # tests.conftest, imported there, would set it again
           if key not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTEST_XDIST_WORKER_COUNT")}
    done = subprocess.run([sys.executable, "-c", CASE_THREADS, str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "1"


def test_ctrl_c_while_an_optional_library_loads_is_an_interrupt_not_a_missing_package(monkeypatch):
    """A SIGINT that lands while a compiled extension initialises reaches Python as ImportError('initialization
    failed') caused by the KeyboardInterrupt (seen with ctranslate2 by bench/hostile.py): it is Ctrl-C (exit 130),
    not 'pip install attncomp[interop]'."""
    import importlib

    from attncomp import optional
    from attncomp.errors import UsageError

    def interrupted(name):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as err:
            raise ImportError("initialization failed") from err

    monkeypatch.setattr(importlib, "import_module", interrupted)
    with pytest.raises(KeyboardInterrupt):
        optional.require("ctranslate2.specs", "--format ctranslate2")
    monkeypatch.setattr(importlib, "import_module", lambda name: (_ for _ in ()).throw(ImportError(name)))
    with pytest.raises(UsageError, match="needs the Python package 'ctranslate2.specs'"):
        optional.require("ctranslate2.specs", "--format ctranslate2")
