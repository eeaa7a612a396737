"""`attncomp export CKPT --format hf --out DIR` (attncomp/interop/hf_export.py): a model `attncomp import`
read goes back to a save_pretrained directory that transformers loads with logits equal to the original's
(float64, 1e-12), every tensor bit for bit except what the import folded (docs/interop.md)."""

from __future__ import annotations

import json

import pytest
import torch

from attncomp.cli.main import run
from tests.interop import hf_models
from tests.interop.test_hf_families import DECODER_ONLY, ENCODER_ONLY, SEQ2SEQ, TOLERANCE, VARIANTS, _tokens

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

# HF tensors that import folds or slices: they come back with the same logits, not the same bits
FOLDED = {"roberta": ("embeddings.position_embeddings", "embeddings.token_type_embeddings"),
          "xlm-roberta": ("embeddings.position_embeddings", "embeddings.token_type_embeddings"),
          "bart": ("embed_positions",), "mbart": ("embed_positions",)}


pytestmark = pytest.mark.usefixtures("one_thread")


def _logits(hf, family: str) -> torch.Tensor:
    tokens = _tokens(2, 9)
    with torch.no_grad():
        if family in SEQ2SEQ:
            return hf(input_ids=tokens, decoder_input_ids=_tokens(2, 5, seed=2)).logits
        return hf(tokens).logits


@pytest.mark.parametrize("family", DECODER_ONLY + ENCODER_ONLY + SEQ2SEQ)
def test_import_then_export_loads_in_transformers_with_equal_logits(family, tmp_path, monkeypatch, capsys):
    _round_trip(family, {}, tmp_path, monkeypatch)


@pytest.mark.parametrize("family,changes", VARIANTS, ids=lambda v: str(v))
def test_variants_come_back_with_equal_logits(family, changes, tmp_path, monkeypatch):
    _round_trip(family, changes, tmp_path, monkeypatch)


def _round_trip(family, changes, tmp_path, monkeypatch):
    hf = hf_models.model(family, **changes)
    hf_models.float64_exact(monkeypatch, hf)
    source = hf_models.save(hf, tmp_path / "source")
    assert run(["import", str(source), "--out", str(tmp_path / "imported")]) == 0
    assert run(["export", str(tmp_path / "imported" / "checkpoint.pt"), "--format", "hf",
                "-o", str(tmp_path / "exported")]) == 0
    back = getattr(transformers, hf_models.FAMILIES[family][1]).from_pretrained(tmp_path / "exported",
                                                                               dtype=torch.float64)
    back.config._attn_implementation = "sdpa"
    hf_models.float64_exact(monkeypatch, back.eval())
    assert (_logits(back, family) - _logits(hf, family)).abs().max() < TOLERANCE
    original = safetensors_torch.load_file(source / "model.safetensors")
    exported = safetensors_torch.load_file(tmp_path / "exported" / "model.safetensors")
    assert set(original) == set(exported)
    folded = FOLDED.get(family, ())
    for name, tensor in original.items():
        assert exported[name].dtype == tensor.dtype, name
        if not any(part in name for part in folded):
            assert torch.equal(exported[name], tensor), name
    assert (tmp_path / "exported" / "tokenizer.json").read_bytes() == (source / "tokenizer.json").read_bytes()


def test_bf16_comes_back_bf16(tmp_path):
    hf = hf_models.model("llama", torch.bfloat16)
    source = hf_models.save(hf, tmp_path / "source")
    assert run(["import", str(source), "--out", str(tmp_path / "imported")]) == 0
    assert run(["export", str(tmp_path / "imported" / "checkpoint.pt"), "--format", "hf",
                "--out", str(tmp_path / "exported")]) == 0
    original = safetensors_torch.load_file(source / "model.safetensors")
    exported = safetensors_torch.load_file(tmp_path / "exported" / "model.safetensors")
    assert all(exported[k].dtype == torch.bfloat16 and torch.equal(exported[k], v) for k, v in original.items())


