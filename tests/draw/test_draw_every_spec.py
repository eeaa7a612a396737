"""`attncomp draw` of every shipped spec (the slow tier: about a second each): the picture is made, its SVG
parses, and it shows every stack, layer kind and sub-layer of the spec (tests/draw/svg.py); and the pictures
in docs/ are what the commands beside them draw."""

from __future__ import annotations

import re
import shlex

import pytest

from attncomp import ir
from attncomp.draw.picture import spec_picture
from attncomp.plot.figures import save_figure
from attncomp.cli.main import run
from tests.conftest import ROOT, SPECS, spec_id
from tests.draw.svg import check_layers, elements, text


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_every_shipped_spec_draws(path, tmp_path):
    spec = ir.load(path)
    out = tmp_path / "picture.svg"
    save_figure(spec_picture(spec), out, salt="test")
    check_layers(elements(out), spec)


DOC_COMMAND = re.compile(r"`attncomp (draw [^`]+ -o (docs/pictures/[\w.-]+\.svg))`")


def _doc_commands() -> list[tuple[str, str]]:
    found = {}
    for doc in (ROOT / "README.md", ROOT / "docs" / "pictures.md"):
        found.update((out, command) for command, out in DOC_COMMAND.findall(doc.read_text(encoding="utf-8")))
    return sorted(found.items())


def test_docs_show_every_committed_picture_with_its_command():
    shown = {out for out, _ in _doc_commands()}
    assert shown == {str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "pictures").glob("*.svg")}
    assert {"docs/pictures/base.svg", "docs/pictures/big.svg", "docs/pictures/modernbert.svg"} <= shown


@pytest.mark.parametrize("out, command", _doc_commands(), ids=[o for o, _ in _doc_commands()])
def test_docs_pictures_are_what_their_commands_draw(out, command, tmp_path, monkeypatch):
    """The committed picture holds what the command beside it draws today: every element and its text."""
    monkeypatch.chdir(ROOT)
    fresh = tmp_path / "fresh.svg"
    assert run([*shlex.split(command.rsplit(" -o ", 1)[0]), "-o", str(fresh)]) == 0
    committed, made = elements(ROOT / out), elements(fresh)
    assert {i: text(e) for i, e in committed.items() if ":" in i or i == "title"} == \
        {i: text(e) for i, e in made.items() if ":" in i or i == "title"}
