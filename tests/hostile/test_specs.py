"""Hostile specs: what a spec may reach (regular files only, size-limited, no `extends` in a stored
spec), right locations whatever the line-break characters, and empty directories refused."""

from __future__ import annotations

import os
import re
import signal
import stat
from pathlib import Path

import pytest

from attncomp import ir
from attncomp.cli.main import run
from attncomp.errors import SpecError
from attncomp.syntax import load as spec_load
from tests.conftest import ROOT

TINY = "model m { encoder { layers = 1 } decoder { layers = 1 } d_model = 16 heads = 2 d_ff = 32 vocab = shared(64) }\n"


@pytest.fixture
def deadline():
    """Fail instead of hanging: SIGALRM after 10 s raises in the test."""
    def expired(signum, frame):
        raise TimeoutError("hung: a spec read blocked")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def check(path, capsys) -> tuple[int, str]:
    code = run(["check", str(path)])
    return code, capsys.readouterr().err


def extending(tmp_path: Path, target: str) -> Path:
    spec = tmp_path / "top.attn"
    spec.write_text(f'extends "{target}"\nmodel m {{ }}\n')
    return spec


def test_extends_of_a_named_pipe_is_refused_without_hanging(tmp_path, capsys, deadline):
    os.mkfifo(tmp_path / "pipe")
    code, err = check(extending(tmp_path, "pipe"), capsys)
    assert code == 2 and "top.attn:1:9: error:" in err and "not a regular file" in err


def test_a_named_pipe_as_the_spec_itself_is_refused(tmp_path, capsys, deadline):
    os.mkfifo(tmp_path / "pipe.attn")
    code, err = check(tmp_path / "pipe.attn", capsys)
    assert code == 2 and "not a regular file" in err


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_extends_of_a_device_is_refused_before_reading(device, tmp_path, capsys, deadline):
    if not os.path.exists(device) or not stat.S_ISCHR(os.stat(device).st_mode):
        pytest.skip(f"no {device} device on this machine")
    code, err = check(extending(tmp_path, device), capsys)
    assert code == 2 and "not a regular file" in err and err.count("\n") <= 3


def test_size_limit_holds_on_the_bytes_read_not_the_reported_size(tmp_path, capsys, monkeypatch):
    # /proc files are regular files that report st_size 0 but have content
    proc = Path("/proc/self/status")
    if not proc.exists() or proc.stat().st_size != 0:
        pytest.skip("needs a regular file whose reported size is 0")
    monkeypatch.setattr(spec_load, "MAX_BYTES", 64)
    code, err = check(extending(tmp_path, str(proc)), capsys)
    assert code == 2 and "larger than 64 bytes" in err


def test_a_large_spec_file_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(spec_load, "MAX_BYTES", 100)
    big = tmp_path / "big.attn"
    big.write_text(TINY + "#" * 200 + "\n")
    code, err = check(big, capsys)
    assert code == 2 and "larger than 100 bytes" in err


