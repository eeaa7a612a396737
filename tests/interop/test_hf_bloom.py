"""BLOOM as a spec (`positions = alibi`, `embedding_norm = true`, a per-head fused query_key_value): a tiny
random BloomForCausalLM (6 heads, a count that is not a power of two, whose ALiBi slopes take every other slope
of the next power of two; 4 and 8 heads too), saved with save_pretrained and imported through the family table
(attncomp/interop/families/decoders.py, BLOOM), has logits equal to transformers' in float64 (1e-12 relative to
the logits' scale), fused and unfused, and cached decoding step by step equal to them; `attncomp export
--format hf` gives every tensor back bit for bit; what the language lacks is refused in one line
(test_hf_import_files.py), and a spec written by hand exports as BLOOM (test_hf_export_written.py)."""

from __future__ import annotations

import math

import pytest
import torch

from attncomp import ir
from attncomp.interop import hf_import
from attncomp.passes import DEFAULT_PASSES
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors.torch")
from transformers.models.bloom import modeling_bloom  # noqa: E402

TOLERANCE = 1e-12

pytestmark = pytest.mark.usefixtures("one_thread")


def _hf(monkeypatch, exact: bool = True, **changes):
    hf = hf_models.model("bloom", **changes)
    if exact:
        hf_models.bloom_float64(monkeypatch)
    return hf


def _tokens(b: int, t: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(3, hf_models.VOCAB, (b, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("heads", [1, 2, 3, 5, 6, 7, 8, 12, 16, 24, 40, 64, 112])
def test_alibi_slopes_are_bloom_s(heads):
    """ops.alibi_bias's slopes (its bias one key back) are _get_alibi_slopes': to its float32 rounding, which
    grows with the power it raises (up to 1e-6 relative for 112 heads), far below the 2^(-1/8) between two."""
    from attncomp.lower import ops

    ours = -ops.alibi_bias(heads, 1, 2, torch.device("cpu"), torch.float64)[:, 0, 0]
    theirs = modeling_bloom._get_alibi_slopes(heads, torch.device("cpu")).to(torch.float64)
    assert ours.shape == theirs.shape
    assert ((ours - theirs).abs() <= 1e-5 * theirs.abs()).all()


# (changes to hf_models' config: heads, tying, pretraining_tp without slow_but_exact changes nothing)
CASES = {"6 heads, tied": {}, "4 heads, untied": dict(n_head=4, hidden_size=32, tie_word_embeddings=False),
         "8 heads, pretraining_tp 2": dict(n_head=8, hidden_size=32, pretraining_tp=2),
         "normed skip": dict(apply_residual_connection_post_layernorm=True)}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("passes", ["fused", "unfused"])
def test_bloom_logits_and_cached_decoding_equal_transformers(case, passes, tmp_path, monkeypatch):
    hf = _hf(monkeypatch, **CASES[case])
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / "bloom"))
    text = imported.spec_text
    assert "positions = alibi" in text and "embedding_norm = true" in text and "gelu_tanh" in text
    assert ("tie = decoder" in text) == hf.config.tie_word_embeddings
    assert ("skip = normed" in text) == hf.config.apply_residual_connection_post_layernorm
    assert {t.dtype for t in imported.weights.values()} == {torch.float64}
    ours = hf_models.compiled(imported.spec, imported.weights, DEFAULT_PASSES if passes == "fused" else ())
    tokens = _tokens(2, 11)
    with torch.no_grad():
        expected = hf(tokens).logits
    hf_models.assert_same_logits(ours, expected, tokens, rtol=TOLERANCE)


def test_what_the_float64_comparison_changes_in_transformers_is_small(tmp_path, monkeypatch):
    """Left as transformers has it (bloom_gelu's 0.79788456 for sqrt(2/pi); the float32 softmax), BLOOM's
    logits are within 1e-6 relative of attncomp's: the patches of the comparison change rounding, not the
    architecture; and ALiBi and the embedding LayerNorm each matter (without either, the logits differ by 1e-3)."""
    hf = _hf(monkeypatch, exact=False)
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / "bloom"))
    ours = hf_models.compiled(imported.spec, imported.weights)
    tokens = _tokens(2, 11)
    with torch.no_grad():
        expected = hf(tokens).logits
        difference = (ours(tokens) - expected).abs().max() / expected.abs().max()
        assert difference < 1e-6
        for override, left_out in (("model.positions=none", ()), ("model.embedding_norm=false", ("embed_norm",))):
            changed = ir.load_flat(imported.spec_text, "<bloom>", [override])
            weights = {k: v for k, v in imported.weights.items() if not any(part in k for part in left_out)}
            assert (hf_models.compiled(changed, weights)(tokens) - expected).abs().max() > 1e-3, override


def test_bloom_export_gives_every_tensor_back(tmp_path, monkeypatch):
    hf = _hf(monkeypatch, tie_word_embeddings=False)
    hf_models.assert_export_gives_every_tensor_back(hf, tmp_path)
    back = transformers.BloomForCausalLM.from_pretrained(tmp_path / "exported", dtype=torch.float64).eval()
    tokens = _tokens(2, 11)
    with torch.no_grad():
        assert (back(tokens).logits - hf(tokens).logits).abs().max() < TOLERANCE
    assert not back.config.apply_residual_connection_post_layernorm and back.config.n_head == 6


def test_bloom_with_the_normed_skip_exports_with_it(tmp_path, monkeypatch):
    """apply_residual_connection_post_layernorm: the skip carries the normed input (`skip = normed` on both
    sub-layers); export gives every tensor back and the flag, and the skip matters (as x, the logits differ)."""
    hf = _hf(monkeypatch, apply_residual_connection_post_layernorm=True)
    hf_models.assert_export_gives_every_tensor_back(hf, tmp_path)
    back = transformers.BloomForCausalLM.from_pretrained(tmp_path / "exported", dtype=torch.float64).eval()
    assert back.config.apply_residual_connection_post_layernorm
    imported = hf_import.import_directory(tmp_path / "exported")
    tokens = _tokens(2, 11)
    plain = ir.load_flat(imported.spec_text.replace("(skip = normed)", ""), "<bloom>")
    with torch.no_grad():
        assert (back(tokens).logits - hf(tokens).logits).abs().max() < TOLERANCE
        assert (hf_models.compiled(plain, imported.weights)(tokens) - hf(tokens).logits).abs().max() > 1e-3


def test_slopes_are_not_those_of_the_power_of_two_below():
    """6 heads: slopes 1/4, 1/16, 1/64, 1/256 (4 heads'), then 1/2, 1/8 (8 heads' first and third)."""
    from attncomp.lower import ops

    slopes = -ops.alibi_bias(6, 1, 2, torch.device("cpu"), torch.float64)[:, 0, 0]
    assert slopes.tolist() == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
    assert math.isclose(slopes[-1].item(), modeling_bloom._get_alibi_slopes(6, torch.device("cpu"))[-1].item())
