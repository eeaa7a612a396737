"""The checkpoint artifact: what load accepts, what it refuses (one line naming file and field)."""

from __future__ import annotations

import hashlib

import json

import pytest
import torch

from attncomp import checkpoint as ckpt
from attncomp import ir
from attncomp.checkpoint.schema import FIELDS, TRAINING_FIELDS
from tests.conftest import ROOT

SPEC = ir.load(ROOT / "specs/examples/tiny.attn", ["model.layers=1"])
TEXT, HASH = ir.to_text(SPEC), ir.spec_hash(SPEC)


def header(**changes) -> ckpt.Header:
    fields = dict(attncomp="0.1.0", kind="train", spec=TEXT, spec_hash=HASH, data=json.dumps({"pairs": 3}),
                  tokenizers={"src": torch.arange(5, dtype=torch.uint8), "tgt": torch.arange(6, dtype=torch.uint8)},
                  step=4, position=(0, 4), metrics={"loss": 2.5})
    return ckpt.Header(**{**fields, **changes})


def model_state(seed: int = 0) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return {"embed.weight": torch.randn(8, 4), "layer.bias": torch.randn(4), "count": torch.tensor(3)}


def train_checkpoint(seed: int = 0, step: int = 4) -> ckpt.Checkpoint:
    optimizer = {"state": {0: {"step": torch.tensor(1.0), "exp_avg": torch.zeros(8, 4)}},
                 "param_groups": [{"lr": 1.0, "params": [0, 1]}]}
    rng = [{"torch": torch.get_rng_state(), "python": (3, (1, 2), None), "cuda": None}]
    return ckpt.Checkpoint(header(step=step), model=model_state(seed), optimizer=optimizer,
                           scheduler={"last_epoch": step}, rng=rng)


def test_a_checkpoint_saves_and_loads_typed(tmp_path):
    ckpt.save(train_checkpoint(), tmp_path / "c.pt")
    found = ckpt.load(tmp_path / "c.pt")
    assert found.header.step == 4 and torch.equal(found.header.tokenizers["tgt"], torch.arange(6, dtype=torch.uint8))
    assert found.header.version == ckpt.VERSION and found.header.position == (0, 4) and not found.header.sharded
    assert torch.equal(found.model["embed.weight"], model_state()["embed.weight"])
    assert ckpt.stored_spec(found).model.name == "tiny"


@pytest.mark.parametrize("fsdp", [{}, {"sharded": True}])  # version 1 wrote `sharded` for --fsdp runs, whole tensors
def test_a_version_1_checkpoint_written_the_old_way_loads(tmp_path, fsdp):
    old = {  # as attncomp/train/checkpoint.py wrote it: no `sharded` on average ones, no `averaged` on train ones
        "format": "attncomp-checkpoint", "version": 1, "attncomp": "0.1.0", "kind": "train", "spec": TEXT,
        "spec_hash": HASH, "tokenizers": {"src": torch.ones(3, dtype=torch.uint8), "tgt": torch.ones(3, dtype=torch.uint8)},
        "data": json.dumps({"pairs": 1}), "step": 8, "position": [1, 2], "model": model_state(),
        "optimizer": {"state": {}, "param_groups": [{"params": [0]}]}, "scheduler": {}, "rng": [
            {"torch": torch.get_rng_state(), "python": None, "cuda": None}], "metrics": {}}
    torch.save({**old, **fsdp}, tmp_path / "v1.pt")
    found = ckpt.load(tmp_path / "v1.pt")
    assert (found.header.version, found.header.step, found.header.position, found.header.sharded) == (1, 8, (1, 2), False)


BAD_VALUES = {"attncomp": 1, "kind": "best", "spec": "", "spec_hash": "abc", "data": "[1, 2]", "step": -1,
              "position": [0], "metrics": {"loss": "low"}, "sharded": "no", "averaged": "x.pt",
              "tokenizers": {"src": torch.zeros(3)}, "optimizer": {"state": {}}, "scheduler": [], "rng": []}


