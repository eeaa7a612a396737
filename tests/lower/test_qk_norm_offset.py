"""qk_norm's RMSNorm takes the stack's `rmsnorm(offset = 1)` (Gemma 3's (1 + w) q/k gains, the one fact its
norms share): a spec with the offset and weights w has the logits of the same spec without it and weights
1 + w, for both qk_norm kinds, fused and unfused, in the forward and in cached decoding (transformers' Gemma 3:
tests/interop/test_hf_gemma3.py)."""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.compiler import DEFAULT_PASSES


def _spec(qk_norm: str, normalization: str) -> str:
    return ("model qk {\n  d_model = 32  heads = 4  d_k = 16  kv_heads = 2  vocab = shared(50)  tie = decoder\n"
            f"  positions = rope\n  decoder {{ layers = 2  norm = pre  normalization = {normalization}  "
            f"qk_norm = {qk_norm} }}\n}}\n")


@pytest.mark.parametrize("qk_norm", ["head", "projection"])
@pytest.mark.parametrize("passes", [DEFAULT_PASSES, ()], ids=["fused", "unfused"])
def test_the_offset_reaches_the_qk_norms(qk_norm, passes):
    offset = ir.load_flat(_spec(qk_norm, "rmsnorm(offset = 1)"), "<offset>")
    plain = ir.load_flat(_spec(qk_norm, "rmsnorm"), "<plain>")
    torch.manual_seed(0)
    ours = attncomp.compile(offset, passes=passes, dtype=torch.float64).eval()
    assert type(ours.decoder.layers[0].self_attn.q_norm).__name__ == "OffsetRMSNorm"
    assert not ours.decoder.layers[0].self_attn.k_norm.weight.any()  # w starts at 0: a gain of 1
    with torch.no_grad():
        for name, p in ours.named_parameters():
            p.add_(torch.randn_like(p) * 0.2)
    shifted = {k: v + 1 if k.endswith("norm.weight") else v for k, v in ours.state_dict().items()}
    reference = attncomp.compile(plain, passes=passes, dtype=torch.float64).eval()
    reference.load_state_dict(shifted)
    tokens = torch.randint(5, 50, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = reference(tokens)
        assert (ours(tokens) - expected).abs().max() < 1e-12
        cache = ours.init_cache(tokens)
        for t in range(tokens.shape[1]):
            step, cache = ours.decode_step(tokens[:, t: t + 1], cache)
            assert (step.reshape(2, -1) - expected[:, t]).abs().max() < 1e-12, t


def test_a_layernorm_stacks_qk_norm_stays_plain_rmsnorm():
    spec = ir.load_flat(_spec("head", "layernorm"), "<layernorm>")
    model = attncomp.compile(spec, dtype=torch.float64)
    assert isinstance(model.decoder.layers[0].self_attn.q_norm, torch.nn.RMSNorm)
