"""Workers that freeze or die, and bad multi-machine options: a bounded time, the worker named, one line."""

from __future__ import annotations

import signal
import time

import pytest

from attncomp.cli.main import run
from tests.conftest import ROOT
from tests.signals import Watched

TINY = str(ROOT / "specs/examples/tiny.attn")
SHORT = ["--set", "train.steps=12", "--set", "train.checkpoint.every=4", "--set", "train.batch=tokens(600)"]


def two_workers(data, out, *extra):
    return run(["train", TINY, "--data", str(data), "--out", str(out), "--procs", "2", *SHORT, *extra])


def signalled_at_step_2(data, out, signum, *extra) -> tuple[int, str, float]:
    """Two workers; worker 1 gets `signum` once rank 0 reports update 2. (exit code, output, seconds after)."""
    watched = Watched(["train", TINY, "--data", str(data), "--out", str(out), "--procs", "2", *SHORT,
                       "--set", "train.steps=200", "--log-every", "2", "--log-interval", "0.001", *extra])
    watched.wait_for("step 2/200")
    start = time.monotonic()
    watched.signal_worker(1, signum)
    code, output = watched.finish()
    return code, output, time.monotonic() - start


def test_a_frozen_worker_ends_the_run_within_the_timeout_and_is_named(sample_data, tmp_path):
    code, err, seconds = signalled_at_step_2(sample_data, tmp_path / "run", signal.SIGSTOP, "--timeout", "3")
    assert code == 1
    assert "worker 1 (rank 1" in err and "stopped responding (no heartbeat): frozen, ended it" in err, err
    assert "--timeout 3 s" in err and "Traceback" not in err
    assert seconds < 60  # 3 s timeout + 2.5 s heartbeat check, on a loaded machine


