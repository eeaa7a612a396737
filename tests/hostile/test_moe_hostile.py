"""Hostile inputs to the mixture-of-experts surfaces (ffn = moe(...)): a crafted Hugging Face file whose
transformers-style fused expert tensors (gate_up_proj, down_proj) are not (experts, rows, columns) is refused
naming the tensor and its shape (before: "tuple index out of range", or for a 4-D one a misleading "no
experts.1.fc1.weight"); CTranslate2's refusal of a mixture of experts writes it as the spec does, not as a
pydantic repr."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attncomp import ir
from attncomp.errors import UsageError
from attncomp.interop.families.experts import FUSE_EXPERTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("shape", [(), (6144,), (1, 4, 48, 32)], ids=str)
@pytest.mark.parametrize("which", ["gate_up_proj", "down_proj"])
def test_fused_experts_of_another_rank_are_named(which, shape):
    name = f"decoder.layers.0.ffn.experts.{which}"
    with pytest.raises(ValueError, match=rf"{name} has shape \({', '.join(map(str, shape))},?\), not \(experts"):
        FUSE_EXPERTS.apply({name: torch.zeros(shape)}, None)


def test_ctranslate2_refusal_writes_moe_as_the_spec_does():
    pytest.importorskip("ctranslate2")
    from attncomp.interop.ctranslate2_export import check_supported

    spec = ir.load(ROOT / "specs/examples/tiny.attn", ["model.decoder.ffn=moe(experts = 3, top_k = 2)"])
    with pytest.raises(UsageError) as raised:
        check_supported(spec)
    message = str(raised.value)
    assert "ffn = moe(experts = 3, top_k = 2" in message and "kind=" not in message and "\n" not in message
