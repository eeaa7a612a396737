"""Start training workers through torch.distributed's elastic launcher (what torchrun uses).

One node: `nproc` workers on this machine (NCCL on GPUs, gloo on CPU). Several nodes: the same
command on each, with torchrun's rendezvous arguments. A worker that fails with an attncomp error
writes its message to `<run>/errors/`; the launcher turns that into one clear error here. A worker
that dies (a signal, out of memory) is reported with its exit code.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from attncomp.errors import AttncompError, TrainingError

ERRORS = "errors"


@dataclass
class Nodes:
    """torchrun's multi-node arguments; the defaults are one standalone node."""

    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # HOST:PORT of the rendezvous (node 0)
    rdzv_id: str | None = None  # the same on every node of one run


class WorkerError(AttncompError):
    """An attncomp error raised in a worker, re-raised in the launching process with its exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code

    def format(self) -> str:
        return str(self)


def report_error(run_dir: Path, rank: int, err: AttncompError) -> None:
    """Called in a worker: leave the formatted error where the launcher will find it."""
    directory = run_dir / ERRORS
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"rank{rank}.txt").write_text(f"{err.exit_code}\n{err.format()}\n")


def report_internal_error(run_dir: Path, rank: int, err: Exception) -> None:
    """Called in a worker on an unexpected exception: the traceback goes to a file, the gist to the user."""
    import traceback

    directory = run_dir / ERRORS
    directory.mkdir(parents=True, exist_ok=True)
    trace = directory / f"rank{rank}.traceback"
    trace.write_text("".join(traceback.format_exception(err)))
    gist = f"{type(err).__name__}: {err}".splitlines()[0][:300]
    report_error(run_dir, rank, TrainingError(f"internal error in worker {rank}: {gist} (traceback: {trace})"))


def _worker_errors(run_dir: Path) -> WorkerError | None:
    files = sorted((run_dir / ERRORS).glob("rank*.txt")) if (run_dir / ERRORS).is_dir() else []
    for path in files:
        code, _, message = path.read_text().partition("\n")
        return WorkerError(message.strip(), int(code))
    return None


def launch(entrypoint: Callable[..., Any], args: tuple, nproc: int, run_dir: Path, nodes: Nodes = Nodes()) -> None:
    """Run entrypoint(*args) in `nproc` workers per node; raise a clear error if any fails."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    for stale in (run_dir / ERRORS).glob("rank*") if (run_dir / ERRORS).is_dir() else []:
        stale.unlink()
    standalone = nodes.nnodes == 1 and nodes.rdzv_endpoint is None
    config = LaunchConfig(
        min_nodes=nodes.nnodes, max_nodes=nodes.nnodes, nproc_per_node=nproc,
        run_id=nodes.rdzv_id or (f"attncomp-{uuid.uuid4().hex[:8]}" if standalone else "attncomp"),
        rdzv_backend="c10d", rdzv_endpoint="localhost:0" if standalone else nodes.rdzv_endpoint,
        rdzv_configs={"rank": nodes.node_rank} if not standalone else {},
        max_restarts=0, monitor_interval=0.1, start_method="spawn",
    )
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    try:
        elastic_launch(config, entrypoint)(*args)
    except ChildFailedError as failure:
        reported = _worker_errors(run_dir)
        if reported is not None:
            raise reported from None
        rank, first = min(failure.failures.items())
        how = f"signal {-first.exitcode}" if first.exitcode < 0 else f"exit code {first.exitcode}"
        raise TrainingError(f"worker {rank} died ({how}); the last complete checkpoint in {run_dir} is intact "
                            "(continue with --resume)") from None