def test_a_changed_architecture_is_refused(tmp_path, capsys):
    import dataclasses

    from attncomp import checkpoint

    source = hf_models.save(hf_models.model("qwen2", torch.float32), tmp_path / "source")
    assert run(["import", str(source), "--out", str(tmp_path / "imported")]) == 0
    found = checkpoint.load(tmp_path / "imported" / "checkpoint.pt")
    data = json.loads(found.header.data)
    data["imported"]["config"]["intermediate_size"] = 40
    header = dataclasses.replace(found.header, data=json.dumps(data))
    checkpoint.save(checkpoint.Checkpoint(header, model=found.model), tmp_path / "changed.pt")
    capsys.readouterr()
    assert run(["export", str(tmp_path / "changed.pt"), "--format", "hf", "--out", str(tmp_path / "out")]) == 2
    assert "no longer the spec of its Qwen2 config" in capsys.readouterr().err


def test_a_llama_spec_written_by_hand_exports_to_llama(sample_data, tmp_path, monkeypatch):
    """specs/examples/llama.attn (tied, kv heads below heads), trained by attncomp rather than imported:
    `--format hf` finds the one family whose spec it is (Llama), and transformers' model of the written
    directory has attncomp's logits, within 1e-12 in float64."""
    import attncomp
    from attncomp import checkpoint
    from tests.conftest import ROOT
    from tests.interop.conftest import random_checkpoint

    spec_path = ROOT / "specs/examples/llama.attn"
    path = random_checkpoint(sample_data, tmp_path / "llama.pt", spec_path=spec_path,
                             sets=("model.tie=decoder", "model.positions=rope(base = 50000)"))
    assert run(["export", str(path), "--format", "hf", "--out", str(tmp_path / "hf")]) == 0
    config = hf_models.read_json(tmp_path / "hf" / "config.json")
    assert config["model_type"] == "llama" and config["num_key_value_heads"] == 2
    found = checkpoint.load(path)
    ours = attncomp.compile(checkpoint.stored_spec(found), dtype=torch.float64).eval()
    ours.load_state_dict(found.model)
    hf = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float64).eval()
    hf_models.float64_exact(monkeypatch, hf)
    tokens = torch.randint(5, 256, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (ours(tokens) - hf(tokens).logits).abs().max() < TOLERANCE
    assert (tmp_path / "hf" / "tokenizer.model").is_file()


def test_a_spec_of_no_family_is_refused_in_one_line(random_tiny, tmp_path, capsys):
    """The paper's encoder-decoder (specs/examples/tiny.attn, interleaved sinusoids) matches no family: the
    closest (Marian's, an encoder-decoder with sinusoids in halves) and what differs from it, in one line."""
    assert run(["export", str(random_tiny), "--format", "hf", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no Hugging Face family" in err and "closest, Marian: " in err
    assert "positions.layout = interleaved (halves in the family)" in err
    assert "(True in the family)" in err


def test_a_llama_like_spec_names_what_differs_from_the_closest_family():
    from attncomp import ir
    from attncomp.errors import UsageError
    from attncomp.interop import hf_export
    from tests.conftest import ROOT

    model = ir.load(ROOT / "specs/examples/llama.attn", ["model.decoder.norm=post"]).model
    with pytest.raises(UsageError, match=r"closest, Llama: .*decoder.norm = post \(pre in the family\)"):
        hf_export.matching(model)


def test_a_prefix_lm_is_refused_in_one_line(sample_data, tmp_path, capsys):
    """decoder { mask = prefix } (else llama.attn): no Hugging Face decoder-only family computes a prefix LM."""
    from tests.conftest import ROOT
    from tests.interop.conftest import random_checkpoint

    path = random_checkpoint(sample_data, tmp_path / "prefix.pt", spec_path=ROOT / "specs/examples/llama.attn",
                             sets=("model.tie=decoder", "model.decoder.mask=prefix"))
    assert run(["export", str(path), "--format", "hf", "--out", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "export --format hf cannot write a prefix LM (decoder { mask = prefix })" in err
    assert not (tmp_path / "hf").exists()
