"""`attncomp export --format torch-export`: torch.export programs that translate as attncomp does.

One export of a 1-layer, d_model 32 random-weight model serves the module: about 3.4 s for its three
programs, plus about 5 s of torch.export's own warm-up at a process's first export (on the shared
2-core CPU, one thread); each test then only loads (0.2 to 0.5 s a program) and runs the programs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from attncomp.cli.main import run
from attncomp.loading import load_checkpoint
from attncomp.data.tokenizer import Tokenizer
from attncomp.decode.translate import Translator
from attncomp.interop import torch_export
from tests.conftest import ROOT
from tests.interop.conftest import random_checkpoint

SETS = ("model.layers=1", "model.d_model=32", "model.heads=2", "model.d_ff=64")


@pytest.fixture(scope="module")
def small(sample_data, tmp_path_factory):
    return random_checkpoint(sample_data, tmp_path_factory.mktemp("ckpt") / "small.pt", sets=SETS)


@pytest.fixture(scope="module")
def exported(small, tmp_path_factory):
    out = tmp_path_factory.mktemp("torch_export") / "tiny"
    assert run(["export", str(small), "--format", "torch-export", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def loaded(exported):
    return torch_export.load(exported, trusted=True)  # 0.2 to 0.5 s a program: torch.export.load rebuilds symbolic shapes


@pytest.fixture(scope="module")
def reference(small):
    model, found = load_checkpoint(small)
    return model, Tokenizer(found.header.tokenizers["src"].numpy().tobytes())


def test_export_writes_the_documented_files(exported):
    names = sorted(p.name for p in exported.iterdir())
    assert names == ["attncomp.json", "decode_step.pt2", "encode.pt2", "init_cache.pt2", "spec.attn", "src.model",
                     "tgt.model"]
    assert torch_export.is_export(exported)


@pytest.mark.parametrize("beam", [1, 4])
def test_translations_through_the_programs_equal_attncomps(loaded, reference, sample_data, beam):
    """Batches of 1 and 3 sentences of different lengths (padded): the programs' shapes are dynamic."""
    model, tokenizer = reference
    ours = Translator(model, tokenizer, tokenizer, beam=beam, alpha=0.6, max_len=model.spec.decode.max_len,
                      progress=False)
    theirs = loaded.translator(beam=beam, alpha=0.6)
    lines = (sample_data / "text/test.src").read_text().splitlines()
    for batch in (lines[:1], lines[1:4]):
        expected, found_ = ours.translate(batch), theirs.translate(batch)
        assert [t[0].tokens for t in found_] == [t[0].tokens for t in expected]
        assert [t[0].score for t in found_] == pytest.approx([t[0].score for t in expected], abs=1e-5)


