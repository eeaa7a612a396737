"""Several machines simulated on one host over loopback gloo, preemption, restarts and extending a run.

Two `attncomp train --nnodes 2` processes with a loopback rendezvous stand for two machines; faults
are real signals, sent once the run's progress line of an update appears (tests/signals.py)."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest
import torch

from attncomp.cli.main import run
from attncomp import checkpoint as ckpt
from attncomp.train.launch import PREEMPTED
from tests.conftest import ROOT
from tests.signals import Watched

TINY = str(ROOT / "specs/examples/tiny.attn")
SHORT = ["--set", "train.steps=12", "--set", "train.checkpoint.every=4", "--set", "train.batch=tokens(600)"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(data, out, port, procs, *extra) -> Watched:
    """One simulated machine: its own process group, so a test can kill the whole machine."""
    return Watched(["train", TINY, "--data", str(data), "--out", str(out), "--procs", str(procs), "--nnodes", "2",
                    "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "test", *extra])


def finish(*nodes, limit=240):
    return [node.finish(limit) for node in nodes]


def params(path):
    return ckpt.load(path).model


def same(a, b) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def straight(straight_tiny):
    """One CPU worker, SHORT's 12 updates without interruption (tests/conftest.py)."""
    return params(straight_tiny / "checkpoint_00000012.pt")


def test_two_machines_of_two_workers_match_one_machine_of_four(sample_data, tmp_path):
    quick = ["--set", "train.steps=4", "--set", "train.checkpoint.every=4", "--set", "train.batch=tokens(600)"]
    assert run(["train", TINY, "--data", str(sample_data), "--out", str(tmp_path / "one"), "--procs", "4",
                *quick]) == 0
    port = free_port()
    nodes = [start_node(sample_data, tmp_path / "two", port, 2, *quick) for _ in range(2)]
    for code, err in finish(*nodes):
        assert code == 0, err
    # the same ranks compute the same micro-batches and gloo reduces 4 ranks in the same order: bit for bit
    assert same(params(tmp_path / "one" / "checkpoint_00000004.pt"), params(tmp_path / "two" / "checkpoint_00000004.pt"))


def test_machines_without_shared_storage_stop_at_start(sample_data, tmp_path):
    port = free_port()
    nodes = [start_node(sample_data, tmp_path / f"node{i}", port, 1, *SHORT) for i in range(2)]
    for code, err in finish(*nodes):
        assert code == 1 and "must see the same --out on shared storage" in err and "Traceback" not in err, err
    assert not list(tmp_path.glob("node*/checkpoint_*"))


def test_killing_one_machine_ends_the_other_with_a_clear_message(sample_data, tmp_path):
    port = free_port()
    start = time.monotonic()
    logged = [*SHORT, "--set", "train.steps=200", "--timeout", "20", "--log-every", "2", "--log-interval", "0.001"]
    survivor = start_node(sample_data, tmp_path / "run", port, 1, *logged)
    killed = start_node(sample_data, tmp_path / "run", port, 1, *logged)
    deadline = time.monotonic() + 180
    while not any("step 2/200" in node.output for node in (survivor, killed)):  # rank 0 logs, on either machine
        assert time.monotonic() < deadline, survivor.output + killed.output
        time.sleep(0.05)
    killed.signal_group(signal.SIGKILL)  # the whole machine
    (code, err), (killed_code, _) = finish(survivor, killed, limit=120)
    assert killed_code == -signal.SIGKILL
    assert code == 1 and "Traceback" not in err, err
    assert any(s in err for s in ("stopped responding", "unreachable", "lost the connection")), err
    assert time.monotonic() - start < 100


def test_sigterm_saves_and_stops_resume_continues_exactly_and_extends(sample_data, tmp_path, straight, monkeypatch,
                                                                       capfd):
    out = tmp_path / "run"
    base = ["train", TINY, "--data", str(sample_data), "--out", str(out), "--procs", "1", "--log-every", "2", *SHORT]
    watched = Watched([*base, "--log-interval", "0.001"])
    watched.wait_for("step 4/12")
    watched.signal_launcher(signal.SIGTERM)  # what a cluster sends: the launcher forwards it
    code, err = watched.finish()
    assert code == PREEMPTED, err
    assert "SIGTERM: passed on to the workers, which save and stop at their next sync point" in err  # at once
    assert "stopped: SIGTERM: saved" in err
    saved = [s for s, _ in ckpt.listed(out)]
    assert saved[0] == 4 and len(saved) == 2 and saved[1] % 2 == 0 and saved[1] < 12  # at the next sync point
    assert run([*base, "--resume"]) == 0
    assert same(params(out / "checkpoint_00000012.pt"), straight)
    # extending the finished run: run-length keys are taken and recorded, the architecture is not
    assert run([*base, "--resume", "--set", "model.d_ff=128", "--set", "train.steps=14"]) == 2
    err = capfd.readouterr().err
    assert "model.encoder.d_ff (256 -> 128)" in err and "train.steps" not in err.split("--resume may")[0]
    assert run([*base, "--resume", "--set", "train.steps=14"]) == 0
    assert "extending the run from step 12: train.steps: 12 -> 14" in capfd.readouterr().err  # a worker's log
    extended = json.loads((out / "run.json").read_text())["extended"]
    assert extended == [{"from": "checkpoint_00000012.pt", "step": 12, "changes": ["train.steps: 12 -> 14"]}]
    assert ckpt.load(out / ckpt.AVERAGE).header.step == 14


def test_a_failed_worker_restarts_from_the_last_checkpoint(sample_data, tmp_path, straight):
    out = tmp_path / "run"
    watched = Watched(["train", TINY, "--data", str(sample_data), "--out", str(out), "--procs", "1", *SHORT,
                       "--max-restarts", "1", "--log-every", "2", "--log-interval", "0.001"])
    watched.wait_for("step 6/12")
    watched.signal_worker(0, signal.SIGKILL)
    code, err = watched.finish()
    assert code == 0, err
    assert same(params(out / "checkpoint_00000012.pt"), straight)
