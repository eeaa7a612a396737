"""`attncomp import` of the newest decoder families (GPT-J, BLOOM, OPT) with crafted config.json values and
weights. Before: GPT-J with n_head 0 was an internal error (ZeroDivisionError in its rotary refusal), with an
n_head that does not divide n_embd (its spec takes d_k = n_embd // n_head) a RuntimeError in the per-head
permutation of q_proj and k_proj; a q_proj/k_proj (GPT-J) or query_key_value (BLOOM) of the wrong shape, a
scalar or an empty tensor, an internal error in the weight transforms (RuntimeError, IndexError: exit 70).
Now each is one error line and exit 2, and nothing is written. Each test failed on the code before the fix."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attncomp.cli.main import run

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")
from tests.interop import hf_models  # noqa: E402

@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Tiny float32 GPT-J, BLOOM and OPT directories (save_pretrained's layout), made once."""
    root = tmp_path_factory.mktemp("decoders")
    return {family: hf_models.save(hf_models.model(family, dtype=torch.float32), root / family)
            for family in ("gptj", "bloom", "opt")}


def one_error(argv, capsys, monkeypatch, tmp_path) -> str:
    monkeypatch.setenv("ATTNCOMP_TRACEBACK_DIR", str(tmp_path))
    code = run(argv)
    err = capsys.readouterr().err
    assert code == 2 and "internal error" not in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    return err


def copy(saved, family, tmp_path):
    return shutil.copytree(saved[family], tmp_path / family)


@pytest.mark.parametrize("n_head", [0, 3, -4])
def test_gptj_heads_that_do_not_split_n_embd(n_head, saved, tmp_path, capsys, monkeypatch):
    directory = copy(saved, "gptj", tmp_path)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "n_head": n_head}))
    err = one_error(["import", str(directory), "--out", str(tmp_path / "out")], capsys, monkeypatch, tmp_path)
    assert f"n_head {n_head} does not split n_embd 32 into heads" in err and not (tmp_path / "out").exists()


def _rows_plus_one(t):
    return torch.cat([t, t[:1]])


MUTATIONS = {"a row more": _rows_plus_one, "a scalar": lambda t: t.flatten()[0].clone(),
             "empty": lambda t: t[:0].contiguous()}
TENSORS = {"gptj": ("transformer.h.0.attn.q_proj.weight", "transformer.h.0.attn.k_proj.weight"),
           "bloom": ("transformer.h.0.self_attention.query_key_value.weight",
                     "transformer.h.0.self_attention.query_key_value.bias")}


# (BLOOM's empty query_key_value was already refused by the shape check after the split)
CASES = [(f, n, m) for f, names in TENSORS.items() for n in names for m in MUTATIONS
         if not (f == "bloom" and m == "empty")]


@pytest.mark.parametrize("family,name,mutation", CASES)
def test_a_folded_tensor_of_another_shape_is_one_error(family, name, mutation, saved, tmp_path, capsys,
                                                        monkeypatch):
    directory = copy(saved, family, tmp_path)
    state = safetensors_torch.load_file(str(directory / "model.safetensors"))
    state[name] = MUTATIONS[mutation](state[name])
    safetensors_torch.save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    err = one_error(["import", str(directory), "--out", str(tmp_path / "out")], capsys, monkeypatch, tmp_path)
    assert "weights do not fit the spec of its config" in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
@pytest.mark.parametrize("empty", [False, True])
def test_an_import_stopped_while_writing_leaves_no_partial_directory(failure, empty, saved, tmp_path, capsys,
                                                                     monkeypatch):
    """checkpoint.pt failing after model.attn was written (a full disk, Ctrl-C): before, --out kept model.attn
    alone, and the import run again was refused (`exists and is not an empty directory`)."""
    from attncomp import checkpoint

    out = tmp_path / "out"
    if empty:
        out.mkdir()
    real = checkpoint.save

    def failing(*args, **kwargs):
        raise failure

    monkeypatch.setattr(checkpoint, "save", failing)
    monkeypatch.setenv("ATTNCOMP_TRACEBACK_DIR", str(tmp_path))
    assert run(["import", str(saved["opt"]), "--out", str(out)]) == (130 if isinstance(failure, KeyboardInterrupt)
                                                                     else 2)
    assert "Traceback" not in capsys.readouterr().err
    assert (not out.exists() or not any(out.iterdir())) and [p.name for p in tmp_path.iterdir()] == (
        ["out"] if empty else [])
    monkeypatch.setattr(checkpoint, "save", real)
    assert run(["import", str(saved["opt"]), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "model.attn"]
