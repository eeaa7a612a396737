"""Nothing a sharded checkpoint directory holds runs (issue 23, item 1): its index (`.metadata`, per-rank
`__R.metadata`) and its byte items are pickles that DCP read with code-running unpicklers. Each payload
makes a directory (the marker) when unpickled; each test failed on the behaviour before the fix."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from attncomp import checkpoint as ckpt
from attncomp.checkpoint import sharded
from attncomp.checkpoint import dcp_safe
from tests.conftest import ROOT

LEGACY = ROOT / "tests/fixtures/legacy/sharded"


class Payload:
    """Unpickled, it makes the directory `marker`."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def with_index(dest: Path, index: bytes, name: str = sharded.METADATA) -> Path:
    shutil.copytree(LEGACY, dest)
    (dest / name).write_bytes(index)
    return dest


def test_the_legacy_sharded_checkpoint_loads_through_the_restricted_readers():
    found = ckpt.load(LEGACY)
    assert found.header.sharded and found.model
    state = sharded.read_full(LEGACY, {"optimizer"})  # byte items: the optimiser's hyper-parameters
    assert state["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.98)


@pytest.mark.parametrize("name", [sharded.METADATA, "__0.metadata"])
def test_a_crafted_index_is_refused_unrun(tmp_path, name):
    marker = tmp_path / "ran"
    path = with_index(tmp_path / "ckpt", pickle.dumps(Payload(marker)), name)
    with pytest.raises(ckpt.CheckpointError, match="not allowed in a shard index"):
        dcp_safe.SafeReader(str(path)).read_metadata(rank=0 if name != sharded.METADATA else None)
    if name == sharded.METADATA:
        with pytest.raises(ckpt.CheckpointError, match="mkdir is not allowed"):
            ckpt.load(path)
    assert not marker.exists()


def test_a_payload_inside_the_index_is_refused_unrun(tmp_path):
    """A real index with a payload in one of its fields (what a careful attacker writes)."""
    marker = tmp_path / "ran"
    index = pickle.loads((LEGACY / sharded.METADATA).read_bytes())
    index.planner_data["x"] = Payload(marker)
    path = with_index(tmp_path / "ckpt", pickle.dumps(index))
    with pytest.raises(ckpt.CheckpointError, match="mkdir is not allowed"):
        ckpt.load(path)
    assert not marker.exists()


def evil_byte_item(tmp_path: Path, marker: Path) -> Path:
    """The legacy checkpoint saved again with a payload as the learning rate (a byte item)."""
    import torch.distributed.checkpoint as dcp

    state = sharded.read_full(LEGACY, {"model", "optimizer"})
    state["optimizer"]["param_groups"][0]["lr"] = Payload(marker)
    dest = tmp_path / "checkpoint_00000002"
    dest.mkdir(parents=True)
    dcp.save(state, checkpoint_id=str(dest), no_dist=True)
    shutil.copy(LEGACY / sharded.HEADER, dest / sharded.HEADER)
    return dest


def test_a_payload_as_a_byte_item_is_refused_unrun(tmp_path):
    marker = tmp_path / "ran"
    path = evil_byte_item(tmp_path, marker)
    assert not marker.exists()
    with pytest.raises(ckpt.CheckpointError, match="unreadable"):
        sharded.read_full(path, {"optimizer"})
    target = sharded.read_full(LEGACY, {"model", "optimizer"})  # what `train --resume` fills in place
    with pytest.raises(ckpt.CheckpointError, match="do not load"):
        sharded.load_into(path, target)
    assert not marker.exists()
    assert ckpt.load(path).model  # the weights alone are untouched by the payload


def commands(path: Path, tmp_path: Path, good: dict) -> dict[str, list[str]]:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copytree(path, run / path.name)
    return {
        "consolidate": ["consolidate", str(path), "-o", str(tmp_path / "one.pt")],
        "translate": ["translate", str(path), "--input", str(good["src"]), "--device", "cpu"],
        "export": ["export", str(path), "--out", str(tmp_path / "exported")],
        "average": ["average", str(path), str(path), "-o", str(tmp_path / "avg.pt")],
        "init": ["train", str(good["spec"]), "--data", str(good["data"]), "--init", str(path), "--out",
                 str(tmp_path / "fresh"), "--procs", "1"],
        "resume": ["train", str(good["spec"]), "--data", str(good["data"]), "--out", str(run), "--resume",
                   "--procs", "1"],
    }


@pytest.mark.parametrize("command", ["consolidate", "translate", "export", "average", "init", "resume"])
def test_no_command_runs_a_crafted_index(command, tmp_path, sandbox, tiny_artifacts):
    marker = tmp_path / "ran"
    index = pickle.loads((LEGACY / sharded.METADATA).read_bytes())
    index.planner_data["x"] = Payload(marker)
    path = with_index(tmp_path / "checkpoint_00000002", pickle.dumps(index))
    outcome = sandbox.run(commands(path, tmp_path, tiny_artifacts)[command], timeout=120, canary=marker)
    assert not outcome.code_ran and not outcome.problems(), outcome.summary()
    if command == "resume":  # an unreadable newest checkpoint is skipped, named, and kept
        assert outcome.code == 0 and (tmp_path / "run" / path.name / sharded.METADATA).exists()
    else:
        assert outcome.code in (1, 2) and "mkdir is not allowed in a shard index" in outcome.stderr


def test_the_allow_list_names_only_data_classes():
    assert all(module.startswith(("torch", "pathlib")) for module, _ in dcp_safe.METADATA_CLASSES)
    assert torch.float32 is dcp_safe._MetadataUnpickler.find_class(
        dcp_safe._MetadataUnpickler(__import__("io").BytesIO()), "torch", "float32")
    with pytest.raises(pickle.UnpicklingError):
        dcp_safe._MetadataUnpickler(__import__("io").BytesIO()).find_class("torch", "load")
