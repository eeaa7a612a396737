"""`attncomp draw` of every shipped spec (the slow tier: about a second each): the picture is made, its SVG
parses, and it shows every stack, layer kind and sub-layer of the spec (tests/draw/svg.py)."""

from __future__ import annotations

import pytest

from attncomp import ir
from attncomp.draw.picture import spec_picture
from attncomp.plot.figures import save_figure
from tests.conftest import SPECS, spec_id
from tests.draw.svg import check_layers, elements


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_every_shipped_spec_draws(path, tmp_path):
    spec = ir.load(path)
    out = tmp_path / "picture.svg"
    save_figure(spec_picture(spec), out, salt="test")
    check_layers(elements(out), spec)
