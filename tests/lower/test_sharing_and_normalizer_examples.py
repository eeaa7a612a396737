"""specs/examples/diff_shared.attn, diff_cla.attn and prefix_sigmoid.attn: compositions no published model uses,
made of the parts of the language's sharing (share, share_kv), normalisers (differential, sigmoid) and prefix-LM
masks, checked as shipped: the checked-in generated module equals the compiled model (forward and cached
decoding), fused equals explicit in float64, a CLA cache holds only the layers that compute keys and values,
and a prefix LM decodes from its prefix encoded in one step as its forward pass reads it. (Each part is checked
against its paper's equations in test_sharing.py, test_normalizers.py and test_prefix_lm.py; the kernels these
examples get are pinned in tests/golden/kernels.json; tests/train/test_choices_train.py trains them.)"""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp import ir
from tests.codegen.test_generated import load_module
from tests.conftest import ROOT
from tests.helpers import assert_generated_equals_compiled, batch

EXAMPLES = ("diff_shared", "diff_cla", "prefix_sigmoid")


def _models(name: str):
    """The example compiled (fused, its weights moved off their initial values), explicit and generated, in
    float64 with the same weights."""
    spec = ir.load(ROOT / f"specs/examples/{name}.attn")
    torch.manual_seed(0)
    fused = attncomp.compile(spec, dtype=torch.float64).eval()
    with torch.no_grad():  # norms' gains, the lambdas: away from their start
        for p in fused.parameters():
            p.add_(0.1 * torch.randn_like(p))
    explicit = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    explicit.load_state_dict(fused.state_dict())
    generated = load_module(ROOT / "generated" / "examples" / f"{name}.py", f"generated_{name}").Model()
    generated = generated.double().eval()
    generated.load_state_dict(fused.state_dict())
    return spec, fused, explicit, generated


@pytest.mark.parametrize("name", EXAMPLES)
def test_generated_equals_compiled_and_fused_equals_explicit(name):
    spec, fused, explicit, generated = _models(name)
    src, tgt = batch(spec, b=2, s=9, t=7)
    assert_generated_equals_compiled(generated, fused, spec, src, tgt)
    args = (tgt,) if spec.model.encoder is None else (src, tgt)
    with torch.no_grad():
        assert (explicit(*args) - fused(*args)).abs().max() < 1e-12


@pytest.mark.parametrize("name, layers, cached", [("diff_shared", 4, (0, 2)), ("diff_cla", 6, (0, 3))])
def test_the_cla_cache_holds_only_the_layers_that_compute_keys_and_values(name, layers, cached):
    spec, fused, _, generated = _models(name)
    src, tgt = batch(spec, b=2, s=9, t=7)
    with torch.no_grad():
        for model in (fused, generated):
            cache = model.init_cache(src, model.encode(src)) if spec.model.encoder is not None else \
                model.init_cache(tgt[:, :3])
            assert len(cache.layers) == layers
            assert tuple(i for i, c in enumerate(cache.layers) if c.self_attn is not None) == cached


def test_the_prefix_lm_decodes_from_its_prefix_as_its_forward_pass_reads_it():
    """prefix_sigmoid: rows whose prefixes differ, the forward pass of fused, explicit and generated alike; then
    the first 4 tokens encoded in one step as every row's prefix and the rest fed one at a time: each step's
    logits are the forward pass's with prefix 4 (sigmoid attention's b = -log 64 does not depend on the length)."""
    spec, fused, explicit, generated = _models("prefix_sigmoid")
    tokens = torch.randint(5, spec.model.tgt_vocab, (3, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        prefix = torch.tensor([4, 1, 7])
        expected = explicit(tokens, prefix)
        assert (fused(tokens, prefix) - expected).abs().max() < 1e-12
        assert (generated(tokens, prefix) - expected).abs().max() < 1e-9
        assert (fused(tokens, prefix) - fused(tokens)).abs().max() > 1e-3  # the prefix is seen both ways
        expected = explicit(tokens, torch.full((3,), 4))
        for model, bound in ((fused, 1e-12), (generated, 1e-9)):
            cache = model.init_cache(tokens[:, :4])
            for t in range(4, tokens.shape[1]):
                logits, cache = model.decode_step(tokens[:, t : t + 1], cache)
                assert (logits - expected[:, t]).abs().max() < bound, t
