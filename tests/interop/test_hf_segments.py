"""Segments and factorised embeddings equal transformers in float64: BertForMaskedLM with two token types,
ElectraForMaskedLM with embedding_size < hidden_size (embeddings_project, a generator head back out to
embedding_size) and token types, imported through the family table (attncomp.interop.families) and
exported back; and specs/examples/electra.attn is ElectraForMaskedLM's architecture."""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.cli.main import run
from attncomp.interop import families, hf_import, mapping
from attncomp.passes import DEFAULT_PASSES
from tests.conftest import ROOT
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")
TOLERANCE = 1e-12
CHANGES = {"bert": {}, "electra": dict(embedding_size=16)}  # electra: 16 < hidden_size 32


pytestmark = pytest.mark.usefixtures("one_thread")


def _inputs(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(3, hf_models.VOCAB, (3, 11), generator=g)
    tokens[1, 7:] = 0  # padding (pad id 0 in both)
    types = torch.randint(0, 2, tokens.shape, generator=g)
    types[0, 5:] = 1  # a sentence pair: segment 0, then segment 1
    return tokens, types, tokens != 0


@pytest.mark.parametrize("passes", ["fused", "unfused"])
@pytest.mark.parametrize("family", CHANGES)
def test_token_types_and_factorised_embeddings_equal_transformers(family, passes, tmp_path, monkeypatch):
    hf = hf_models.model(family, **CHANGES[family])
    hf_models.float64_exact(monkeypatch, hf)
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / family))
    model = imported.spec.model
    assert model.segments == 2 and model.d_embed == (16 if family == "electra" else None)
    ours = attncomp.compile(imported.spec, passes=DEFAULT_PASSES if passes == "fused" else (),
                            dtype=torch.float64).eval()
    ours.load_state_dict(imported.weights, strict=True)
    tokens, types, real = _inputs()
    with torch.no_grad():
        expected = hf(input_ids=tokens, token_type_ids=types, attention_mask=real.long()).logits
        got = ours(tokens, types)
        assert (got - expected)[real].abs().max() < TOLERANCE
        zero = hf(input_ids=tokens, attention_mask=real.long()).logits  # HF's default: token type 0
        assert (ours(tokens) - zero)[real].abs().max() < TOLERANCE
        assert (got - zero)[real].abs().max() > 1e-3  # the second segment changes the logits


def test_factorised_electra_comes_back_from_export_bit_for_bit(tmp_path, monkeypatch):
    hf = hf_models.model("electra", **CHANGES["electra"])
    source = hf_models.save(hf, tmp_path / "source")
    assert run(["import", str(source), "--out", str(tmp_path / "imported")]) == 0
    assert run(["export", str(tmp_path / "imported" / "checkpoint.pt"), "--format", "hf",
                "-o", str(tmp_path / "exported")]) == 0
    back = transformers.ElectraForMaskedLM.from_pretrained(tmp_path / "exported", dtype=torch.float64).eval()
    original = safetensors_torch.load_file(source / "model.safetensors")
    exported = safetensors_torch.load_file(tmp_path / "exported" / "model.safetensors")
    assert set(original) == set(exported)
    assert all(torch.equal(exported[k], v) for k, v in original.items())
    tokens, types, real = _inputs(2)
    with torch.no_grad():
        a = back(input_ids=tokens, token_type_ids=types, attention_mask=real.long()).logits
        b = hf(input_ids=tokens, token_type_ids=types, attention_mask=real.long()).logits
    assert (a - b)[real].abs().max() < TOLERANCE


def test_the_electra_example_is_electras_architecture(monkeypatch):
    """specs/examples/electra.attn (dropout off) loads ElectraForMaskedLM's weights by the family table,
    strict, and computes its logits with two segments."""
    spec = ir.load(ROOT / "specs/examples/electra.attn", ["model.dropout.residual=0", "model.dropout.attention=0"])
    m = spec.model
    config = transformers.ElectraConfig(
        vocab_size=m.src_vocab, embedding_size=m.d_embed, hidden_size=m.d_model, num_attention_heads=m.encoder.heads,
        intermediate_size=m.encoder.d_ff, num_hidden_layers=m.encoder.layers,
        max_position_embeddings=m.positions.max_len, type_vocab_size=m.segments, layer_norm_eps=m.norm_eps,
        hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    hf = transformers.ElectraForMaskedLM(config).to(torch.float64).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.add_(torch.randn_like(p) * 0.1)
    hf_models.float64_exact(monkeypatch, hf)
    imported = ir.load_flat(mapping.spec_text(families.ELECTRA, config), "<electra>")
    assert imported.model.model_copy(update={"name": m.name, "dropout": m.dropout}) == m
    ours = attncomp.compile(spec, dtype=torch.float64).eval()
    ours.load_state_dict(mapping.convert(families.ELECTRA, config, hf.state_dict()), strict=True)
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(5, m.src_vocab, (2, 13), generator=g)
    types = torch.randint(0, 2, tokens.shape, generator=g)
    with torch.no_grad():
        expected = hf(input_ids=tokens, token_type_ids=types).logits
        assert (ours(tokens, types) - expected).abs().max() < TOLERANCE


@pytest.mark.parametrize("family", ["electra", "bert"])
def test_a_spec_written_by_hand_exports_with_its_segments(family, sample_data, tmp_path, monkeypatch):
    """specs/examples/electra.attn (and, with d_embed unset and the head's activation from hidden_act, BERT),
    trained by attncomp rather than imported: `--format hf --family` writes a directory whose transformers
    model has attncomp's logits for token types 0 and 1 (1e-12, float64)."""
    from attncomp import checkpoint
    from tests.interop.conftest import random_checkpoint

    sets = ("model.vocab=shared(64)",) + (("model.d_embed=none",) if family == "bert" else ())
    path = random_checkpoint(sample_data, tmp_path / f"{family}.pt", spec_path=ROOT / "specs/examples/electra.attn",
                             sets=sets)
    assert run(["export", str(path), "--format", "hf", "--family", family, "--out", str(tmp_path / "hf")]) == 0
    config = hf_models.read_json(tmp_path / "hf" / "config.json")
    assert config["model_type"] == family and config["type_vocab_size"] == 2
    model_class = getattr(transformers, hf_models.FAMILIES[family][1])
    back = model_class.from_pretrained(tmp_path / "hf", dtype=torch.float64, attn_implementation="sdpa").eval()
    hf_models.float64_exact(monkeypatch, back)
    found = checkpoint.load(path)
    ours = attncomp.compile(checkpoint.stored_spec(found), dtype=torch.float64).eval()
    ours.load_state_dict({k: v.double() for k, v in found.model.items()})
    tokens, types, real = _inputs(4)
    with torch.no_grad():
        expected = back(input_ids=tokens, token_type_ids=types, attention_mask=real.long()).logits
        assert (ours(tokens, types) - expected)[real].abs().max() < 1e-9
