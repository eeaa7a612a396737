"""`attncomp import` for every family of attncomp/interop/families/: a tiny random transformers model
(tests/interop/hf_models.py) saved with save_pretrained in float64, imported from its directory, has
logits equal to transformers' within 1e-12 (full forward, and cached decoding where it generates)."""

from __future__ import annotations

import pytest
import torch

from attncomp.interop import hf_import
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-12
DECODER_ONLY = ("llama", "mistral", "qwen2", "qwen3", "olmo", "olmo2", "stablelm", "gemma", "gpt2", "gpt_neox",
                "phi", "phi3", "gptj", "falcon", "opt")
ENCODER_ONLY = ("bert", "roberta", "xlm-roberta", "electra", "distilbert")
SEQ2SEQ = ("bart", "mbart", "m2m_100")


pytestmark = pytest.mark.usefixtures("one_thread")


def _tokens(b: int, t: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(3, hf_models.VOCAB, (b, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family", DECODER_ONLY)
def test_decoder_only_logits_equal_transformers(family, tmp_path, monkeypatch):
    hf, imported, ours = hf_models.imported(family, tmp_path, monkeypatch)
    assert {t.dtype for t in imported.weights.values()} == {torch.float64}  # the model's, saved by save_pretrained
    tokens = _tokens(2, 9)  # past Mistral's window of 4
    with torch.no_grad():
        expected = hf(tokens).logits
    hf_models.assert_same_logits(ours, expected, tokens, atol=TOLERANCE)


# configs of an imported family that take another spec choice: (family, config changes)
VARIANTS = (("gpt_neox", dict(use_parallel_residual=False)), ("gemma", dict(hidden_act="silu")),
            ("gemma", dict(hidden_act="gelu")),  # Gemma's legacy "gelu": the tanh form
            ("falcon", dict(new_decoder_architecture=True, num_kv_heads=2)),  # parallel(norms = 2), grouped
            ("falcon", dict(new_decoder_architecture=True, num_kv_heads=2, num_ln_in_parallel_attn=1)),
            ("stablelm", dict(use_parallel_residual=True)),  # block = parallel, one norm
            ("falcon", dict(multi_query=False)), ("falcon", dict(multi_query=False, parallel_attn=False)),
            ("olmo", dict(clip_qkv=0.25)),  # attention = scaled_dot(clip_qkv = 0.25)
            ("gptj", dict(tie_word_embeddings=True, rotary_dim=8, activation_function="gelu")),  # every dim rotated
            ("opt", dict(do_layer_norm_before=False)),  # post-norm (opt-350m's), no final norm
            # LayerNorms without parameters, no biases, an untied lm_head
            ("opt", dict(layer_norm_elementwise_affine=False, enable_bias=False, tie_word_embeddings=False)))


@pytest.mark.parametrize("family,changes", VARIANTS, ids=lambda v: str(v))
def test_decoder_only_variants_equal_transformers(family, changes, tmp_path, monkeypatch):
    hf, imported, ours = hf_models.imported(family, tmp_path, monkeypatch, **changes)
    tokens = _tokens(2, 9)
    with torch.no_grad():
        expected = hf(tokens).logits
    hf_models.assert_same_logits(ours, expected, tokens, atol=TOLERANCE)


@pytest.mark.parametrize("family", ENCODER_ONLY)
def test_masked_lm_logits_equal_transformers(family, tmp_path, monkeypatch):
    hf, imported, ours = hf_models.imported(family, tmp_path, monkeypatch)
    pad = hf.config.pad_token_id
    tokens = _tokens(3, 11)
    tokens[:, 0] = 0  # RoBERTa's <s>, HF id 0: a token (the spec declares the model's own pad)
    tokens[1, 7:] = pad
    real = tokens != pad
    with torch.no_grad():
        expected = hf(input_ids=tokens, attention_mask=real.long()).logits
    assert imported.spec.model.specials.pad == pad  # the model's own ids: no rows moved
    hf_models.assert_same_logits(ours, expected, tokens, atol=TOLERANCE, where=real, steps=False)


@pytest.mark.parametrize("family", SEQ2SEQ)
def test_encoder_decoder_logits_equal_transformers(family, tmp_path, monkeypatch):
    hf, imported, ours = hf_models.imported(family, tmp_path, monkeypatch)
    pad = hf.config.pad_token_id
    src, tgt = _tokens(3, 9), _tokens(3, 6, seed=2)
    src[:, 0], tgt[:, 0] = 0, hf.config.decoder_start_token_id  # BART's <s> begins every source
    src[2, 6:] = pad
    with torch.no_grad():
        expected = hf(input_ids=src, attention_mask=(src != pad).long(), decoder_input_ids=tgt).logits
    assert imported.spec.model.specials.pad == pad  # the model's own ids: no rows moved
    hf_models.assert_same_logits(ours, expected, src, tgt, atol=TOLERANCE)


def test_distilbert_sinusoidal_positions_are_computed(tmp_path, monkeypatch):
    """sinusoidal_pos_embds: DistilBERT stores the paper's interleaved table (rounded to float32 when it is
    made); attncomp computes it (`positions = sinusoidal`). With the stored table written in float64 the
    logits agree to 1e-12."""
    from attncomp.lower import ops

    hf = hf_models.model("distilbert", sinusoidal_pos_embds=True)
    with torch.no_grad():
        hf.distilbert.embeddings.position_embeddings.weight.copy_(ops.sinusoidal(torch.arange(40), 32, torch.float64))
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / "distilbert"))
    assert "positions = sinusoidal" in imported.spec_text and "encoder.pos.weight" not in imported.weights
    ours = hf_models.compiled(imported.spec, imported.weights)
    tokens = _tokens(2, 11)
    with torch.no_grad():
        expected = hf(tokens).logits
    hf_models.assert_same_logits(ours, expected, tokens, atol=TOLERANCE, steps=False)


def test_docs_interop_lists_every_family_imported_and_refused():
    from attncomp.interop import families
    from tests.conftest import ROOT

    doc = (ROOT / "docs" / "interop.md").read_text()
    missing = [t for t in (*families.IMPORTED, *families.REFUSED) if f"`{t}`" not in doc]
    assert not missing, f"docs/interop.md does not name {missing}"
    # Marian: test_marian_separate.py; Gemma 2 and 3 (eager attention only): test_hf_gemma2.py, test_hf_gemma3.py;
    # T5, mT5 and umT5: test_hf_t5.py; ModernBERT: test_hf_modernbert.py; BLOOM (its float32 softmax): test_hf_bloom.py;
    # the mixtures of experts: test_hf_experts.py; ALBERT (shared layers): test_hf_albert.py
    tested = set(DECODER_ONLY + ENCODER_ONLY + SEQ2SEQ) | {"marian", "gemma2", "gemma3_text", "t5", "mt5", "umt5",
                                                          "modernbert", "bloom", "mixtral", "qwen2_moe", "qwen3_moe",
                                                          "olmoe", "albert"}
    assert tested == set(families.IMPORTED)


@pytest.mark.parametrize("length", [5, 13])  # just past Mistral's window of 4, and three windows past it
def test_mistral_past_its_sliding_window_equals_transformers(length, tmp_path, monkeypatch):
    """Mistral's sliding window (4 in hf_models) at lengths beyond it: full forward and cached decoding step
    by step, the cache bounded by the window; without the window transformers' logits differ, so the window
    is what is compared."""
    hf, imported, ours = hf_models.imported("mistral", tmp_path, monkeypatch)
    assert "local(window = 3)" in imported.spec_text
    tokens = _tokens(2, length)
    with torch.no_grad():
        expected = hf(tokens).logits
    cache = hf_models.assert_same_logits(ours, expected, tokens, atol=TOLERANCE)
    assert {layer.self_attn.k.shape[2] for layer in cache.layers} == {min(length, 3)}  # the window's keys only
    with torch.no_grad():
        unwindowed = hf_models.model("mistral", sliding_window=None)
        hf_models.float64_exact(monkeypatch, unwindowed)
        assert (unwindowed(tokens).logits[:, -1] - expected[:, -1]).abs().max() > 1e-6
