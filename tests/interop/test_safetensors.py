"""`attncomp export --format safetensors`: a directory that loads with no pickle and translates the same."""

from __future__ import annotations

import pickle

import pytest
import torch

import attncomp
from attncomp.cli.main import run


@pytest.fixture(scope="module")
def exported(random_tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "tiny"
    assert run(["export", str(random_tiny), "--format", "safetensors", "--out", str(out)]) == 0
    return out


def test_export_writes_the_documented_files(exported):
    names = sorted(p.name for p in exported.iterdir())
    assert names == ["attncomp.json", "model.safetensors", "spec.attn", "src.model", "tgt.model"]


def test_loads_without_pickle(exported, random_tiny, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("unpickling while loading a safetensors export")

    monkeypatch.setattr(pickle, "Unpickler", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    model = attncomp.load(exported)
    monkeypatch.undo()
    reference, _ = attncomp.loading.load_checkpoint(random_tiny)
    assert not model.training
    expected = reference.state_dict()
    assert set(model.state_dict()) == set(expected)
    assert all(torch.equal(t, expected[name]) for name, t in model.state_dict().items())


def test_translations_equal_the_checkpoints(exported, random_tiny, sample_data, tmp_path):
    lines = (sample_data / "text/test.src").read_text().splitlines()[:3]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    for source, name in ((random_tiny, "a"), (exported, "b")):
        assert run(["translate", str(source), "--input", str(tmp_path / "in.txt"), "--output",
                    str(tmp_path / name), "--beam", "2"]) == 0
    assert (tmp_path / "a").read_text() == (tmp_path / "b").read_text()


def test_a_damaged_export_is_one_clear_error(exported, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    for path in exported.iterdir():
        (broken / path.name).write_bytes(path.read_bytes())
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    (tmp_path / "in.txt").write_text("a\n")
    assert run(["translate", str(broken), "--input", str(tmp_path / "in.txt")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "model.safetensors is not a readable safetensors file" in err
    assert len(err.splitlines()) == 1
    (broken / "spec.attn").write_text("model x {}\n")
    assert run(["translate", str(broken), "--input", str(tmp_path / "in.txt")]) == 1
    assert "does not match the spec hash" in capsys.readouterr().err


def test_export_of_a_missing_checkpoint_or_to_a_file_is_one_line(random_tiny, tmp_path, capsys):
    assert run(["export", str(tmp_path / "nothing.pt"), "--out", str(tmp_path / "o")]) == 1
    assert "no checkpoint" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert run(["export", str(random_tiny), "--out", str(tmp_path / "file")]) == 2
    assert "not an empty directory" in capsys.readouterr().err


def test_an_export_exports_again(exported, tmp_path):
    """`attncomp export EXPORT_DIR` reads the export back (no pickle) and writes the same files."""
    again = tmp_path / "again"
    assert run(["export", str(exported), "--format", "safetensors", "--out", str(again)]) == 0
    for name in ("model.safetensors", "spec.attn", "src.model", "tgt.model"):
        assert (again / name).read_bytes() == (exported / name).read_bytes()


def test_compiling_an_export_directory_points_to_attncomp_load(exported):
    from attncomp.errors import SpecError

    with pytest.raises(SpecError, match=r"attncomp.load\(path\) loads a trained model"):
        attncomp.compile(exported)