@pytest.mark.parametrize("limit", [1 << 20, 100])
def test_a_checkpoint_given_as_a_spec_is_named_a_checkpoint(tmp_path, capsys, monkeypatch, limit):
    """attncomp train runs/x/checkpoint_avg.pt: a checkpoint, small or over the size limit, said to be one (not
    "the file is not UTF-8 text" or "larger than 1048576 bytes")."""
    monkeypatch.setattr(spec_load, "MAX_BYTES", limit)
    (tmp_path / "c.pt").write_bytes(b"PK\x03\x04" + bytes(200))
    code, err = check(tmp_path / "c.pt", capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "c.pt is a checkpoint (a file torch.save wrote), not a spec: `attncomp translate` decodes with it" in err


def test_nul_byte_in_an_extends_path_is_a_located_error(tmp_path, capsys):
    spec = tmp_path / "nul.attn"
    spec.write_bytes(b'extends "base\x00.attn"\nmodel m { }\n')
    code, err = check(spec, capsys)
    assert code == 2 and "nul.attn:1:9: error:" in err and "NUL byte" in err and "\x00" not in err


def test_nul_byte_in_a_spec_path_from_python_is_a_clean_error():
    with pytest.raises(SpecError, match="NUL byte"):
        ir.load(Path("specs/base\x00.attn"))


@pytest.mark.parametrize("name", ["x" * 5000, "/".join(["d" * 200] * 30) + "/b.attn"])
def test_over_long_extends_paths_are_located_errors(name, tmp_path, capsys):
    code, err = check(extending(tmp_path, name), capsys)
    assert code == 2 and "top.attn:1:9: error:" in err and "Traceback" not in err


def test_over_long_spec_path_is_one_clean_line(capsys):
    code, err = check("y" * 5000 + ".attn", capsys)
    assert code == 2 and "too long" in err and len(err.strip().splitlines()) == 1


def test_a_stored_spec_never_follows_extends(tmp_path):
    secret = tmp_path / "secret.attn"
    secret.write_text("model s { }  # THE-SECRET-LINE\n")
    stored = f'extends "{secret}"\nmodel m {{ }}\n'
    with pytest.raises(SpecError, match="must be flat") as raised:
        ir.load_flat(stored, "ckpt.pt (its stored spec)")
    assert "THE-SECRET-LINE" not in raised.value.format()
    assert str(raised.value).startswith("ckpt.pt (its stored spec):1:")


def test_a_stored_spec_is_parsed_alone_and_takes_overrides():
    text = ir.to_text(ir.load(ROOT / "specs/examples/tiny.attn"))
    spec = ir.load_flat(text, "stored", ["model.heads=2"])
    assert spec.model.encoder.heads == 2 and ir.to_text(ir.load_flat(text, "stored")) == text


# --- locations: one definition of a line for the parser and the error printer ------------------

NOT_LINE_BREAKS = ["\u2028", "\u2029", "\x85", "\f", "\x1c", "\x1d", "\x1e", "\v"]


def error_of(text: str) -> SpecError:
    with pytest.raises(SpecError) as raised:
        ir.load(text)
    return raised.value


def caret_column(err: SpecError) -> tuple[str, int]:
    """The printed source line and the column (1-based) the caret points at."""
    _, line, marks = err.format().splitlines()[:3]
    return line[4:], marks.index("^") - 4 + 1


@pytest.mark.parametrize("char", NOT_LINE_BREAKS, ids=repr)
def test_a_character_in_a_comment_does_not_move_the_error(char):
    text = f"# a comment {char} with text after it\nmodel m {{\n  d_model == 16\n}}\n"
    err = error_of(text)
    assert (err.span.line, err.span.column) == (3, 12)
    shown, column = caret_column(err)
    assert shown == "  d_model == 16" and column == 12


@pytest.mark.parametrize("char", [c for c in NOT_LINE_BREAKS if c != "\f"], ids=repr)
def test_the_character_outside_a_comment_is_the_error_at_its_place(char):
    err = error_of(f"model m {{\n  d_model = 16 {char} heads = 2\n}}\n")
    assert (err.span.line, err.span.column) == (2, 16)
    assert repr(char) in err.message
    shown, column = caret_column(err)
    assert column == 16 and len(shown) == len("  d_model = 16 X heads = 2") and shown.isprintable()


def test_form_feed_is_whitespace_on_its_line():
    err = error_of("model m {\n  d_model = 16 \f heads == 2\n}\n")
    assert (err.span.line, err.span.column) == (2, 25)
    assert caret_column(err)[1] == 25


@pytest.mark.parametrize("newline", ["\r", "\r\n", "\n"], ids=repr)
def test_every_line_ending_counts_lines_alike(newline):
    text = newline.join(["# comment", "model m {", "  heads = 2", "  d_ff = = 3", "}", ""])
    err = error_of(text)
    assert (err.span.line, err.span.column) == (4, 10)
    assert caret_column(err) == ("  d_ff = = 3", 10)


def test_a_comment_ends_at_a_lone_carriage_return():
    spec = ir.load("# comment\rmodel m { d_model = 16 heads = 2 d_ff = 32 vocab = shared(64) decoder { layers = 1 } }\r")
    assert spec.model.decoder.layers == 1 and spec.model.d_model == 16


def test_undecodable_byte_after_carriage_returns_is_located(tmp_path, capsys):
    path = tmp_path / "latin1.attn"
    path.write_bytes(b"model m {\r  d_model = 16\r  # caf\xe9\r}\r")
    code, err = check(path, capsys)
    assert code == 2 and "latin1.attn:3:8: error:" in err


# --- directories and globs without specs ---------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "build"])
def test_a_directory_without_specs_is_an_error(command, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a spec")
    assert run([command, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no spec files" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["check", "build"])
def test_a_glob_without_matches_is_an_error(command, tmp_path, capsys):
    assert run([command, str(tmp_path / "*.attn")]) == 2
    assert "no spec files match" in capsys.readouterr().err


def test_a_glob_through_a_symlink_loop_checks_each_spec_once(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "up").symlink_to("..")
    (tmp_path / "a" / "m.attn").write_text(TINY)
    assert run(["check", str(tmp_path / "**" / "*.attn")]) == 0
    assert capsys.readouterr().out.count("ok  ") == 1


@pytest.mark.parametrize("text", ['model m { d_model = "\x1b[2J\u2028x" }', 'model m { } "\x1b[2J\x85"',
                                  'extends "a\x1b]0;t\x07\x85.attn"\nmodel m { }'])
def test_error_messages_escape_terminal_controls_and_line_breaks(text):
    shown = error_of(text).format()
    assert all(c.isprintable() or c == "\n" for c in shown)
    assert len(shown.splitlines()) == 3


LAYER = ("model m {{\n  d_model = 32  heads = 4  vocab = shared(64)  encoder = none\n"
         "  decoder {{ layers = 4  norm = pre\n    {}\n  }}\n}}\n")
HOSTILE_LAYERS = [
    "block = sequential(" + ", ".join(["attention"] * 5000) + ")",  # a huge list: refused at its 9th item
    "block = sequential(attention(attention(attention(ffn))))",  # nested sub-layers: not a sub-layer's argument
    "block = sequential(attention, ffn(norm = sequential(attention)))",
    "block = sequential(attention, ffn)(ffn)",
    "block = sequential(attention, , ffn)",
    "block = sequential(attention, ffn(scale = 1e309))",
    "block = sequential(attention, ffn(scale = -1))",
    "block = parallel(attention, attention, norms = 3)",
    "block = parallel(attention(norm = post, scale = 1e308), ffn(norm = none))",  # post in a parallel sub-layer
    "block = parallel(" + ", ".join(["ffn"] * 9) + ")",
    "block = parallel(attention(norm = parallel), ffn)",
    "layer __init__ { count = 1 }", "layer Self { count = 1 }", "layer forward_ { count = 1 }  layer forward { }",
    "layer import { count = 1  block = sequential(ffn) }",
    "layer a { count = 1 }  " + "  ".join(f"layer b{i} {{ start = 1 }}" for i in range(3)),
    "layer x { every = 1  start = 0  count = 1048576 }",
]


HOSTILE_HEADS = ["dense(normalization = dense)", "dense(normalization = layernorm(normalization = layernorm))",
                 "dense(normalization = rmsnorm(offset = 2))", "dense(normalization = layernorm(gain = false))",
                 "dense(normalization = " + "layernorm(" * 200 + ")" * 200 + ")"]


@pytest.mark.parametrize("head", HOSTILE_HEADS, ids=range(len(HOSTILE_HEADS)))
def test_hostile_head_norms_are_one_located_line_and_exit_2(head, tmp_path, capsys, deadline):
    path = tmp_path / "head.attn"
    path.write_text(f"model m {{\n  vocab = shared(64)  tie = encoder  head = {head}\n  encoder {{ layers = 1 }}\n}}\n")
    code, err = check(path, capsys)
    assert code == 2, err
    assert re.match(r"\S*head\.attn:2:\d+: error: ", err) and "Traceback" not in err, err


@pytest.mark.parametrize("body", HOSTILE_LAYERS, ids=range(len(HOSTILE_LAYERS)))
def test_hostile_layer_structures_are_one_located_line_and_exit_2(body, tmp_path, capsys, deadline):
    path = tmp_path / "layer.attn"
    path.write_text("attncomp 1\n" + LAYER.format(body))
    code, err = check(path, capsys)
    assert code == 2, err
    assert re.match(r"\S*layer\.attn:\d+:\d+: error: ", err) and "Traceback" not in err, err


def test_a_later_language_is_refused_at_its_header(tmp_path, capsys):
    path = tmp_path / "later.attn"
    path.write_text("# a file from the future\nattncomp 99999999999999999999\n" + TINY)
    code, err = check(path, capsys)
    assert code == 2 and re.match(r"\S*later\.attn:2:10: error: this file is written in attncomp language 9", err)
