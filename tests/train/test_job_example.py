"""docs/training.md's "From Python" example runs as written: attncomp.train.run(job) trains, and the
averaged checkpoint loads."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_the_from_python_example_trains_and_loads(sample_data, tmp_path, monkeypatch):
    text = (ROOT / "docs" / "training.md").read_text()
    section = text[text.index("### From Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "data").mkdir()
    (tmp_path / "specs").symlink_to(ROOT / "specs")
    (tmp_path / "data" / "sample").symlink_to(sample_data)
    monkeypatch.chdir(tmp_path)  # the example's paths are relative to the repository's root
    scope: dict = {}
    exec(compile(code, "docs/training.md", "exec"), scope)
    assert scope["averaged"].resolve() == (tmp_path / "runs" / "tiny-py" / "checkpoint_avg.pt").resolve()
    assert scope["model"].spec.model.name == "tiny" and not scope["model"].training
