"""Gemma 3's text model through the family table (attncomp/interop/families/decoders.py, GEMMA3_TEXT): a tiny
random Gemma3ForCausalLM with a global layer every third among local ones (layer_types), the two rotary
bases (local and global) both other than the defaults, the global layers' rotary angles scaled (linear, factor 8,
as the 4B and larger models' `rope_scaling`: `layer global { rope_scaling = linear(factor = 8.0) }`), q/k norms, sandwich norms, a query_pre_attn_scalar
other than head_dim, final-logit soft-capping on, kv heads below heads and a non-default
eps, saved with save_pretrained, imported by `attncomp import`, has logits equal to transformers' in
float64 (1e-12 relative to the logits' scale), fused and unfused, and cached decoding step by step equal
to them; `attncomp export --format hf` gives every tensor back bit for bit (the q/k norm gains too: the stack's
`rmsnorm(offset = 1)` makes them (1 + w) norms, so w is kept as stored) and transformers loads it with the same
logits."""

from __future__ import annotations

import pytest
import torch

from attncomp.interop import hf_import
from attncomp.passes import DEFAULT_PASSES
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors.torch")
from transformers.models.gemma3 import modeling_gemma3  # noqa: E402

TOLERANCE = 1e-12
WINDOW = 4  # HF's sliding_window: query i sees keys j with i - j < 4
LAYER_TYPES = ["sliding_attention", "sliding_attention", "full_attention"] * 2
CONFIG = dict(vocab_size=hf_models.VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              intermediate_size=48, num_hidden_layers=6, layer_types=LAYER_TYPES, max_position_embeddings=64,
              query_pre_attn_scalar=24, final_logit_softcapping=2.5, sliding_window=WINDOW,
              rms_norm_eps=1e-5, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
              rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 40000.0},
                               "sliding_attention": {"rope_type": "default", "rope_theta": 500.0}},
              bos_token_id=None, eos_token_id=None, pad_token_id=None)


pytestmark = pytest.mark.usefixtures("one_thread")


def _rotary_float64(self, x, position_ids, layer_type=None):
    """Gemma 3's rotary angles per layer type (its own base each, and linear scaling's division where the
    type has it: transformers' `inv_freq /= factor`), in float64."""
    dim = getattr(self, f"{layer_type}_inv_freq").shape[0] * 2
    params = self.config.rope_parameters[layer_type]
    inv = 1.0 / (params["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if params["rope_type"] == "linear":
        inv = inv / params["factor"]
    assert torch.allclose(inv, getattr(self, f"{layer_type}_inv_freq").to(torch.float64), rtol=1e-6, atol=0)
    emb = position_ids[..., None].to(torch.float64) * inv
    emb = torch.cat((emb, emb), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _float64(monkeypatch, hf) -> None:
    hf_models.float64_exact(monkeypatch, hf)  # Gemma's (1 + w) RMSNorm and its embedding scale in float64
    monkeypatch.setattr(modeling_gemma3.Gemma3RotaryEmbedding, "forward", _rotary_float64)
    # Gemma3Attention passes no soft-cap
    monkeypatch.setattr(modeling_gemma3, "eager_attention_forward", hf_models.eager_attention_float64)


def _hf(monkeypatch, **changes):
    config = transformers.Gemma3TextConfig(**{**CONFIG, **changes})
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    hf = transformers.Gemma3ForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.add_(torch.randn_like(p) * (0.3 if "norm" in name else 0.1))
    hf = hf.to(torch.float64)
    _float64(monkeypatch, hf)
    return hf


def _tokens(b: int, t: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(3, hf_models.VOCAB, (b, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("passes", ["fused", "unfused"])
def test_gemma3_logits_and_cached_decoding_equal_transformers(passes, tmp_path, monkeypatch):
    hf = _hf(monkeypatch)
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / "gemma3"))
    text = imported.spec_text
    assert "local(window = 3, scale = 0.2041241452319315)" in text  # 24^-0.5, not 16^-0.5
    assert "positions = rope(base = 500.0)" in text and "decoder.layer.global.rope_base = 40000.0" in text
    assert "decoder.layer.global.rope_scaling = linear(factor = 8.0)" in text
    assert "decoder.qk_norm = head" in text and "decoder.norm = sandwich" in text
    assert [kind for kind, _ in imported.spec.model.decoder.layer_plan()] == ["", "", "global"] * 2
    assert torch.equal(imported.weights["decoder.layers.1.self_attn.k_norm.weight"],
                       hf.model.layers[1].self_attn.k_norm.weight)  # w as stored: rmsnorm(offset = 1) adds the 1
    ours = hf_models.compiled(imported.spec, imported.weights, DEFAULT_PASSES if passes == "fused" else ())
    tokens = _tokens(2, 3 * WINDOW + 1)  # well past the window
    with torch.no_grad():
        expected = hf(tokens).logits
    hf_models.assert_same_logits(ours, expected, tokens, rtol=TOLERANCE)


def test_the_bases_norms_and_window_each_matter(monkeypatch):
    """Each distinctive choice changes the logits: the comparison above would see a wrong one."""
    hf = _hf(monkeypatch)
    tokens = _tokens(2, 3 * WINDOW + 1)
    rope = CONFIG["rope_parameters"]
    with torch.no_grad():
        expected = hf(tokens).logits
        for changes in (dict(rope_parameters={**rope, "full_attention": {"rope_type": "linear", "factor": 8.0,
                                                                         "rope_theta": 500.0}}),
                        dict(rope_parameters={**rope, "full_attention": {"rope_type": "default",
                                                                         "rope_theta": 40000.0}}),
                        dict(sliding_window=64), dict(query_pre_attn_scalar=16), dict(final_logit_softcapping=None)):
            assert (_hf(monkeypatch, **changes)(tokens).logits - expected).abs().max() > 1e-3, changes
        other = _hf(monkeypatch)
        other.model.layers[1].self_attn.q_norm.weight.add_(0.5)
        assert (other(tokens).logits - expected).abs().max() > 1e-3


def test_gemma3_export_gives_every_tensor_back(tmp_path, monkeypatch):
    hf = _hf(monkeypatch)
    # every tensor bit for bit, the q/k norm gains too: w as stored, no (1 + w) - 1
    hf_models.assert_export_gives_every_tensor_back(hf, tmp_path)
    back = transformers.Gemma3ForCausalLM.from_pretrained(tmp_path / "exported", dtype=torch.float64).eval()
    back.config._attn_implementation = "eager"
    _float64(monkeypatch, back)
    tokens = _tokens(2, 3 * WINDOW + 1)
    with torch.no_grad():
        expected = hf(tokens).logits
        assert ((back(tokens).logits - expected).abs().max() / expected.abs().max()) < TOLERANCE
