"""bench/compile_speed.py keeps working: one timed build of the tiny spec in a child process."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("compile_speed", ROOT / "bench/compile_speed.py")
compile_speed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compile_speed)


def test_slope():
    assert compile_speed.slope([6, 12, 24], [1.0, 1.06, 1.18]) == pytest.approx(0.01)


@pytest.mark.slow  # a child process that imports torch: a few seconds
def test_timed_build_of_tiny():
    got = compile_speed.timed_build("specs/examples/tiny.attn", 1, ["model.layers=1", "expect.params=none"])
    assert got["first"] > 0 and got["best"] == got["first"]
    assert set(got["stages"]) == {"parse", "compile", "report", "of it FLOPs", "meta FLOPs"}