def _doc_block() -> str:
    text = (ROOT / "docs/decoding.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "torch.export.load(" in b]
    assert len(blocks) == 1
    return blocks[0]


def test_the_documented_plain_pytorch_decoding_runs_and_agrees(exported, loaded, reference, monkeypatch):
    """docs/decoding.md's code block (plain PyTorch) gives attncomp's greedy translations.

    torch.export.load answers with the programs the `loaded` fixture read from the same files (with
    torch.export.load itself), sparing a second deserialisation."""
    block = _doc_block()
    assert "import attncomp" not in block and "from attncomp" not in block
    monkeypatch.setattr(torch.export, "load", lambda path: loaded.programs[Path(path).stem])
    namespace: dict = {}
    exec(block.replace('DIR = "exported"', f'DIR = "{exported}"'), namespace)  # noqa: S102 - our own docs
    model, tokenizer = reference
    ours = Translator(model, tokenizer, tokenizer, beam=1, alpha=0.0, max_len=model.spec.decode.max_len,
                      progress=False).translate(namespace["lines"])
    for mine, theirs in zip(ours, namespace["out"]):  # attncomp stops at its limit; the loop may go on
        assert theirs[: len(mine[0].tokens)] == mine[0].tokens


def test_a_decoder_with_local_attention_is_refused_in_one_line(sample_data, tmp_path, capsys):
    checkpoint = random_checkpoint(sample_data, tmp_path / "local.pt",
                                   sets=(*SETS, "model.decoder.attention=local(window = 2)"))
    assert run(["export", str(checkpoint), "--format", "torch-export", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: torch.export cannot export decode_step of a decoder with local attention")
    assert len(err.splitlines()) == 1


def test_an_export_is_not_read_as_a_checkpoint(exported, tmp_path, capsys):
    assert run(["export", str(exported), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith("is a torch.export export: its programs load with attncomp.interop.torch_export.load, "
                        "not as a checkpoint") and len(err.splitlines()) == 1


def test_a_damaged_export_is_one_clear_error(exported, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for path in exported.iterdir():
        (broken / path.name).write_bytes(path.read_bytes())
    (broken / "spec.attn").write_text("model x {}\n")
    with pytest.raises(Exception, match="does not match the spec hash"):
        torch_export.load(broken, trusted=True)
    (broken / "spec.attn").write_bytes((exported / "spec.attn").read_bytes())
    (broken / "decode_step.pt2").write_bytes(b"not a program")
    with pytest.raises(Exception, match="decode_step.pt2 is not a readable torch.export program"):
        torch_export.load(broken, trusted=True)


CLA = ("model.decoder.layers=3", "model.decoder.share_kv=2", "model.decoder.share=cycle(2)")


@pytest.mark.parametrize("sets", [("model.decoder.layers=1",), CLA], ids=["one layer", "cla"])
def test_a_decoder_only_model_exports_without_encode(sets):
    """init_cache(tokens) and decode_step: the prompt fed token by token, then beam 2, as attncomp decodes (with
    share_kv, a reading layer's cache holds no keys: the flat cache has only the computing layers')."""
    from attncomp import compile as compile_spec
    from attncomp.decode.beam import CachedStepper, beam_search

    torch.manual_seed(0)
    model = compile_spec(ROOT / "specs/examples/lm.attn", ["model.vocab=shared(64)", "model.d_model=16",
                                                             "model.heads=2", "model.d_ff=32", *sets]).eval()
    programs = torch_export.programs(model)
    assert sorted(programs) == ["decode_step", "init_cache"]
    leaves = programs["init_cache"].module()(torch.full((2, 3), 5))  # the flat cache: k, v per computing layer
    assert len([t for t in leaves if t is not None]) == 2 * (1 if len(sets) == 1 else 2) + 1  # and the position
    exported = torch_export.ExportedModel(model.spec, {n: p.module() for n, p in programs.items()})
    for rows in (1, 3):
        src = 5 + torch.arange(rows * 4).view(rows, 4) % 50
        with torch.no_grad():
            ours = beam_search(CachedStepper(model, src), rows, [6] * rows, 2, 0.0)
            theirs = beam_search(CachedStepper(exported, src), rows, [6] * rows, 2, 0.0)
        assert [h[0].tokens for h in theirs] == [h[0].tokens for h in ours]


def test_encode_takes_the_segment_ids_of_a_model_with_segments():
    """`segments = N`: the exported encode reads (src, segments), as the compiled model's does; the
    decoding programs read the memory it made (specs/examples/electra.attn's segments, T5-style)."""
    from attncomp import compile as compile_spec

    torch.manual_seed(0)
    model = compile_spec(ROOT / "specs/examples/t5_capped.attn", ["model.vocab=shared(64)", "model.d_model=16",
                                                                   "model.heads=2", "model.d_ff=32", "model.layers=1",
                                                                   "model.segments=2"]).eval()
    programs = torch_export.programs(model)
    g = torch.Generator().manual_seed(1)
    src, segments = torch.randint(5, 64, (3, 7), generator=g), torch.randint(0, 2, (3, 7), generator=g)
    src[1, 5:] = 0
    with torch.no_grad():
        got = programs["encode"].module()(src, segments)
        assert (got - model.encode(src, segments)).abs().max() < 1e-5
        assert (got - model.encode(src)).abs().max() > 1e-3


def test_a_prefix_lm_exports_its_prefix_encoded_in_one_step():
    """decoder { mask = prefix }: the exported init_cache takes the prompt's prefix (`<s> source`, of any length: the
    source dimension is dynamic) and encodes it in one step, seen both ways; decoding through the programs equals
    the compiled model's, and the cached decoding the full forward pass with the rows' prefix lengths."""
    from attncomp import compile as compile_spec
    from attncomp.decode.beam import CachedStepper, FullStepper, beam_search

    torch.manual_seed(0)
    model = compile_spec(ROOT / "specs/examples/lm.attn", ["model.vocab=shared(64)", "model.d_model=16",
                                                             "model.heads=2", "model.d_ff=32", "model.decoder.layers=1",
                                                             "model.decoder.mask=prefix"]).eval()
    programs = torch_export.programs(model)
    exported = torch_export.ExportedModel(model.spec, {n: p.module() for n, p in programs.items()})
    assert exported.loss_inputs == ("tokens", "prefix")
    prompt = 5 + torch.arange(12).view(2, 6) % 50
    with torch.no_grad():
        for length in (2, 6):  # prefixes of other lengths than the example's
            ours = model.init_cache(prompt[:, :length])
            theirs = exported.init_cache(prompt[:, :length])
            ours, theirs = ([t for t in torch.utils._pytree.tree_leaves(c) if t is not None] for c in (ours, theirs))
            assert len(ours) == len(theirs) == 3 and int(theirs[-1][0]) == length  # k, v of the layer; position
            assert all((a - b).abs().max() < 1e-5 for a, b in zip(ours, theirs))
        for rows in (1, 2):
            src = prompt[:rows, :4]
            ours = beam_search(CachedStepper(model, src), rows, [6] * rows, 2, 0.0)
            theirs = beam_search(CachedStepper(exported, src), rows, [6] * rows, 2, 0.0)
            full = beam_search(FullStepper(model, src), rows, [6] * rows, 2, 0.0)
            assert [h[0].tokens for h in theirs] == [h[0].tokens for h in ours] == [h[0].tokens for h in full]
            assert [h[0].score for h in ours] == pytest.approx([h[0].score for h in full], abs=1e-5)
