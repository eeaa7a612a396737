"""Export directories (issue 23, items 2 to 4): a torch.export directory is code and loads only when
trusted, from files inside it; no reader of an export hangs on a pipe or a device, takes JSON of the wrong
shape, or builds a spec over the size limit. Each test failed on the behaviour before the fix."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from attncomp import ir
from attncomp.checkpoint import CheckpointError
from attncomp.errors import AttncompError, UsageError
from attncomp.interop import torch_export
from tests.conftest import ROOT

LEGACY = ROOT / "tests/fixtures/legacy"


def copy(name: str, dest: Path) -> Path:
    shutil.copytree(LEGACY / name, dest)
    return dest


def edit_meta(directory: Path, **changes) -> None:
    meta = json.loads((directory / "attncomp.json").read_text())
    meta.update(changes)
    (directory / "attncomp.json").write_text(json.dumps(meta))


def test_a_torch_export_directory_loads_only_when_the_caller_trusts_it(tmp_path):
    with pytest.raises(UsageError, match="loading one runs code .* trusted=True"):
        torch_export.load(LEGACY / "torch-export")
    assert torch_export.load(LEGACY / "torch-export", trusted=True).spec


@pytest.mark.parametrize("program", ["/etc/passwd", "../decode_step.pt2", "sub/decode_step.pt2", "..", "", 7])
def test_programs_are_files_inside_the_directory(tmp_path, program):
    directory = copy("torch-export", tmp_path / "exp")
    edit_meta(directory, programs={"encode": "encode.pt2", "decode_step": program})
    with pytest.raises(CheckpointError, match="programs"):
        torch_export.load(directory, trusted=True)


def test_a_program_linked_to_a_file_elsewhere_is_refused(tmp_path):
    directory = copy("torch-export", tmp_path / "exp")
    shutil.move(directory / "decode_step.pt2", tmp_path / "elsewhere.pt2")
    (directory / "decode_step.pt2").symlink_to(tmp_path / "elsewhere.pt2")
    with pytest.raises(CheckpointError, match="leads outside"):
        torch_export.load(directory, trusted=True)


@pytest.mark.parametrize("meta", ["[" * 100_000, "[]", '{"format": "attncomp-torch-export", "version": NaN}',
                                  '{"format": "attncomp-torch-export", "version": 1, "spec_hash": 5, "programs": {}}',
                                  '{"format": "attncomp-torch-export", "version": 1, "spec_hash": "x", "programs": []}'])
def test_a_malformed_metadata_file_is_one_error(tmp_path, meta):
    directory = copy("torch-export", tmp_path / "exp")
    (directory / "attncomp.json").write_text(meta)
    with pytest.raises(CheckpointError):
        torch_export.load(directory, trusted=True)


def replace_with(path: Path, kind: str) -> None:
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
@pytest.mark.parametrize("name", ["attncomp.json", "spec.attn", "src.model", "decode_step.pt2"])
def test_a_pipe_or_device_in_a_torch_export_is_refused_unread(tmp_path, name, kind):
    directory = copy("torch-export", tmp_path / "exp")
    replace_with(directory / name, kind)
    # a link to a device leads outside the directory, which is refused before the file's kind is asked
    with pytest.raises(CheckpointError, match="not a regular file|leads outside"):
        torch_export.load(directory, trusted=True)


# every file of an export as a pipe and as a device, each read by one of the three commands that read
# exports; all three read them through attncomp.loading.read_trained (bench/hostile.py runs every pairing)
SAFETENSORS_CASES = [(name, kind, ("translate", "eval", "prepare")[i % 3]) for i, (name, kind) in enumerate(
    (name, kind) for name in ("attncomp.json", "spec.attn", "src.model", "tgt.model", "model.safetensors")
    for kind in ("fifo", "dev_zero"))]


@pytest.mark.parametrize("name, kind, command", SAFETENSORS_CASES)
def test_a_pipe_or_device_in_a_safetensors_export_is_refused_unread(tmp_path, sandbox, name, kind, command):
    directory = copy("safetensors", tmp_path / "exp")
    replace_with(directory / name, kind)
    text = tmp_path / "in.txt"
    text.write_text("a b c\n")
    argv = {"translate": ["translate", str(directory), "--input", str(text)],
            "eval": ["eval", str(directory), "--src", str(text), "--ref", str(text)],
            "prepare": ["data", "prepare", "--train", str(tmp_path / "in"), "--src", "txt", "--tgt", "txt",
                        "--tokenizers", str(directory), "--out", str(tmp_path / "data")]}[command]
    outcome = sandbox.run(argv, timeout=60)
    assert not outcome.hung and outcome.code in (1, 2) and not outcome.problems(), outcome.summary()


def test_the_size_limit_holds_for_a_spec_stored_in_an_export(tmp_path, sandbox):
    directory = copy("safetensors", tmp_path / "exp")
    huge = ir.to_text(ir.load(str(ROOT / "specs/examples/tiny.attn"),
                              ["model.layers=1024", "model.d_model=65536", "model.d_ff=65536"]))
    (directory / "spec.attn").write_text(huge)
    edit_meta(directory, spec_hash=hashlib.sha256(huge.encode()).hexdigest())
    text = tmp_path / "in.txt"
    text.write_text("a b c\n")
    outcome = sandbox.run(["translate", str(directory), "--input", str(text)], timeout=60)
    assert outcome.code == 2 and "over the limit" in outcome.stderr and not outcome.problems(), outcome.summary()


def test_an_empty_tokenizer_model_is_one_error(tmp_path):
    from attncomp.loading import load_checkpoint

    directory = copy("safetensors", tmp_path / "exp")
    (directory / "src.model").write_bytes(b"")
    with pytest.raises(AttncompError, match="empty"):
        load_checkpoint(directory)
