"""Every file in tests/bad_specs/ must fail with exactly the message in its .err file."""

from __future__ import annotations

from pathlib import Path

import pytest

from attncomp import ir
from attncomp.errors import SpecError
from tests.conftest import check_golden

BAD = Path(__file__).resolve().parent.parent / "bad_specs"
CASES = sorted(BAD.glob("*.attn"))


def test_there_are_many_bad_specs():
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_bad_spec_message(path: Path, monkeypatch):
    monkeypatch.chdir(BAD)  # messages name files relative to the working directory
    with pytest.raises(SpecError) as info:
        ir.load(path.name)
    check_golden(path.with_suffix(".err"), info.value.format() + "\n")
    assert info.value.exit_code == 2
