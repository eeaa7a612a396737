"""Streaming average: memory stays near one checkpoint whatever their number; the result is the float64 mean.

How memory is measured: in a fresh subprocess (the test process's own heap would hide or inflate
growth), with glibc's mmap threshold at 64 KiB so that a freed tensor goes back to the system at once,
the peak resident set (VmHWM, reset through /proc/self/clear_refs) is read around (a) `torch.load` of
one checkpoint, all its tensors in memory, and (b) `checkpoint.average` of 20 of them. Resident pages
count whether they are anonymous or the memory-mapped file's, so nothing the average touches is unseen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from attncomp import checkpoint as ckpt
from tests.conftest import ROOT
from tests.train.test_checkpoint import header

COUNT, SHAPES = 20, [(1024, 1024), (512, 2048), (1024,)]  # 2.1M weights: 8 MiB (+ Adam's moments: 24 MiB)

PROBE = r"""
import json, sys, torch
from pathlib import Path
from attncomp import checkpoint as ckpt

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

def grown(work):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current resident set
    base = status("VmRSS")
    kept = work()
    return status("VmHWM") - base, kept

paths = [Path(p) for p in sys.argv[1:]]
ckpt.average(paths[:1])  # warm up: imports, the spec parse
one, kept = grown(lambda: torch.load(paths[0], weights_only=True))
del kept
peak, averaged = grown(lambda: ckpt.average(paths))
ckpt.save(averaged, paths[0].parent / "avg.pt")
print(json.dumps({"one": one, "peak": peak}))
"""


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    directory = tmp_path_factory.mktemp("average")
    generator = torch.Generator().manual_seed(0)
    paths = []
    for i in range(COUNT):
        model = {f"w{j}": torch.randn(shape, generator=generator) for j, shape in enumerate(SHAPES)}
        optimizer = {"state": {j: {"exp_avg": torch.zeros(s), "exp_avg_sq": torch.zeros(s)} for j, s in enumerate(SHAPES)},
                     "param_groups": [{"params": list(range(len(SHAPES)))}]}
        rng = [{"torch": torch.get_rng_state(), "python": None, "cuda": None}]
        paths.append(directory / f"checkpoint_{i:08d}.pt")
        torch.save(ckpt.Checkpoint(header(step=i + 1), model, optimizer, {"last_epoch": i}, rng).payload(), paths[-1])
    return paths


def _can_reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _can_reset_peak(), reason="needs Linux's /proc/self/clear_refs to reset the peak RSS")
def test_averaging_twenty_checkpoints_holds_about_one_in_memory(checkpoints):
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", PROBE, *map(str, checkpoints)], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    weights = sum(torch.Size(s).numel() for s in SHAPES) * 4
    print(f"one checkpoint {measured['one'] / 2**20:.1f} MiB, average of {COUNT} peak {measured['peak'] / 2**20:.1f} "
          f"MiB ({measured['peak'] / measured['one']:.2f}x one; the model's weights are {weights / 2**20:.1f} MiB)")
    assert measured["one"] > 2.5 * weights  # the probe sees a whole train checkpoint (weights + Adam's moments)
    assert measured["peak"] < 3 * measured["one"]
    averaged = ckpt.load(checkpoints[0].parent / "avg.pt").model
    models = [torch.load(p, weights_only=True, mmap=True)["model"] for p in checkpoints]
    for key in averaged:
        mean = torch.stack([m[key] for m in models]).double().mean(0)
        assert torch.equal(averaged[key], mean.float()), key