def test_a_killed_worker_is_reported_not_the_survivors_collective_error(sample_data, tmp_path):
    code, err, _ = signalled_at_step_2(sample_data, tmp_path / "run", signal.SIGKILL)
    assert code == 1
    assert "error: worker 1 (rank 1, pid" in err and "died: killed by signal 9 (SIGKILL)" in err, err
    assert "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize("args, message", [
    (["--nnodes", "0"], "--nnodes must be at least 1, not 0"),
    (["--nnodes", "2"], "--nnodes 2 needs --rdzv-endpoint HOST:PORT"),
    (["--rdzv-endpoint", "node0"], "--rdzv-endpoint must be HOST:PORT with a port from 1 to 65535, not 'node0'"),
    (["--rdzv-endpoint", "node0:99999"], "not 'node0:99999'"),
    (["--rdzv-endpoint", ":29400"], "not ':29400'"),
    (["--rdzv-endpoint", "[::1"], "not '[::1' (HOST: a host name, an IPv4 address or [IPv6])"),  # exit 70 before
    (["--rdzv-endpoint", "node_0..x:29400"], "not 'node_0..x:29400'"),
    (["--node-rank", "1"], "--node-rank is not used: the c10d rendezvous assigns each machine's rank"),
    (["--max-restarts", "-1"], "--max-restarts must be 0 or more"),
])
def test_bad_multi_machine_options_are_one_line(sample_data, tmp_path, args, message, capsys):
    assert run(["train", TINY, "--data", str(sample_data), "--out", str(tmp_path / "run"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value, message", [("0", "must be greater than 0 (got 0)"),
                                            ("nan", "must be a finite number (got nan)")])
def test_a_bad_timeout_is_argparses_usage_error(sample_data, tmp_path, value, message, capsys):
    """--timeout is checked as it is parsed (a finite number of seconds above 0, at most a week): argparse's usage
    error, exit 2, before anything starts."""
    with pytest.raises(SystemExit) as exit_:
        run(["train", TINY, "--data", str(sample_data), "--out", str(tmp_path / "run"), "--timeout", value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"attncomp train: error: argument --timeout: {message}", err
    assert not (tmp_path / "run").exists()


def test_the_launcher_reports_the_cause_before_its_consequences(tmp_path):
    from types import SimpleNamespace

    from attncomp.errors import TrainingError
    from attncomp.train.launch import explain_failure, mark_ended, parse_endpoint, report_error

    killed = {1: SimpleNamespace(pid=42, exitcode=-9)}
    report_error(tmp_path, 0, TrainingError("worker 0: a collective operation failed (...)"), peer=True)
    assert "worker 1 (rank 1, pid 42) died: killed by signal 9 (SIGKILL)" in str(explain_failure(tmp_path, killed))
    # the survivor was the one to fail first: its peer report, not a died message for itself
    assert "collective operation failed" in str(explain_failure(tmp_path, {0: SimpleNamespace(pid=7, exitcode=1)}))
    mark_ended(tmp_path, 1)  # a frozen worker that the survivor ended is a consequence too
    assert "collective operation failed" in str(explain_failure(tmp_path, killed))
    report_error(tmp_path, 1, TrainingError("the loss became nan at step 7"))
    assert str(explain_failure(tmp_path, killed)) == "error: the loss became nan at step 7"
    assert parse_endpoint("[::1]:29400") == ("::1", 29400)


def test_sigusr1_is_a_stop_request_and_the_launcher_forwards_it():
    import multiprocessing
    import os
    import signal

    from attncomp.train.cluster import StopFlag
    from attncomp.train.launch import _SignalForwarder

    before = signal.getsignal(signal.SIGUSR1)
    sigterm = signal.getsignal(signal.SIGTERM)  # StopFlag.install takes SIGTERM too (the suite's guard saw it left)
    try:
        flag = StopFlag().install()  # what a worker does
        os.kill(os.getpid(), signal.SIGUSR1)
        assert flag.signal == "SIGUSR1"
    finally:
        signal.signal(signal.SIGUSR1, before)
        signal.signal(signal.SIGTERM, sigterm)
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
    child.start()
    with _SignalForwarder() as forwarder:  # what the launcher does while workers run
        os.kill(os.getpid(), signal.SIGUSR1)
        child.join(10)
    assert forwarder.received == "SIGUSR1" and child.exitcode == -signal.SIGUSR1  # the child got it
    assert signal.getsignal(signal.SIGUSR1) is before


def _agree_in_worker(rank: int, cwd: str, store: str, result: str) -> None:
    """One gloo worker of two, in its own working directory: agree on the checkpoint of `run/`."""
    import os
    from datetime import timedelta
    from pathlib import Path

    import torch.distributed as dist

    from attncomp.errors import TrainingError
    from attncomp.train.cluster import agree_on_checkpoint

    os.chdir(cwd)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=30))
    try:
        found = agree_on_checkpoint(Path("run"), rank, 2, warn=lambda message: None)
        Path(result).write_text(f"resumed {found.path}")
    except TrainingError as err:
        Path(result).write_text(f"error: {err}")
    finally:
        dist.destroy_process_group()


def test_a_rank_that_cannot_read_rank_0s_checkpoint_stops_every_rank_with_one_message(tiny_artifacts, tmp_path):
    """Two machines with --out on local disks: rank 0 resumes from its checkpoint, rank 1 has none there."""
    import multiprocessing
    import shutil

    for machine in ("m0", "m1"):
        (tmp_path / machine / "run").mkdir(parents=True)
    shutil.copy(tiny_artifacts["ckpt_full"], tmp_path / "m0" / "run")
    ctx = multiprocessing.get_context("fork")  # torch is imported already: seconds, not a fresh interpreter each
    procs = [ctx.Process(target=_agree_in_worker, args=(rank, str(tmp_path / f"m{rank}"), str(tmp_path / "store"),
                                                        str(tmp_path / f"result{rank}"))) for rank in (0, 1)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    results = [(tmp_path / f"result{rank}").read_text() for rank in (0, 1)]
    assert results[0] == results[1], "every rank stops with the same message"
    name = tiny_artifacts["ckpt_full"].name
    assert results[0].startswith(f"error: rank(s) 1 cannot read run/{name}, the checkpoint rank 0 resumes from "
                                 f"(rank 1: no checkpoint run/{name})"), results[0]
    assert "every machine must see the same --out on shared storage" in results[0]


def test_the_corpus_finds_workers_whose_command_line_names_the_resource_tracker():
    """bench/hostile.py's Poke took every worker for the tracker once workers were started with
    `-W ignore::...resource_tracker`: the SIGSTOP/SIGKILL cases signalled nobody and ran to the end."""
    from bench.hostile import _is_worker
    from attncomp.train.launch import QUIET_TRACKER

    worker = f"python -B -W{QUIET_TRACKER} -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=27)"
    tracker = f"python -B -W{QUIET_TRACKER} -c from multiprocessing.resource_tracker import main;main(12)"
    assert _is_worker(worker) and not _is_worker(tracker)


def test_the_corpus_takes_a_preempted_run_with_its_stopped_line():
    """Exit 75 (SIGTERM, saved; README) counted as an undocumented exit code in bench/hostile.py."""
    from bench.hostile import Outcome

    saved = "stopped: SIGTERM: saved runs/x/checkpoint_00000200.pt at step 200; continue with --resume\n"
    assert Outcome(["train"], code=75, stderr=saved).problems(command="train") == []
    assert Outcome(["train"], code=75, stderr="").problems(command="train") == ["exit 75 without a 'stopped: ...' line"]
    assert Outcome(["train"], code=3, stderr="error: x\n").problems(command="train") == ["undocumented exit code 3"]
