"""Gemma 2 as a spec: a tiny random Gemma2ForCausalLM with attention and final-logit soft-capping on, a
query_pre_attn_scalar other than head_dim (the score scale is its ^-0.5), a sliding window shorter than
the sequences, kv heads below heads and a non-default eps, imported by `attncomp import` through the
family table (attncomp/interop/families/decoders.py, GEMMA2), has logits equal to transformers' in
float64 (1e-12 relative to the logits' scale), fused and unfused, and cached decoding step by step equal
to them; `attncomp export --format hf` gives every tensor back bit for bit."""

from __future__ import annotations

import pytest
import torch

from attncomp.cli.main import run
from attncomp.interop import hf_import
from attncomp.passes import DEFAULT_PASSES
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors.torch")

TOLERANCE = 1e-12
WINDOW = 4  # HF's sliding_window: query i sees keys j with i - j < 4
CONFIG = dict(vocab_size=hf_models.VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              intermediate_size=48, num_hidden_layers=4, max_position_embeddings=64, query_pre_attn_scalar=24,
              attn_logit_softcapping=1.5, final_logit_softcapping=2.5, sliding_window=WINDOW, rms_norm_eps=1e-5,
              rope_parameters={"rope_type": "default", "rope_theta": 20000.0}, hidden_activation="gelu_pytorch_tanh",
              tie_word_embeddings=True, bos_token_id=None, eos_token_id=None, pad_token_id=None)


pytestmark = pytest.mark.usefixtures("one_thread")


def _hf(monkeypatch, **changes):
    config = transformers.Gemma2Config(**{**CONFIG, **changes})
    config._attn_implementation = "eager"
    monkeypatch.setattr(transformers.models.gemma2.modeling_gemma2, "eager_attention_forward",
                        hf_models.eager_attention_float64)
    torch.manual_seed(0)
    hf = transformers.Gemma2ForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.add_(torch.randn_like(p) * (0.3 if "norm" in name else 0.1))
    hf = hf.to(torch.float64)
    hf_models.float64_exact(monkeypatch, hf)
    return hf


def _tokens(b: int, t: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(3, hf_models.VOCAB, (b, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("passes", ["fused", "unfused"])
def test_gemma2_logits_and_cached_decoding_equal_transformers(passes, tmp_path, monkeypatch):
    hf = _hf(monkeypatch)
    assert hf.config.layer_types == ["sliding_attention", "full_attention"] * 2
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / "gemma2"))
    text = imported.spec_text
    assert "local(window = 3, scale = 0.2041241452319315, softcap = 1.5)" in text  # 24^-0.5, not 16^-0.5
    assert "logit_softcap = 2.5" in text and "decoder.norm = sandwich" in text
    ours = hf_models.compiled(imported.spec, imported.weights, DEFAULT_PASSES if passes == "fused" else ())
    tokens = _tokens(2, 3 * WINDOW + 1)  # well past the window
    with torch.no_grad():
        expected = hf(tokens).logits
    hf_models.assert_same_logits(ours, expected, tokens, rtol=TOLERANCE)


def test_the_soft_caps_scale_and_window_each_matter(tmp_path, monkeypatch):
    """Each distinctive choice changes the logits: the comparison above would see a wrong one."""
    hf = _hf(monkeypatch)
    tokens = _tokens(2, 3 * WINDOW + 1)
    with torch.no_grad():
        expected = hf(tokens).logits
        for changes in (dict(attn_logit_softcapping=None), dict(final_logit_softcapping=None),
                        dict(query_pre_attn_scalar=16), dict(sliding_window=64)):
            assert (_hf(monkeypatch, **changes)(tokens).logits - expected).abs().max() > 1e-3, changes


def test_gemma2_export_gives_every_tensor_back(tmp_path, monkeypatch):
    hf = _hf(monkeypatch)
    hf_models.assert_export_gives_every_tensor_back(hf, tmp_path)
    back = transformers.Gemma2ForCausalLM.from_pretrained(tmp_path / "exported", dtype=torch.float64).eval()
    back.config._attn_implementation = "eager"
    hf_models.float64_exact(monkeypatch, back)
    tokens = _tokens(2, 3 * WINDOW + 1)
    with torch.no_grad():
        assert (back(tokens).logits - hf(tokens).logits).abs().max() < TOLERANCE


def test_a_gemma2_spec_written_by_hand_exports_to_gemma2(sample_data, tmp_path, monkeypatch):
    """specs/examples/softcap.attn (scale 0.125, attention soft-cap 50, local window 16 and global layers)
    with Gemma 2's sandwich norms, embedding scale and a final cap, trained by attncomp rather than imported:
    `--format hf` finds Gemma 2 (query_pre_attn_scalar 64, sliding_window 17), and transformers' model of
    the written directory has attncomp's logits in float64 past the window."""
    from attncomp import checkpoint
    from tests.conftest import ROOT
    from tests.interop.conftest import random_checkpoint

    path = random_checkpoint(sample_data, tmp_path / "gemma2.pt", spec_path=ROOT / "specs/examples/softcap.attn",
                             sets=("model.scale_embeddings=true", "model.decoder.norm=sandwich",
                                   "model.logit_softcap=30", "model.decoder.attention=local(window = 3, "
                                   "scale = 0.125, softcap = 5)",
                                   "model.decoder.layer.global.attention=scaled_dot(scale = 0.125, softcap = 5)"))
    assert run(["export", str(path), "--format", "hf", "--out", str(tmp_path / "hf")]) == 0
    config = hf_models.read_json(tmp_path / "hf" / "config.json")
    assert config["model_type"] == "gemma2" and config["query_pre_attn_scalar"] == 64
    assert config["sliding_window"] == 4 and config["attn_logit_softcapping"] == 5.0
    found = checkpoint.load(path)
    ours = hf_models.compiled(checkpoint.stored_spec(found), found.model)
    monkeypatch.setattr(transformers.models.gemma2.modeling_gemma2, "eager_attention_forward",
                        hf_models.eager_attention_float64)
    hf = transformers.Gemma2ForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float64,
                                                        attn_implementation="eager").eval()
    hf_models.float64_exact(monkeypatch, hf)
    tokens = torch.randint(5, 256, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(tokens).logits
    hf_models.assert_same_logits(ours, expected, tokens, rtol=TOLERANCE, steps=False)
