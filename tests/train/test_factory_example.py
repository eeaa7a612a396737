"""docs/training.md's "Any model: a model factory" example runs as written: the hand-written nn.Module trains
through `attncomp train --model mymodels:make --recipe recipe.attn` (for 3 steps here) on 2 CPU workers and
decodes from Python; the commands that read a spec's checkpoints refuse its checkpoint in one line (exit 1)."""

from __future__ import annotations

import re
import sys

from attncomp.cli.main import run
from tests.conftest import ROOT


def _blocks() -> list[str]:
    text = (ROOT / "docs" / "training.md").read_text()
    section = text[text.index("### Any model: a model factory"):text.index("## Objectives")]
    return re.findall(r"```(?:python)?\n(.*?)```", section, re.S)


def test_the_hand_written_model_example_trains_and_decodes(sample_data, tmp_path, monkeypatch, capsys):
    module, recipe, decoding = _blocks()
    (tmp_path / "mymodels.py").write_text(module)
    (tmp_path / "recipe.attn").write_text(recipe)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sample").symlink_to(sample_data)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "mymodels", raising=False)
    assert run(["train", "--model", "mymodels:make", "--recipe", "recipe.attn", "--data", "data/sample",
                "--procs", "2", "--set", "train.steps=3", "--set", "train.batch=tokens(600)"]) == 0
    assert (tmp_path / "runs" / "make" / "checkpoint_avg.pt").is_file()
    capsys.readouterr()
    exec(compile(decoding, "docs/training.md", "exec"), {})
    printed = capsys.readouterr().out.strip()
    assert printed and len(printed.splitlines()) == 1
    assert run(["translate", "runs/make/checkpoint_avg.pt"]) == 1  # a checkpoint this command cannot use
    err = capsys.readouterr().err
    assert "trained from the model factory mymodels:make, not a spec" in err and "Traceback" not in err
