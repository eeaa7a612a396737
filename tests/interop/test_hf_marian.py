"""Hugging Face transformers' MarianMTModel with its weights copied into attncomp (the Marian entry of
attncomp/interop/families/):
equal logits in float64, full forward and cached decoding step by step, with padding masked on both sides.

Token ids are given explicitly, so Marian's special ids (which differ from attncomp's) play no part;
padding is attncomp's <pad> id on our side and the same positions in Marian's attention_mask."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attncomp
from attncomp.errors import UsageError
from attncomp import ir
from attncomp.interop import families, mapping
from attncomp.lower import ops
from attncomp.vocab import BOS, PAD
from tests.helpers import batch

transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-9


def _config(**changes):
    settings = dict(vocab_size=64, d_model=32, encoder_attention_heads=4, decoder_attention_heads=4,
                    encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_layers=2, decoder_layers=2,
                    max_position_embeddings=64, activation_function="gelu", scale_embedding=True,
                    pad_token_id=PAD, eos_token_id=3, decoder_start_token_id=BOS, forced_eos_token_id=3,
                    dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    settings.update(changes)
    return transformers.MarianConfig(**settings)


def _marian_halves(n_pos: int, dim: int) -> torch.Tensor:
    """MarianSinusoidalPositionalEmbedding.create_weight's formula, kept in float64 (it rounds to float32)."""
    enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)])
    return torch.from_numpy(np.concatenate([np.sin(enc[:, 0::2]), np.cos(enc[:, 1::2])], axis=1))


@pytest.fixture(scope="module")
def models():
    """(Marian, attncomp unfused, attncomp fused), float64, the same random weights (biases and norms too)."""
    torch.manual_seed(0)
    config = _config(activation_function="swish")  # OPUS-MT's activation, attncomp's silu
    hf = transformers.MarianMTModel(config).double().eval()
    hf.config._attn_implementation = "eager"
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "embed_positions" not in name:
                p.add_(torch.randn_like(p) * 0.1)
        for stack in (hf.model.encoder, hf.model.decoder):
            stack.embed_positions.weight.copy_(_marian_halves(64, 32))
        hf.final_logits_bias.copy_(torch.randn_like(hf.final_logits_bias))  # a buffer, zero when fresh
    spec = ir.load_flat(mapping.spec_text(families.MARIAN, config), "<marian>")
    weights = mapping.convert(families.MARIAN, config, hf.state_dict())
    ours = []
    for passes in ((), attncomp.compiler.DEFAULT_PASSES):
        model = attncomp.compile(spec, passes=passes, dtype=torch.float64).eval()
        model.load_state_dict(weights)
        ours.append(model)
    return hf, *ours


def test_marian_sinusoids_are_the_halves_layout():
    table = ops.sinusoidal_halves(torch.arange(64), 32, torch.float64)
    assert (table - _marian_halves(64, 32)).abs().max() < TOLERANCE
    hf = transformers.MarianMTModel(_config())  # its own table, computed in float64 and stored in float32
    assert (table.float() - hf.model.encoder.embed_positions.weight).abs().max() < 1e-6


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_full_forward_equals_marian(models, fused):
    hf, ours = models[0], models[2 if fused else 1]
    spec = ours.spec
    src, tgt = batch(spec, b=3, s=9, t=7)
    expected = hf(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt).logits
    keep = tgt != PAD
    assert (ours(src, tgt) - expected)[keep].abs().max() < TOLERANCE


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_cached_decoding_equals_marian_step_by_step(models, fused):
    hf, ours = models[0], models[2 if fused else 1]
    src, tgt = batch(ours.spec, b=3, s=9, t=6)
    tgt = torch.where(tgt == PAD, torch.full_like(tgt, 7), tgt)
    tgt[:, 0] = BOS
    mask = (src != PAD).long()
    encoded = hf.get_encoder()(input_ids=src, attention_mask=mask)
    cache, past = ours.init_cache(src, ours.encode(src)), None
    for t in range(tgt.shape[1]):
        out = hf(encoder_outputs=encoded, attention_mask=mask, decoder_input_ids=tgt[:, t : t + 1],
                 past_key_values=past, use_cache=True)
        past = out.past_key_values
        step, cache = ours.decode_step(tgt[:, t : t + 1], cache)
        assert (step - out.logits[:, -1]).abs().max() < TOLERANCE, f"position {t}"


def test_what_attncomp_cannot_express_is_one_line():
    with pytest.raises(UsageError, match="activation 'tanh'"):
        mapping.spec_text(families.MARIAN, _config(activation_function="tanh"))
    separate = mapping.spec_text(families.MARIAN, _config(share_encoder_decoder_embeddings=False,
                                                          decoder_vocab_size=48))
    assert "vocab = separate(64, 48)" in separate and "tie = decoder" in separate
