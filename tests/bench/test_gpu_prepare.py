"""bench/gpu_prepare.sh makes what bench/gpu_session.sh reads by default on the GPU machine: the paths agree, and
both scripts parse (the prepared data itself is made in seconds, but from ../shared, outside the repository)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PREPARE = (ROOT / "bench/gpu_prepare.sh").read_text()
SESSION = (ROOT / "bench/gpu_session.sh").read_text()


def test_both_scripts_parse():
    for script in ("bench/gpu_prepare.sh", "bench/gpu_session.sh"):
        assert subprocess.run(["bash", "-n", str(ROOT / script)]).returncode == 0, script


def test_the_session_reads_by_default_what_prepare_makes():
    defaults = dict(re.findall(r"\$\{(DATA|SWEEP_DATA|TEST_SRC|TEST_REF):-([^}]+)\}", SESSION))
    assert set(defaults) == {"DATA", "SWEEP_DATA", "TEST_SRC", "TEST_REF"}
    for name in ("DATA", "SWEEP_DATA"):
        assert f"--out {defaults[name]} " in PREPARE, (name, defaults[name])
    for name in ("TEST_SRC", "TEST_REF"):
        folder, _, file = defaults[name].rpartition("/")
        assert file in ("test.en", "test.de") and f'"{folder}/test.$lang"' in PREPARE, defaults[name]


def test_the_wheels_cover_what_the_gpu_image_lacks_and_git_ignores_the_carry():
    wheels = re.search(r"for name in ([^;]+); do", PREPARE).group(1).split()
    assert {"pydantic", "pydantic-core", "lark", "torchao"} <= set(wheels)
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "/.whl/" in ignored and "/.devdata/" in ignored
