"""Hostile spec names, paths and comments never reach generated code: each build writes a module that
starts with the fixed header, imports, runs nothing else, and equals the compiled model; `build -o`
failures are one line."""

from __future__ import annotations

import builtins
import importlib.util
import os
import re
from pathlib import Path

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.cli.main import run
from attncomp.codegen.render import HEADER
from attncomp.errors import UsageError
from attncomp.ir import nodes
from tests.helpers import batch

PRINTED_CLASS = re.compile(r"(Encoder|Decoder)?(Layer)?(SelfAttention|CausalSelfAttention|CrossAttention|FeedForward|"
                           r"PredictionHead)?\d*")
MODEL = "model m {{ d_model = 16 heads = 2 d_ff = 32 vocab = shared(64) encoder {{ layers = 1 }} decoder {{ layers = 1 }} }}\n"


def payloads(marker: Path) -> list[str]:
    """Comment lines that run code if anything turns their escapes or odd characters into line ends."""
    touch = f'__import__("pathlib").Path({str(marker)!r}).touch()'
    flag = '__import__("builtins").__dict__.__setitem__("ATTNCOMP_PWNED", 1)'
    return [
        "# -*- coding: raw_unicode_escape -*-",
        "# coding=unicode_escape",
        f"# \\u000a{touch}",
        f"# \\u000d{flag}",
        f"# \\x0a{touch}  \\n{flag}",
        f"#\u2028{touch}",
        f"#\x85{flag}",
        f"#\f{touch}",
        f"#\x1c{flag}\x1d{touch}\x1e{flag}\v{touch}",
        "# \"\"\" ''' \\ ) ] } {{ }} {% raw %} \\",
    ]


NAMES = [
    "x(coding=raw_unicode_escape).attn",
    "coding=unicode_escape/m.attn",
    "coding:utf-7/coding=raw_unicode_escape.attn",
    "q'\"\\.attn",
    "a\nb.attn",
    "c\u2028d\x85e\ff.attn",
    "__import__('os').attn",
]


def hostile_specs(tmp_path: Path, marker: Path) -> list[Path]:
    text = "\n".join(payloads(marker)) + "\n" + MODEL.format() + "# \\u000a" + str(marker) + "\n"
    paths = []
    for name in NAMES:
        path = tmp_path / "specs_in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def import_generated(path: Path, index: int):
    spec = importlib.util.spec_from_file_location(f"attncomp_hostile_{index}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_equals_compiled(module, compiled) -> None:
    generated = module.Model().double().eval()
    generated.load_state_dict(compiled.state_dict())
    src, tgt = batch(compiled.spec)
    assert (generated(src, tgt) - compiled(src, tgt)).abs().max() < 1e-9


def test_hostile_names_paths_and_comments_write_inert_modules(tmp_path, capsys):
    marker = tmp_path / "pwned"
    specs = hostile_specs(tmp_path, marker)
    out = tmp_path / "out"
    assert run(["build", *map(str, specs), "-o", str(out)]) == 0
    capsys.readouterr()
    spec = ir.load(specs[0])  # every file holds the same text: one compiled model for all
    assert {ir.spec_hash(ir.load(p)) for p in specs} == {ir.spec_hash(spec)}
    compiled = attncomp.compile(spec, dtype=torch.float64).eval()
    for index, spec_path in enumerate(specs):
        target = out / f"{spec_path.stem}.py"
        text = target.read_text(encoding="utf-8")
        assert text.startswith(HEADER)
        assert all(c.isprintable() or c == "\n" for c in text)
        module = import_generated(target, index)
        assert not marker.exists(), f"{target} ran code from its spec"
        assert not hasattr(builtins, "ATTNCOMP_PWNED"), f"{target} ran code from its spec"
        names = {n for n in vars(module) if not n.startswith("__")}  # the printer's fixed vocabulary only
        assert {n for n in names if not PRINTED_CLASS.fullmatch(n)} <= {
            "math", "torch", "F", "nn", "Tensor", "ops", "Model", "NamedTuple", "Optional", "KV", "LayerCache",
            "DecodingCache"}
        assert_equals_compiled(module, compiled)


def test_the_spec_path_is_written_only_as_a_python_literal(tmp_path, capsys):
    specs = hostile_specs(tmp_path, tmp_path / "pwned")
    for spec_path in specs:
        assert run(["build", str(spec_path), "--emit", "py"]) == 0
        text = capsys.readouterr().out
        assert text.startswith(HEADER)
        third, fourth = text.splitlines()[2:4]
        assert third.startswith("# attncomp ") and "spec sha256" in third
        assert fourth == f"# Spec file (as a Python string): {ascii_safe(repr(str(spec_path)))}"


def ascii_safe(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def test_model_names_are_ascii_identifiers():
    for name in ("é", "m\u2028", "a b", "class", "x" * 65, "1m"):
        with pytest.raises(ValueError):
            nodes.ModelSpec(name=name)


# --- `build -o`: every failure to write is one line --------------------------------------------

TINY = str(Path(__file__).resolve().parents[2] / "specs" / "examples" / "tiny.attn")


def build_error(out: Path, capsys) -> str:
    assert run(["build", TINY, "-o", str(out)]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


def test_build_into_a_missing_folder_creates_it(tmp_path, capsys):
    out = tmp_path / "new" / "deeper"
    assert run(["build", TINY, "-o", str(out)]) == 0
    assert (out / "tiny.py").read_text().startswith(HEADER)


def test_build_with_a_file_in_the_way_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert "a file is in the way" in build_error(tmp_path / "file", capsys)
    assert "a file is in the way" in build_error(tmp_path / "file" / "below", capsys)


def test_build_with_a_directory_in_the_way_is_one_line(tmp_path, capsys):
    (tmp_path / "tiny.py").mkdir()
    assert "a directory is in the way" in build_error(tmp_path, capsys)


def test_build_never_replaces_a_pipe_or_device(tmp_path, capsys):
    os.mkfifo(tmp_path / "tiny.py")
    assert "not a regular file" in build_error(tmp_path, capsys)
    assert not (tmp_path / "tiny.py").is_file()


def test_build_without_permission_is_one_line(tmp_path, capsys, monkeypatch):
    def refuse(*args):
        raise PermissionError(13, "Permission denied", str(args[1]))

    monkeypatch.setattr(os, "replace", refuse)
    assert "permission denied" in build_error(tmp_path, capsys)
    assert not [p for p in tmp_path.iterdir()], "the temporary file was left behind"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_build_into_a_read_only_folder_is_one_line(tmp_path, capsys):
    tmp_path.chmod(0o500)
    try:
        assert "permission denied" in build_error(tmp_path / "sub", capsys)
    finally:
        tmp_path.chmod(0o700)


@pytest.mark.parametrize("name", ["é(coding=raw_unicode_escape).attn", "class.attn", "1x\u2028y.attn", "z" * 90 + ".attn"])
def test_a_model_named_after_a_hostile_file_gets_an_ascii_name(name, tmp_path):
    path = tmp_path / name
    path.write_text(MODEL.format().replace("model m", "model"))
    spec = ir.load(path)
    assert spec.model.name.isascii() and spec.model.name.isidentifier() and len(spec.model.name) <= 64
    from attncomp.codegen import render

    assert render(attncomp.compile(spec, device="meta"), str(path)).startswith(HEADER)
