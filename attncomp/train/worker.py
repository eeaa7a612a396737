"""The entry point of each training worker process (started by attncomp.train.launch): join the
process group with the run's --timeout, start the heartbeat, check the shared storage, train, and
turn every failure into a report the launcher can explain."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from attncomp.errors import AttncompError
from attncomp.train import cluster
from attncomp.train.launch import clear_errors, report_error, report_internal_error
from attncomp.train.runner import RunConfig, Trainer


def worker(cfg: RunConfig) -> dict | None:
    """The entry point of each worker process (started by attncomp.train.launch). After an elastic
    restart it resumes from the last checkpoint by itself."""
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank, out = int(os.environ.get("LOCAL_RANK", 0)), Path(cfg.out)
    stop, heartbeat = cluster.StopFlag().install(), None
    clear_errors(out, rank)
    if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0:
        cfg = replace(cfg, resume=True)
    try:
        # blocked since spawn (attncomp.train.launch): a Ctrl-C pending since then is a KeyboardInterrupt here,
        # unless SIGINT is ignored (inherited so from a command started ignoring it: launch.elastic_signals)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        if world > 1:
            if cfg.device == "cuda":
                torch.cuda.set_device(local_rank)
            dist.init_process_group(backend="nccl" if cfg.device == "cuda" else "gloo",
                                    timeout=timedelta(seconds=cfg.timeout))
            heartbeat = cluster.Heartbeat(rank, world)
            heartbeat.start()
            cluster.check_shared_storage(out, rank, world)
        return Trainer(cfg, rank, world, local_rank, stop).run()
    except AttncompError as err:
        report_error(out, rank, err)
        sys.stderr.flush()
        os._exit(err.exit_code)  # peers blocked in a collective are ended by the launcher
    except KeyboardInterrupt:  # Ctrl-C reaches every process of the terminal's group: end quietly
        os._exit(130)
    except Exception as err:
        if world > 1 and cluster.is_collective_failure(err):  # a consequence: name the peers that went away
            report_error(out, rank, cluster.peer_failure(err, out, rank, heartbeat, cfg.timeout), peer=True)
        else:  # a bug: keep the whole traceback where the launcher will point to it
            report_internal_error(out, rank, err)
        sys.stderr.flush()
        os._exit(1)
    finally:
        if heartbeat is not None:
            heartbeat.stop()
        if dist.is_initialized():
            dist.destroy_process_group()
        # done: a Ctrl-C from now on is the launcher's to handle (one here would print a KeyboardInterrupt
        # traceback from the interpreter's exit, such as logging's final flush)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
