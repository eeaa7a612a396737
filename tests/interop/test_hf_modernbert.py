"""ModernBERT through the family table (attncomp/interop/families/encoders.py, MODERNBERT): a tiny random
ModernBertForMaskedLM saved with save_pretrained, imported by `attncomp import`, equal to transformers'
model in float64 (1e-12 of the logits' scale), fused and unfused; `attncomp export --format hf` gives
every tensor back bit for bit, and transformers loads it with the same logits.

ModernBERT's layer structure is spec choices: pre-norm layers whose first has no attention norm (a layer
kind `first { count = 1  block = sequential(attention(norm = none), ffn) }`), a global layer every third
among local ones (bidirectional windows of local_attention / 2 each side), GeGLU (HF's Wi: input, then
gate: split into attncomp's gate and fc1), LayerNorm on the embeddings, a final norm, BERT's dense
prediction head and a decoder bias over the tied embedding, and global layers with their own rotary base
(`rope_base` in their layer kinds). Norms without biases (`norm_bias = false`, ModernBERT's default) are
`layernorm(bias = false)`, but for the prediction head's, whose bias import fills with zeros. HF's
float32 rotary steps are patched to float64."""

from __future__ import annotations

import pytest
import torch

from attncomp.compiler import DEFAULT_PASSES
from attncomp.interop import hf_import
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors.torch")
from transformers.models.modernbert import modeling_modernbert  # noqa: E402

VOCAB, D, HEADS, FF, LAYERS, WINDOW, PAD = 64, 32, 4, 40, 5, 4, 3  # local_attention = 4: 2 positions each side
LOCAL_THETA, GLOBAL_THETA = 100.0, 1600.0  # ModernBERT: 10000 and 160000
TOLERANCE = 1e-12


pytestmark = pytest.mark.usefixtures("one_thread")


def _rotary_float64(self, x, position_ids, layer_type):
    inv_freq = getattr(self, f"{layer_type}_inv_freq")
    dim = inv_freq.shape[0] * 2
    theta = self.config.rope_parameters[layer_type]["rope_theta"]
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    emb = position_ids[..., None].to(torch.float64) * inv
    emb = torch.cat((emb, emb), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _apply_rotary_float64(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    rotate = modeling_modernbert.rotate_half
    return q * cos + rotate(q) * sin, k * cos + rotate(k) * sin


def _hf(monkeypatch, **changes):
    monkeypatch.setattr(modeling_modernbert.ModernBertRotaryEmbedding, "forward", _rotary_float64)
    monkeypatch.setattr(modeling_modernbert, "apply_rotary_pos_emb", _apply_rotary_float64)
    values = dict(vocab_size=VOCAB, hidden_size=D, num_attention_heads=HEADS, intermediate_size=FF,
                  num_hidden_layers=LAYERS, local_attention=WINDOW, max_position_embeddings=64, norm_eps=1e-6,
                  attention_bias=True, mlp_bias=True, classifier_bias=True, pad_token_id=PAD, bos_token_id=None,
                  eos_token_id=None, cls_token_id=None, sep_token_id=None,
                  rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": GLOBAL_THETA},
                                   "sliding_attention": {"rope_type": "default", "rope_theta": LOCAL_THETA}})
    config = transformers.ModernBertConfig(**{**values, **changes})
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.ModernBertForMaskedLM(config).double().eval()
    with torch.no_grad():  # every weight random and away from its initial value, so each one counts
        for p in model.parameters():
            p.copy_((1.0 if p.dim() == 1 else 0.0) + 0.3 * torch.randn(p.shape, dtype=p.dtype))
    return model


def _tokens() -> torch.Tensor:
    tokens = torch.randint(5, VOCAB, (3, 11), generator=torch.Generator().manual_seed(1))
    tokens[:, 0] = 0  # HF id 0: a token, not padding (the spec declares ModernBERT's pad)
    tokens[1, 7:] = PAD
    return tokens


def _compare(hf, imported, ours) -> None:
    tokens = _tokens()
    real = tokens != PAD
    assert imported.spec.model.specials.pad == PAD  # the model's own ids: no rows moved
    with torch.no_grad():
        expected = hf(input_ids=tokens, attention_mask=real.long()).logits
    hf_models.assert_same_logits(ours, expected, tokens, rtol=TOLERANCE, where=real, steps=False)


@pytest.mark.parametrize("norm_bias", [False, True], ids=["norm_bias=false", "norm_bias=true"])
def test_modernbert_imports_with_logits_equal_to_transformers(norm_bias, tmp_path, monkeypatch):
    hf = _hf(monkeypatch, norm_bias=norm_bias)
    assert [layer.attention_type for layer in hf.model.layers] == [
        "full_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]
    assert isinstance(hf.model.layers[0].attn_norm, torch.nn.Identity)
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / "modernbert"))
    spec = imported.spec
    assert [kind for kind, _ in spec.model.encoder.layer_plan()] == ["first", "", "", "global", ""]
    assert [stack.rope_base for _, stack in spec.model.encoder.layer_plan()] == [GLOBAL_THETA, None, None,
                                                                                  GLOBAL_THETA, None]
    assert ("layernorm(bias = false)" in imported.spec_text) is not norm_bias
    assert ("head.norm.bias" in imported.weights) is norm_bias  # the head's norm as HF's: no bias to fill
    for passes in (DEFAULT_PASSES, ()):
        _compare(hf, imported, hf_models.compiled(spec, imported.weights, passes))


def test_modernbert_export_gives_every_tensor_back(tmp_path, monkeypatch):
    hf = _hf(monkeypatch)
    hf_models.assert_export_gives_every_tensor_back(hf, tmp_path)
    back = transformers.ModernBertForMaskedLM.from_pretrained(tmp_path / "exported", dtype=torch.float64).eval()
    tokens, real = _tokens(), _tokens() != PAD
    with torch.no_grad():
        expected = hf(input_ids=tokens, attention_mask=real.long()).logits
        got = back(input_ids=tokens, attention_mask=real.long()).logits
    assert ((got - expected)[real].abs().max() / expected[real].abs().max()) < TOLERANCE
