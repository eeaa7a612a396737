"""`attncomp draw`: the picture's structure read back from its SVG (not its pixels): every stack, layer kind,
sub-layer in order with its norms and residual path, attention kind, mask and kernel, layer counts and one
mark per layer of a stack of several kinds; two specs side by side with what differs marked; the errors."""

from __future__ import annotations

import sys

import pytest

from attncomp import ir
from attncomp.cli.main import run
from tests.conftest import ROOT
from tests.draw.svg import box, check_layers, elements, text, with_prefix

SPECS = ["examples/tiny", "examples/modernbert", "examples/macaron", "examples/neox"]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    out = tmp_path_factory.mktemp("draw")
    pictures = {}
    for name in SPECS:
        path = out / (name.replace("/", "_") + ".svg")
        assert run(["draw", str(ROOT / "specs" / f"{name}.attn"), "-o", str(path)]) == 0
        pictures[name] = elements(path)
    return pictures


@pytest.mark.parametrize("name", SPECS)
def test_picture_shows_every_stack_kind_and_sublayer_of_the_spec(drawn, name):
    check_layers(drawn[name], ir.load(ROOT / "specs" / f"{name}.attn"))


def test_paper_layers_post_norms_masks_and_memory(drawn):
    ids = drawn["examples/tiny"]
    assert [text(ids[f"mask:{w}"]) for w in ("encoder:encoder:0", "decoder:decoder:0", "decoder:decoder:1")] == \
        ["mask: padding", "mask: causal", "mask: padding"]
    assert "memory" in ids and "head" in ids and "embedding:encoder" in ids and "embedding:decoder" in ids
    assert text(ids["count:encoder:encoder"]) == "2x" and "2 layers" in text(ids["count:encoder"])


def test_layer_pattern_is_one_mark_per_layer_in_its_kind(drawn):
    ids = drawn["examples/modernbert"]
    marks = with_prefix(ids, "mark:encoder:")
    assert marks == ["mark:encoder:0:first", "mark:encoder:1:encoder", "mark:encoder:2:encoder",
                     "mark:encoder:3:global"]
    # the first mark is the lowest, and the two layers of one kind share its colour
    ys = [box(ids[m])[1] for m in marks]
    assert ys == sorted(ys, reverse=True)
    assert ids["mark:encoder:1:encoder"][0].get("style") == ids["mark:encoder:2:encoder"][0].get("style") != \
        ids["mark:encoder:3:global"][0].get("style")
    assert text(ids["attention-kind:encoder:encoder:0"]) == "local(window = 8)"
    assert text(ids["mask:encoder:encoder:0"]) == "mask: band + padding"


def test_macaron_scales_and_sandwich_norms(drawn):
    ids = drawn["examples/macaron"]
    assert text(ids["scale:decoder:decoder:0"]) == "x 0.5" and text(ids["scale:decoder:decoder:2"]) == "x 0.5"
    assert "norm:decoder:decoder:1:before" in ids and "norm:decoder:decoder:1:after" in ids
    assert not with_prefix(ids, "norm:decoder:first:1:")  # the first layer's attention: norm = none


def test_parallel_block_one_add_and_a_norm_each(drawn):
    ids = drawn["examples/neox"]
    assert "add:decoder:decoder" in ids and "skip:decoder:decoder" in ids
    assert "norm:decoder:decoder:0:before" in ids and "norm:decoder:decoder:1:before" in ids


def test_two_specs_side_by_side_mark_what_differs(tmp_path):
    tiny = ROOT / "specs/examples/tiny.attn"
    (tmp_path / "A1.attn").write_text(f'extends "{tiny}"\nmodel {{ heads = 1  positions = learned(max_len = 256) }}\n')
    out = tmp_path / "pair.svg"
    assert run(["draw", str(tiny), str(tmp_path / "A1.attn"), "-o", str(out)]) == 0
    ids = elements(out)
    for side in ("a/", "b/"):
        check_layers(ids, ir.load(tiny), prefix=side)
        assert {f"{side}changed:stack:encoder", f"{side}changed:stack:decoder", f"{side}changed:embedding:encoder"} \
            <= set(ids)
        assert f"{side}changed:head" not in ids
    rows = [text(ids[i]) for i in with_prefix(ids, "diff-row:")]
    assert "model.encoder.heads: 4 -> 1" in rows and "model.positions.kind: sinusoidal -> learned" in rows
    assert box(ids["a/stack:encoder"])[2] < box(ids["b/stack:encoder"])[0]  # side by side


def test_errors_are_one_line_exit_2(tmp_path, capsys):
    tiny = str(ROOT / "specs/examples/tiny.attn")
    bad = tmp_path / "bad.attn"
    bad.write_text(f'extends "{tiny}"\nmodel {{ heads = 0 }}\n')
    assert run(["draw", str(bad), "-o", str(tmp_path / "x.svg")]) == 2
    assert "bad.attn:2:" in capsys.readouterr().err  # the spec's usual located error
    assert run(["draw", tiny, "-o", str(tmp_path / "x.txt")]) == 2
    assert ".svg, .png or .pdf" in capsys.readouterr().err
    assert run(["draw", tiny, tiny, tiny, "-o", str(tmp_path / "x.svg")]) == 2
    assert not (tmp_path / "x.svg").exists()


def test_png_and_pdf_by_suffix(tmp_path):
    tiny = str(ROOT / "specs/examples/tiny.attn")
    for suffix, magic in ((".pdf", b"%PDF"), (".png", b"\x89PNG")):
        assert run(["draw", tiny, "--set", "model.layers=1", "-o", str(tmp_path / f"t{suffix}")]) == 0
        assert (tmp_path / f"t{suffix}").read_bytes()[:4] == magic


def test_without_matplotlib_one_line_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert run(["draw", str(ROOT / "specs/examples/tiny.attn"), "-o", str(tmp_path / "x.svg")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: attncomp draw needs the Python package 'matplotlib': pip install 'attncomp[plot]'"


def test_shared_layers_and_factorised_embeddings_are_drawn(tmp_path):
    """An ALBERT-style encoder: the picture says its 4 layers run 1 parameter set (its "per layer" count is that
    set's) and that its embeddings are d_embed wide; a CLA decoder says which layers share keys and values."""
    import xml.etree.ElementTree as ET

    spec = tmp_path / "albert.attn"
    spec.write_text("model albert { d_model = 64  heads = 4  d_ff = 128  vocab = shared(512)  d_embed = 32\n"
                    "  encoder { layers = 4  share = all  norm = pre } }\n")
    assert run(["draw", str(spec), "-o", str(tmp_path / "a.svg"), "--set", "model.encoder.share=groups(2)"]) == 0
    ids = elements(tmp_path / "a.svg")
    assert text(ids["connections:encoder"]) == "across layers: 2 parameter sets for 4 layers (share = groups(size = 2))"
    words = " ".join(ET.parse(tmp_path / "a.svg").getroot().itertext())
    assert "d_embed = 32" in words and "projected to d_model = 64" in words
    spec.write_text("model cla { d_model = 64  heads = 4  vocab = shared(512)  decoder { layers = 4  share_kv = 2 } }")
    assert run(["draw", str(spec), "-o", str(tmp_path / "c.svg")]) == 0
    assert text(elements(tmp_path / "c.svg")["connections:decoder"]) == \
        "across layers: keys and values shared by 2 layers (share_kv = 2)"
