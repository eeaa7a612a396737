"""`attncomp plot` and `attncomp page` on a run the tests train (specs/examples/tiny.attn, conftest's
trained_tiny): the curves, and one HTML page that parses, holds its pictures inline and references no
outside file."""

from __future__ import annotations

from html.parser import HTMLParser

from attncomp.cli.main import run
from tests.draw.svg import elements, with_prefix


class Page(HTMLParser):
    """What a page holds: its tags, each attribute that could load something, and the text of its tables."""

    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.links: list[str] = []
        self.cells: list[str] = []
        self._cell = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.links += [value for key, value in attrs if key in ("src", "href", "xlink:href", "data", "action")
                       and value is not None]
        self._cell = tag == "td"

    def handle_data(self, data):
        if self._cell:
            self.cells.append(data)

    def handle_endtag(self, tag):
        self._cell = False


def check_page(path, sentences: int) -> Page:
    text = path.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    page.close()
    assert page.tags[0] == "html" and page.tags.count("svg") == 2  # the curves and the drawing, inline
    assert all(link.startswith("#") for link in page.links), page.links  # nothing outside the file
    assert "url(http" not in text and "@import" not in text and "<script" not in text
    assert text.count("<tr><td>") == sentences  # the validation sentences translated
    return page


def test_plot_and_page_of_a_trained_run(trained_tiny, tmp_path):
    out = tmp_path / "curves.svg"
    assert run(["plot", str(trained_tiny), "-o", str(out)]) == 0
    ids = elements(out)
    assert {"curve:loss:0:train/loss", "curve:loss:0:valid/loss", "curve:lr:0:train/lr"} <= set(ids)
    assert with_prefix(ids, "curve:tokens:") == ["curve:tokens:0:train/tokens_per_s"]
    page = tmp_path / "run.html"
    assert run(["page", str(trained_tiny), "-o", str(page), "--sentences", "3", "--seconds", "60"]) == 0
    parsed = check_page(page, 3)
    assert "checkpoint_00000300.pt" in parsed.cells or "checkpoint_00000150.pt" in parsed.cells
    text = page.read_text(encoding="utf-8")
    assert "model tiny" in text and "sublayer:encoder:encoder:0:self_attn" in text and "valid/loss" in text