@pytest.mark.parametrize("name", [*FIELDS, *TRAINING_FIELDS])
@pytest.mark.parametrize("fault", ["missing", "wrong"])
def test_a_missing_or_wrong_field_is_one_line_naming_file_and_field(tmp_path, name, fault):
    payload = train_checkpoint().payload()
    if fault == "missing":
        del payload[name]
    else:
        payload[name] = BAD_VALUES[name]
    torch.save(payload, tmp_path / "c.pt")
    with pytest.raises(ckpt.CheckpointError) as err:
        ckpt.load(tmp_path / "c.pt")
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'c.pt'}: field '{name}'") and "\n" not in message, message


EXTENDS = 'extends "/etc/passwd"\n' + TEXT  # a consistent hash: refused because it is not flat


@pytest.mark.parametrize("change, message", [
    ({"version": 3}, "field 'version' is 3; this attncomp reads versions 1, 2"),
    ({"format": "other"}, "is not an attncomp checkpoint"),
    ({"spec_hash": "0" * 64}, "field 'spec_hash' does not match its stored spec"),
    ({"spec": EXTENDS, "spec_hash": hashlib.sha256(EXTENDS.encode()).hexdigest()}, "(its stored spec)"),
    ({"model": {"embed.weight": "x"}}, "field 'model' should be a non-empty dict"),
    ({"model": {}}, "field 'model' should be a non-empty dict"),
])
def test_inconsistent_checkpoints_are_refused(tmp_path, change, message):
    torch.save({**train_checkpoint().payload(), **change}, tmp_path / "c.pt")
    with pytest.raises(Exception) as err:
        ckpt.load(tmp_path / "c.pt")
    assert message in str(err.value) and "root:" not in str(err.value)


def test_non_finite_weights_are_refused_by_name(tmp_path):
    bad = train_checkpoint()
    bad.model["layer.bias"][1] = float("nan")
    ckpt.save(bad, tmp_path / "nan.pt")
    with pytest.raises(ckpt.CheckpointError, match=r"field 'model': layer.bias has 1 non-finite value"):
        ckpt.load(tmp_path / "nan.pt")
    assert ckpt.load(tmp_path / "nan.pt", model=False).header.step == 4  # the header alone is fine


def test_not_checkpoints_at_all(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    (tmp_path / "dir").mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoint_00000004.pt").write_bytes(b"")
    (tmp_path / "tiny.attn").write_text((ROOT / "specs/examples/tiny.attn").read_text())
    (tmp_path / "binary.pt").write_bytes(b"\x80\x02\xff\xfe")
    for name, message in (("junk.pt", "not a readable attncomp checkpoint"), ("other.pt", "not an attncomp checkpoint"),
                          ("missing.pt", "no checkpoint"), ("dir", "not a sharded checkpoint$"),
                          ("run", r"not a sharded checkpoint; .*run is a run directory: give one of its "
                                  r"checkpoints, .*run/checkpoint_00000004.pt"),
                          ("tiny.attn", r"tiny.attn is not a readable attncomp checkpoint \(it is text, not a file "
                                        r"torch.save wrote; a spec is trained first, `attncomp train SPEC"),
                          ("binary.pt", r"binary.pt is not a readable attncomp checkpoint \((?!it is text)")):
        with pytest.raises(ckpt.CheckpointError, match=message):
            ckpt.load(tmp_path / name)


def test_average_equals_the_float64_mean(tmp_path):
    paths = []
    for seed in range(3):
        paths.append(tmp_path / f"checkpoint_{seed:08d}.pt")
        ckpt.save(train_checkpoint(seed, step=seed + 1), paths[-1])
    averaged = ckpt.average(paths)
    for key in ("embed.weight", "layer.bias"):
        mean = sum(model_state(seed)[key].double() for seed in range(3)) / 3
        assert averaged.model[key].dtype == torch.float32 and torch.equal(averaged.model[key], mean.float())
    assert averaged.header.kind == "average" and averaged.header.step == 3 and averaged.optimizer is None
    ckpt.save(averaged, tmp_path / "avg.pt")
    assert ckpt.load(tmp_path / "avg.pt").header.averaged == tuple(p.name for p in paths)
