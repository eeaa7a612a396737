"""Every shipped spec's build report names, per attention, the kernel, mask and SDPA backends it named when
tests/golden/kernels.json was written (from the report of 218ebbd's successor f668ae4, before the attention's
parts became one description and the kernel one rule): a refactor of fuse_attention or the report keeps them."""

from __future__ import annotations

import json

import pytest

import attncomp
from attncomp.report import attention_report
from tests.conftest import ROOT

PINS = json.loads((ROOT / "tests/golden/kernels.json").read_text(encoding="utf-8"))


def test_the_pins_cover_every_shipped_spec():
    assert sorted(PINS) == sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("specs/**/*.attn"))


@pytest.mark.parametrize("path", sorted(PINS))
def test_the_report_names_the_pinned_kernel_per_attention(path):
    rows = attention_report(attncomp.compile(ROOT / path, device="meta"))
    got = [[a.site, a.layers, a.kernel.split(":")[0], a.mask, a.backends] for a in rows]
    assert got == PINS[path]
