"""attncomp's BERT choices equal Hugging Face's BertForMaskedLM, weight for weight, in float64."""

from __future__ import annotations

import pytest
import torch

from attncomp import compile as compile_spec
from attncomp import ir
from attncomp.interop import families, mapping

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module", params=["fused", "unfused"])
def pair(request):
    config = transformers.BertConfig(
        vocab_size=64, hidden_size=32, num_attention_heads=4, intermediate_size=64, num_hidden_layers=2,
        max_position_embeddings=64, hidden_act="gelu", layer_norm_eps=1e-12, type_vocab_size=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    hf = transformers.BertForMaskedLM(config).to(torch.float64).eval()
    with torch.no_grad():  # HF zeroes biases and LayerNorm shifts at init; make every term count
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    passes = {} if request.param == "fused" else {"passes": ()}
    spec = ir.load_flat(mapping.spec_text(families.BERT, config), "<bert>")
    ours = compile_spec(spec, dtype=torch.float64, **passes).eval()
    ours.load_state_dict(mapping.convert(families.BERT, config, hf.state_dict()), strict=True)
    return hf, ours


def test_masked_lm_logits_equal_hugging_faces(pair):
    hf, ours = pair
    tokens = torch.randint(5, 64, (3, 17), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = hf(input_ids=tokens).logits
        mine = ours(tokens)
    assert (mine - theirs).abs().max().item() < 1e-9


def test_padding_masked_on_both_sides_equal(pair):
    """Right padding: attncomp masks <pad> keys; HF is given the same attention mask. Real positions agree."""
    hf, ours = pair
    tokens = torch.randint(5, 64, (2, 9), generator=torch.Generator().manual_seed(2))
    tokens[1, 6:] = 0
    with torch.no_grad():
        theirs = hf(input_ids=tokens, attention_mask=(tokens != 0).long()).logits
        mine = ours(tokens)
    real = tokens != 0
    assert (mine - theirs)[real].abs().max().item() < 1e-9
