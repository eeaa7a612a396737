"""Files attncomp wrote before layers became units (tests/fixtures/legacy, made by
tests/fixtures/make_legacy.py on main at c2f2aa5) still load, and compute what they computed then."""

from __future__ import annotations

import torch

import attncomp
from attncomp import checkpoint as ckpt
from attncomp.loading import load_checkpoint
from attncomp.decode.beam import CachedStepper, beam_search
from attncomp.interop import torch_export
from tests.conftest import ROOT

LEGACY = ROOT / "tests" / "fixtures" / "legacy"
OUTPUTS = torch.load(LEGACY / "outputs.pt", weights_only=True)


def _decode_steps(model) -> torch.Tensor:
    """Greedy steps from <s>, as make_legacy.py took them."""
    src = OUTPUTS["src"]
    with torch.no_grad():
        cache = model.init_cache(src, model.encode(src))
        steps, token = [], torch.full((2, 1), 2)
        for _ in range(len(OUTPUTS["decode_steps"])):
            step, cache = model.decode_step(token, cache)
            steps.append(step)
            token = step.argmax(-1, keepdim=True)
    return torch.stack(steps)


def _check(model) -> None:
    with torch.no_grad():
        assert torch.allclose(model(OUTPUTS["src"], OUTPUTS["tgt_in"]), OUTPUTS["forward"], atol=1e-5)
    assert torch.allclose(_decode_steps(model), OUTPUTS["decode_steps"], atol=1e-5)


def test_a_checkpoint_file_loads_and_computes_what_it_did():
    model, found = load_checkpoint(LEGACY / "checkpoint.pt")
    assert found.header.kind == "train" and found.header.step == 2 and found.optimizer is not None
    _check(model)


def test_a_safetensors_export_loads_and_computes_what_it_did():
    _check(attncomp.load(LEGACY / "safetensors"))


def test_a_torch_export_directory_loads_and_decodes_as_it_did():
    exported = torch_export.load(LEGACY / "torch-export", trusted=True)
    assert torch.allclose(_decode_steps(exported), OUTPUTS["decode_steps"], atol=1e-5)


def test_a_sharded_checkpoint_directory_loads_and_decodes():
    model, found = load_checkpoint(LEGACY / "sharded")
    assert found.header.sharded and found.header.step == 2
    reference = ckpt.read(LEGACY / "sharded").model
    assert set(model.state_dict()) == set(reference)
    src = OUTPUTS["src"]
    hyps = beam_search(CachedStepper(model, src), 2, [6, 6], beam=2, alpha=0.6)
    assert all(len(h) == 1 and len(h[0].tokens) <= 5 for h in hyps)
