"""T5 through the family table (attncomp/interop/families/seq2seq.py, T5 and MT5): unscaled dot products
(`scale = none`), the bucketed relative bias (`positions = buckets`, one table per stack), pre-norm
RMSNorm (T5LayerNorm), no biases, unscaled embeddings; a tiny random T5ForConditionalGeneration saved
with save_pretrained, imported by `attncomp import`, equal to transformers' in float64 (1e-12 of the
logits' scale) for

    v1.0   relu feed-forward, the embedding tied to the output, the decoder's states rescaled by
           d_model^-0.5 before it (`tie = all`, `logit_scale`)
    v1.1   gated-GELU (tanh) feed-forward (`geglu_tanh`), an lm_head of its own (`tie = inputs`), as Flan-T5
    mT5    v1.1's layout (MT5ForConditionalGeneration never rescales)
    umT5   v1.1's with a bias table in every layer's self-attention (`buckets(per_layer = true)`)

the full forward (fused and unfused) and cached decoding step by step; `attncomp export --format hf`
gives every tensor back bit for bit and transformers loads it with the same logits. HF's float32
variance in T5LayerNorm is patched to float64."""

from __future__ import annotations

import pytest
import torch

from attncomp.cli.main import run
from attncomp.interop import hf_import
from attncomp.passes import DEFAULT_PASSES
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors.torch")
from transformers.models.t5 import modeling_t5  # noqa: E402

VOCAB, D, HEADS, D_KV, D_FF, BUCKETS, MAX_DISTANCE = 64, 32, 4, 12, 48, 8, 20  # d_kv * heads != d_model
TOLERANCE = 1e-12
VERSIONS = {"v1.0": ("T5Config", "T5ForConditionalGeneration", dict(feed_forward_proj="relu")),
            "v1.1": ("T5Config", "T5ForConditionalGeneration",
                     dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)),
            "mt5": ("MT5Config", "MT5ForConditionalGeneration", dict(feed_forward_proj="gated-gelu")),
            "umt5": ("UMT5Config", "UMT5ForConditionalGeneration",
                     dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False))}


pytestmark = pytest.mark.usefixtures("one_thread")


def _rms_float64(self, x):  # T5LayerNorm without its float32 variance
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def _hf(version: str, monkeypatch, dtype=torch.float64):
    config_class, model_class, values = VERSIONS[version]
    config = getattr(transformers, config_class)(
        vocab_size=VOCAB, d_model=D, d_kv=D_KV, d_ff=D_FF, num_layers=2, num_decoder_layers=3, num_heads=HEADS,
        relative_attention_num_buckets=BUCKETS, relative_attention_max_distance=MAX_DISTANCE, dropout_rate=0.0,
        layer_norm_epsilon=1e-5, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, **values)
    config._attn_implementation = "eager"
    monkeypatch.setattr(modeling_t5.T5LayerNorm, "forward", _rms_float64)
    if version == "mt5":
        from transformers.models.mt5 import modeling_mt5
        monkeypatch.setattr(modeling_mt5.MT5LayerNorm, "forward", _rms_float64)
    if version == "umt5":
        from transformers.models.umt5 import modeling_umt5
        monkeypatch.setattr(modeling_umt5.UMT5LayerNorm, "forward", _rms_float64)
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for p in model.parameters():  # random weights at a scale where every part matters
            p.copy_(torch.randn_like(p) * (0.3 if p.dim() > 1 else 1.0) + (1.0 if p.dim() == 1 else 0.0))
        if version != "v1.0":  # an lm_head of its own, as Flan-T5's and mT5's files hold
            model.lm_head.weight = torch.nn.Parameter(torch.randn(VOCAB, D) * 0.3)
    return model.to(dtype)


def _tokens(b: int, t: int, seed: int) -> torch.Tensor:
    return torch.randint(5, VOCAB, (b, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("version", list(VERSIONS))
@pytest.mark.parametrize("passes", [(), None], ids=["unfused", "fused"])
def test_t5_imports_with_logits_equal_to_transformers(version, passes, tmp_path, monkeypatch):
    hf = _hf(version, monkeypatch)
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / version))
    text = imported.spec_text
    per_layer = ", per_layer = true" if version == "umt5" else ""
    assert f"positions = buckets(count = 8, max_distance = 20{per_layer})" in text and "scale = none" in text
    assert ("tie = all" in text and "logit_scale" in text) if version == "v1.0" else "tie = inputs" in text
    ours = hf_models.compiled(imported.spec, imported.weights, DEFAULT_PASSES if passes is None else passes)
    src, tgt = _tokens(2, 30, 1), _tokens(2, 25, 2)  # 30 positions: past the exact buckets, into the log ones
    tgt[:, 0] = 0  # the decoder starts at decoder_start_token_id, which is pad
    with torch.no_grad():
        expected = hf(input_ids=src, decoder_input_ids=tgt).logits
    hf_models.assert_same_logits(ours, expected, src, tgt, rtol=TOLERANCE)


@pytest.mark.parametrize("version", list(VERSIONS))
def test_t5_export_gives_every_tensor_back(version, tmp_path, monkeypatch):
    hf = _hf(version, monkeypatch)
    hf_models.assert_export_gives_every_tensor_back(hf, tmp_path)
    back = getattr(transformers, VERSIONS[version][1]).from_pretrained(tmp_path / "exported", dtype=torch.float64)
    back.config._attn_implementation = "eager"
    src, tgt = _tokens(2, 30, 1), _tokens(2, 25, 2)
    with torch.no_grad():
        expected = hf(input_ids=src, decoder_input_ids=tgt).logits
        got = back.eval()(input_ids=src, decoder_input_ids=tgt).logits
        assert (got - expected).abs().max() / expected.abs().max() < TOLERANCE


def test_a_tied_t5_whose_lm_head_differs_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    hf = _hf("v1.0", monkeypatch, torch.float32)
    hf.lm_head.weight = torch.nn.Parameter(torch.randn(VOCAB, D))  # save_pretrained keeps both: they differ
    source = hf_models.save(hf, tmp_path / "source")
    capsys.readouterr()
    assert run(["import", str(source), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "lm_head.weight that differs from shared.weight" in err
