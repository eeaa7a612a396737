"""Every shipped spec (narrowed by tests.helpers.small) computes what it computed before layers became
units: each entry point's outputs in float64 for fixed weights and inputs, explicit and fused, equal to
the goldens recorded on main at c2f2aa5 (the model code of 1b6acdc) to 1e-12.

A golden keeps, per output tensor, its shape and a few fixed random projections (sum_i r_i x_i), which
differ as soon as any element does; ATTNCOMP_UPDATE_GOLDEN=1 records them again (only ever on purpose:
these goldens are the proof that a refactoring changed nothing).
"""

from __future__ import annotations

import json
import zlib

import pytest
import torch

from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.vocab import PAD
from attncomp.passes import DEFAULT_PASSES
from tests.conftest import ROOT, SPECS, UPDATE, spec_id
from tests.helpers import batch, small

GOLDEN = ROOT / "tests" / "golden" / "outputs"
PROJECTIONS = 4
TOLERANCE = 1e-12
pytestmark = pytest.mark.slow


def fixed_weights(model: torch.nn.Module) -> None:
    """Weights that depend on each parameter's name and shape alone (not on creation order)."""
    with torch.no_grad():
        for name, p in model.state_dict().items():
            g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
            values = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if p.dim() >= 2:
                values = values / p.shape[-1] ** 0.5
            else:
                values = 0.1 * values + (1.0 if "norm" in name and name.endswith("weight") else 0.0)
            p.copy_(values)


def entry_outputs(model, spec) -> dict[str, torch.Tensor]:
    """Every entry point's outputs on fixed inputs; decoding: init_cache, then three decode steps."""
    m = spec.model
    src, tgt = batch(spec, b=3, s=7, t=6, seed=1)
    dense = src.masked_fill(src == PAD, 9)
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        if m.encoder is not None and m.decoder is not None:
            out["forward"], out["hidden"] = model(src, tgt), model.hidden(src, tgt)
            out["hidden_dense"] = model.hidden_dense(dense, tgt)
            memory = out["encode"] = model.encode(src)
            cache = model.init_cache(src, memory)
        elif m.decoder is not None:
            out["forward"], out["hidden"] = model(tgt), model.hidden(tgt)
            cache = model.init_cache(tgt)
        else:
            out["forward"], out["hidden"] = model(src), model.hidden(src)
            out["hidden_dense"], out["encode"] = model.hidden_dense(dense), model.encode(src)
            return out
        for t in range(3):
            out[f"decode_step.{t}"], cache = model.decode_step(tgt[:, t : t + 1], cache)
        for i, leaf in enumerate(x for x in torch.utils._pytree.tree_leaves(cache) if x is not None):
            out[f"cache.{i}"] = leaf
    return out


def _projections(x: torch.Tensor) -> dict:
    flat = x.detach().to(torch.float64).flatten()
    if x.dtype == torch.bool:
        return {"shape": list(x.shape), "true": int(x.sum())}
    g = torch.Generator().manual_seed(flat.numel())
    r = torch.randn(PROJECTIONS, flat.numel(), generator=g, dtype=torch.float64)
    return {"shape": list(x.shape), "abs_sum": float(flat.abs().sum()), "projections": (r @ flat).tolist()}


def _model(spec, passes):
    model = compile_spec(spec, passes=DEFAULT_PASSES if passes is None else passes, dtype=torch.float64)
    fixed_weights(model)
    return model.eval()


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_every_entry_point_computes_what_it_did(path):
    spec = small(ir.load(path))
    golden = GOLDEN / f"{spec_id(path)}.json"
    fused = {name: _projections(x) for name, x in entry_outputs(_model(spec, None), spec).items()}
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps(fused, indent=1) + "\n")
    expected = json.loads(golden.read_text())
    explicit = {name: _projections(x) for name, x in entry_outputs(_model(spec, ()), spec).items()}
    for label, found in (("fused", fused), ("explicit", explicit)):
        assert set(found) == set(expected), label
        for name, want in expected.items():
            got = found[name]
            assert got["shape"] == want["shape"], (label, name)
            if "true" in want:
                assert got["true"] == want["true"], (label, name)
                continue
            scale = max(1.0, want["abs_sum"])
            assert abs(got["abs_sum"] - want["abs_sum"]) <= TOLERANCE * scale, (label, name)
            for a, b in zip(got["projections"], want["projections"]):
                assert abs(a - b) <= TOLERANCE * scale, (label, name, a, b)
