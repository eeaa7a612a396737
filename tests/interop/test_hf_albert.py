"""AlbertForMaskedLM (Lan et al. 2019) equals attncomp's import of it in float64: layers sharing one parameter set
per group (`share = all | groups(size)`), a factorised embedding (embedding_size < hidden_size: `d_embed`, projected
by embedding_hidden_mapping_in), ALBERT's masked-LM head back out to embedding_size; exported back with `--format hf`
bit for bit; what the language lacks (inner_group_num > 1, groups that do not divide the layers) refused in one line."""

from __future__ import annotations

import json

import pytest
import torch

import attncomp
from attncomp.cli.main import run
from attncomp.interop import hf_import
from attncomp.passes import DEFAULT_PASSES
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")
TOLERANCE = 1e-12
GROUPS = {1: "all", 2: "groups(size = 2)", 4: None}  # num_hidden_groups over 4 layers -> the spec's share

pytestmark = pytest.mark.usefixtures("one_thread")


def _inputs(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(5, hf_models.VOCAB, (3, 11), generator=g)
    tokens[1, 7:] = 0  # padding (pad id 0 in both)
    types = torch.randint(0, 2, tokens.shape, generator=g)
    return tokens, types, tokens != 0


def _logits(hf, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, types, real = _inputs(seed)
    with torch.no_grad():
        return hf(input_ids=tokens, token_type_ids=types, attention_mask=real.long()).logits, real


@pytest.mark.parametrize("passes", ["fused", "unfused"])
@pytest.mark.parametrize("groups", GROUPS)
def test_albert_imports_with_transformers_logits(groups, passes, tmp_path, monkeypatch):
    hf = hf_models.model("albert", num_hidden_groups=groups)
    hf_models.float64_exact(monkeypatch, hf)
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / "albert"))
    model = imported.spec.model
    written = model.encoder.share.kind if GROUPS[groups] else "none"
    assert written == (GROUPS[groups] or "none").split("(")[0] and model.d_embed == 16 and model.segments == 2
    assert model.encoder.parameter_sets() == tuple(i * groups // 4 for i in range(4))
    ours = attncomp.compile(imported.spec, passes=DEFAULT_PASSES if passes == "fused" else (),
                            dtype=torch.float64).eval()
    ours.load_state_dict(imported.weights, strict=True)
    assert len(ours.encoder.layers) == groups  # a parameter set per group: encoder.layers.g is albert_layer_groups.g
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf.parameters())
    tokens, types, real = _inputs()
    expected, _ = _logits(hf)
    with torch.no_grad():
        assert (ours(tokens, types) - expected)[real].abs().max() < TOLERANCE


def test_albert_comes_back_from_export_bit_for_bit(tmp_path, monkeypatch):
    hf = hf_models.model("albert", num_hidden_groups=2)
    hf_models.float64_exact(monkeypatch, hf)
    source = hf_models.save(hf, tmp_path / "source")
    assert run(["import", str(source), "--out", str(tmp_path / "imported")]) == 0
    assert run(["export", str(tmp_path / "imported" / "checkpoint.pt"), "--format", "hf",
                "-o", str(tmp_path / "exported")]) == 0
    back = transformers.AlbertForMaskedLM.from_pretrained(tmp_path / "exported", dtype=torch.float64).eval()
    original = safetensors_torch.load_file(source / "model.safetensors")
    exported = safetensors_torch.load_file(tmp_path / "exported" / "model.safetensors")
    assert set(original) == set(exported)
    assert all(torch.equal(exported[k], v) for k, v in original.items())
    (a, real), (b, _) = _logits(back, 2), _logits(hf, 2)
    assert (a - b)[real].abs().max() < TOLERANCE


@pytest.mark.parametrize("changes, reason", [
    (dict(inner_group_num=2), "inner_group_num 2 (each parameter set is one layer"),
    (dict(num_hidden_groups=3), "num_hidden_groups 3 not dividing num_hidden_layers 4"),
    (dict(embedding_size=32), "embedding_size 32 not below hidden_size 32"),
    (dict(hidden_act="tanh"), "hidden_act 'tanh'"),
])
def test_what_the_language_lacks_is_refused_in_one_line(changes, reason, tmp_path, capsys):
    directory = hf_models.save(hf_models.model("albert", torch.float32), tmp_path / "albert")
    config = hf_models.read_json(directory / "config.json")
    (directory / "config.json").write_text(json.dumps({**config, **changes}))
    capsys.readouterr()
    assert run(["import", str(directory), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    assert reason in err and "no spec equivalent" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("share", ["all", "groups(2)"])
def test_a_spec_written_by_hand_with_shared_layers_exports_as_albert(share, sample_data, tmp_path, monkeypatch):
    """specs/examples/electra.attn with its layers shared is ALBERT's architecture: `--format hf` finds the family
    (without sharing it stays ELECTRA's) and transformers computes attncomp's logits (float64)."""
    from attncomp import checkpoint
    from tests.conftest import ROOT
    from tests.interop.conftest import random_checkpoint

    path = random_checkpoint(sample_data, tmp_path / "albert.pt", spec_path=ROOT / "specs/examples/electra.attn",
                             sets=("model.vocab=shared(64)", "model.encoder.layers=4", f"model.encoder.share={share}"))
    assert run(["export", str(path), "--format", "hf", "--out", str(tmp_path / "hf")]) == 0
    config = hf_models.read_json(tmp_path / "hf" / "config.json")
    assert config["model_type"] == "albert" and config["num_hidden_groups"] == (1 if share == "all" else 2)
    back = transformers.AlbertForMaskedLM.from_pretrained(tmp_path / "hf", dtype=torch.float64,
                                                          attn_implementation="sdpa").eval()
    found = checkpoint.load(path)
    ours = attncomp.compile(checkpoint.stored_spec(found), dtype=torch.float64).eval()
    ours.load_state_dict({k: v.double() for k, v in found.model.items()})
    tokens, types, real = _inputs(4)
    expected, _ = _logits(back, 4)
    with torch.no_grad():
        assert (ours(tokens, types) - expected)[real].abs().max() < 1e-9
