"""The size limit on a spec stored in a checkpoint or an export (issue 23, item 4; issue 27): a stored spec
over the 4 GiB estimate is read when the weights stored with it are all there (a model trained with
`--force`, or imported: it is as large as what is already on disk), and refused when it describes more
than is stored (a crafted or damaged spec, or `--set` overrides that grow it), before anything is built.

The limit is lowered to 1,000 bytes here so that the legacy fixtures (6,400 parameters) are over it.
Each test of acceptance failed on the behaviour before (every stored spec over the limit was refused).
"""

from __future__ import annotations

import hashlib
import shutil

import pytest
import torch

import attncomp
from attncomp import checkpoint, ir
from attncomp.errors import SpecError
from attncomp.checkpoint import safetensors_dir
from attncomp.interop import torch_export
from attncomp.loading import checked_spec, load_checkpoint
from attncomp.lower import size
from tests.conftest import ROOT

LEGACY = ROOT / "tests/fixtures/legacy"


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setattr(size, "MAX_PARAM_BYTES", 1000)


@pytest.mark.parametrize("artifact", ["checkpoint.pt", "sharded", "safetensors"])
def test_a_stored_spec_over_the_limit_loads_with_all_its_weights(small_limit, artifact):
    model = attncomp.load(LEGACY / artifact)
    assert sum(p.numel() for p in model.parameters()) == 6400
    if artifact != "safetensors":  # the header alone (what `average`, `--resume` and `readable` read)
        assert checkpoint.load(LEGACY / artifact, model=False).stored == 6400
    else:
        assert safetensors_dir.read(LEGACY / artifact, model=False).stored == 6400


def test_a_torch_export_over_the_limit_loads_with_all_its_weights(small_limit):
    assert torch_export.load(LEGACY / "torch-export", trusted=True).spec


def grown(text: str) -> str:
    """The stored spec with twice the layers: more parameters than the stored weights."""
    spec = ir.load_flat(text, "stored")
    return ir.to_text(ir.load_flat(text, "stored", [f"model.layers={2 * spec.model.encoder.layers}"]))


def test_a_checkpoint_whose_spec_describes_more_than_it_stores_is_refused(small_limit, tmp_path):
    payload = torch.load(LEGACY / "checkpoint.pt", weights_only=True)
    payload["spec"] = grown(payload["spec"])
    payload["spec_hash"] = hashlib.sha256(payload["spec"].encode()).hexdigest()
    path = tmp_path / "checkpoint.pt"
    torch.save(payload, path)
    # checkpoint reading returns what the file holds (issue 41); the guard is loading's, before anything is built
    for read in (lambda: checked_spec(checkpoint.load(path, model=False)), lambda: attncomp.load(path)):
        with pytest.raises(SpecError, match="over the limit of 1000 B.*only 6,400 weights stored with it"):
            read()


def test_an_export_whose_spec_describes_more_than_it_stores_is_refused(small_limit, tmp_path):
    directory = shutil.copytree(LEGACY / "safetensors", tmp_path / "exp")
    text = grown((directory / "spec.attn").read_text())
    (directory / "spec.attn").write_text(text)
    meta = (directory / "attncomp.json").read_text()
    old = hashlib.sha256((LEGACY / "safetensors/spec.attn").read_bytes()).hexdigest()
    (directory / "attncomp.json").write_text(meta.replace(old, hashlib.sha256(text.encode()).hexdigest()))
    with pytest.raises(SpecError, match="only 6,400 weights stored with it"):
        attncomp.load(directory)


def test_overrides_that_grow_a_stored_spec_over_the_limit_are_refused_before_building(small_limit):
    layers = checkpoint.stored_spec(checkpoint.load(LEGACY / "checkpoint.pt")).model.encoder.layers
    with pytest.raises(SpecError, match="only 6,400 weights stored with it"):
        load_checkpoint(LEGACY / "checkpoint.pt", [f"model.layers={2 * layers}"])
