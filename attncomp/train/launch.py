"""Start training workers through torch.distributed's elastic launcher (what torchrun uses).

One node: `nproc` workers on this machine (NCCL on GPUs, gloo on CPU). Several nodes: the same
command on each, with the rendezvous options; the c10d rendezvous assigns the machines' ranks
(there is no --node-rank), so every machine must see the same run directory (checked at start).

What a failure looks like here: a worker that fails with an attncomp error writes its message to
`<run>/errors/rank<R>.txt`; a worker whose collective failed because a peer went away writes
`rank<R>.peer.txt` (it names the peers that stopped responding). The launcher reports, in this
order: an attncomp error, a worker that died (a signal or an exit code, no message), a peer error.

SIGTERM and SIGUSR1 (what SLURM sends before it ends an allocation) are forwarded to the workers,
which save a checkpoint at the next sync point and stop; the command then exits with PREEMPTED.
A second signal ends the workers at once.

Ctrl-C (SIGINT, sent to the terminal's whole process group) ends the run with INTERRUPTED: torch
elastic's handler in the launcher ends the workers. Workers start with SIGINT blocked (a spawned process
inherits its parent's signal mask), so a worker still importing torch never prints a KeyboardInterrupt
traceback; its entry point unblocks it, and a Ctrl-C pending or arriving then is a KeyboardInterrupt,
which ends it quietly. The
launcher's handlers (and torch elastic's, for SIGINT, SIGHUP and SIGQUIT) are those of before `launch`
once it returns, so a command that goes on in the same process (a sweep scoring a row) sees Ctrl-C as
KeyboardInterrupt again.
"""

from __future__ import annotations

import ipaddress
import logging
import multiprocessing
import os
import re
import signal
import sys
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from attncomp import files
from attncomp.errors import AttncompError, TrainingError, UsageError

ERRORS = "errors"
PREEMPTED = 75  # exit code after a signal: a checkpoint was saved, continue with --resume (sysexits EX_TEMPFAIL)
INTERRUPTED = 130  # exit code after SIGINT, SIGHUP or SIGQUIT: workers ended without saving
SHUTDOWN_SECONDS = 15  # when the agent stops its workers: SIGTERM, then SIGKILL this much later
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
ELASTIC_SIGNALS = (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)  # torch elastic's signals_to_handle (below)
# the agent's queues of killed workers are left to multiprocessing's resource tracker, which warns at exit
QUIET_TRACKER = "ignore::UserWarning:multiprocessing.resource_tracker"


@dataclass
class Nodes:
    """The multi-machine options; the defaults are one standalone machine."""

    nnodes: int = 1
    rdzv_endpoint: str | None = None  # HOST:PORT of the rendezvous (any one machine of the run)
    rdzv_id: str | None = None  # the same on every machine of one run
    max_restarts: int = 0  # restarts of the whole worker group after a failure, from the last checkpoint
    timeout: float = 600.0  # seconds a collective (and the rendezvous) may wait for a peer


def check_nodes(nodes: Nodes) -> None:
    """Refuse bad multi-machine options with one line each."""
    if nodes.nnodes < 1:
        raise UsageError(f"--nnodes must be at least 1, not {nodes.nnodes}")
    if nodes.max_restarts < 0:
        raise UsageError(f"--max-restarts must be 0 or more, not {nodes.max_restarts}")
    if not nodes.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {nodes.timeout}")
    if nodes.rdzv_endpoint is not None:
        parse_endpoint(nodes.rdzv_endpoint)
    elif nodes.nnodes > 1:
        raise UsageError(f"--nnodes {nodes.nnodes} needs --rdzv-endpoint HOST:PORT (one machine of the run, "
                         "the same on all)")


HOST_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?")


def _host(text: str) -> str | None:
    """The host of HOST:PORT as the rendezvous takes it (a host name, IPv4, or [IPv6]), or None."""
    if text.startswith("[") or text.endswith("]"):
        text = text[1:-1] if text.startswith("[") and text.endswith("]") and len(text) > 2 else "["
        try:
            return str(ipaddress.IPv6Address(text))
        except ValueError:
            return None
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text if HOST_NAME.fullmatch(text) else None


def parse_endpoint(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = _host(host)
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--rdzv-endpoint must be HOST:PORT with a port from 1 to 65535, not {text!r} (HOST: a "
                         "host name, an IPv4 address or [IPv6])")
    return host, int(port)


class WorkerError(AttncompError):
    """An attncomp error raised in a worker, re-raised in the launching process with its exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code

    def format(self) -> str:
        return str(self)


class Stopped(AttncompError):
    """The run stopped on a signal: PREEMPTED after saving (a requeued job continues with --resume),
    INTERRUPTED without."""

    def __init__(self, message: str, exit_code: int = PREEMPTED):
        super().__init__(message)
        self.exit_code = exit_code

    def format(self) -> str:
        return f"stopped: {self}"


def _error_file(run_dir: Path, rank: int, peer: bool) -> Path:
    return run_dir / ERRORS / f"rank{rank}{'.peer' if peer else ''}.txt"


def clear_errors(run_dir: Path, rank: int) -> None:
    """Called in a worker at start (also after a restart): forget this rank's earlier failure."""
    for peer in (False, True):
        _error_file(run_dir, rank, peer).unlink(missing_ok=True)
    (run_dir / ERRORS / f"rank{rank}.ended").unlink(missing_ok=True)


def mark_ended(run_dir: Path, rank: int) -> None:
    """Called in a worker before it ends a frozen peer: that death is a consequence, not the cause."""
    path = run_dir / ERRORS / f"rank{rank}.ended"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def report_error(run_dir: Path, rank: int, err: AttncompError, peer: bool = False) -> None:
    """Called in a worker: leave the formatted error where the launcher will find it (atomically)."""
    path = _error_file(run_dir, rank, peer)
    path.parent.mkdir(parents=True, exist_ok=True)
    files.write_atomically(path, f"{err.exit_code}\n{err.format()}\n")


def report_internal_error(run_dir: Path, rank: int, err: Exception) -> None:
    """Called in a worker on an unexpected exception: the traceback goes to a file, the gist to the user."""
    import traceback

    directory = run_dir / ERRORS
    directory.mkdir(parents=True, exist_ok=True)
    trace = directory / f"rank{rank}.traceback"
    trace.write_text("".join(traceback.format_exception(err)))
    gist = f"{type(err).__name__}: {err}".splitlines()[0][:300]
    report_error(run_dir, rank, TrainingError(f"internal error in worker {rank}: {gist} (traceback: {trace})"))


def _reported(run_dir: Path, peer: bool) -> dict[int, WorkerError]:
    found = {}
    pattern = "rank*.peer.txt" if peer else "rank*[0-9].txt"
    for path in (run_dir / ERRORS).glob(pattern) if (run_dir / ERRORS).is_dir() else []:
        rank = int(path.name[4:].split(".")[0])
        code, _, message = path.read_text().partition("\n")
        found[rank] = WorkerError(message.strip(), int(code) if code.strip().isdigit() else 1)
    return found


def how_it_ended(exitcode: int) -> str:
    if exitcode == -signal.SIGABRT:  # NCCL's watchdog aborts a worker whose collective timed out
        return ("killed by signal 6 (SIGABRT; with NCCL, its watchdog ends a worker whose collective waited longer "
                "than --timeout: another worker may have frozen)")
    if exitcode < 0:
        try:
            return f"killed by signal {-exitcode} ({signal.Signals(-exitcode).name})"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode} without a message"


def explain_failure(run_dir: Path, failures: dict) -> AttncompError:
    """The most telling account of a failed worker group (see the module's docstring for the order)."""
    primary, peer = _reported(run_dir, peer=False), _reported(run_dir, peer=True)
    if primary:
        return primary[min(primary)]
    for rank, failure in sorted(failures.items()):
        if rank not in peer and not (run_dir / ERRORS / f"rank{rank}.ended").exists():
            return TrainingError(f"worker {rank} (rank {rank}, pid {failure.pid}) died: "
                                 f"{how_it_ended(failure.exitcode)}; the last complete checkpoint in {run_dir} is "
                                 "intact (continue with --resume)")
    if peer:
        return peer[min(peer)]
    return TrainingError(f"the workers failed without a message; see {run_dir / ERRORS}")


class _SignalForwarder:
    """While workers run: the first SIGTERM/SIGUSR1 is passed on to them (they save and stop at the next
    sync point); a second ends them at once (SIGKILL), as does the first before any worker started."""

    def __init__(self):
        self.received: str | None = None
        self.previous: dict = {}

    def __enter__(self):
        self.previous = {sig: signal.getsignal(sig) for sig in (*STOP_SIGNALS, *ELASTIC_SIGNALS)}
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():  # torch elastic leaves its own installed
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def _handle(self, signum, frame):
        from torch.distributed.elastic.multiprocessing.api import SignalException

        name = signal.Signals(signum).name
        second = self.received is not None
        self.received = self.received or name
        children = multiprocessing.active_children()
        for child in children:
            os.kill(child.pid, signal.SIGKILL if second else signum)
        if second or not children:  # no worker yet to save anything: stop the agent now
            raise SignalException(f"second {name}", sigval=signal.Signals(signum))
        os.write(2, f"{name}: passed on to the workers, which save and stop at their next sync point (every "
                    f"--log-every updates; an update still compiling finishes first); a second {name} ends them "
                    f"at once\n".encode())  # os.write: print may not be re-entered from a signal handler


@contextmanager
def _spawned_with_sigint_blocked():
    """Processes that multiprocessing spawns meanwhile (the workers) start with SIGINT blocked, and the
    worker's entry point unblocks it (attncomp.train.worker): a Ctrl-C while a worker imports torch stays
    pending until then, and ends it there quietly instead of printing a KeyboardInterrupt traceback.

    A spawned process inherits its parent's signal mask across exec (a handler it does not inherit), so
    SIGINT is blocked in the spawning thread only for the instant of each spawn. A Ctrl-C in that instant
    is not lost: it is delivered here (to torch elastic's handler) as soon as the mask is restored.
    CPython's resource tracker starts its process the same way (multiprocessing.resource_tracker).
    multiprocessing has no option for this, so its one spawning function is wrapped, for this block only.
    """
    import multiprocessing.util as mp_util  # popen_spawn_posix calls util.spawnv_passfds by attribute

    spawn = mp_util.spawnv_passfds

    def spawn_with_sigint_blocked(*args):
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return spawn(*args)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    mp_util.spawnv_passfds = spawn_with_sigint_blocked
    try:
        yield
    finally:
        mp_util.spawnv_passfds = spawn


def elastic_signals() -> tuple[signal.Signals, ...]:
    """The ELASTIC_SIGNALS that torch elastic handles for this run: those this process does not ignore.

    A signal the command inherits ignored stays ignored, in the launcher and (inheriting it) in every worker:
    POSIX shells start a background job (`attncomp train ... &`) with SIGINT and SIGQUIT ignored, so that a
    Ctrl-C at the terminal does not reach it, and `nohup` ignores SIGHUP. Python keeps such a signal ignored
    by itself; torch elastic would install its handler for each of `signals_to_handle` and end the run.
    With none left, elastic fails to register "" and logs that (its loggers are quietened in `launch`).
    """
    return tuple(sig for sig in ELASTIC_SIGNALS if signal.getsignal(sig) is not signal.SIG_IGN)


def _quiet_elastic_logging() -> None:
    """torch elastic's module loggers (each given its own level, WARNING, by its get_logger) print lines such as
    "Received 2 death signal, shutting down workers" beside the command's own message: raise them all."""
    for name in ("torch.distributed.elastic", "torch.multiprocessing"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.startswith(("torch.distributed.elastic.", "torch.distributed.launcher.")) and \
                isinstance(logger, logging.Logger):
            logger.setLevel(logging.CRITICAL)


def _config(nproc: int, nodes: Nodes):
    import dataclasses

    from torch.distributed.launcher.api import LaunchConfig

    standalone = nodes.nnodes == 1 and nodes.rdzv_endpoint is None
    # signals_to_handle and shutdown_timeout are newer than the oldest PyTorch we support (2.11 lacks the second)
    known = {field.name for field in dataclasses.fields(LaunchConfig)}
    optional = {"signals_to_handle": ",".join(sig.name for sig in elastic_signals()),
                "shutdown_timeout": SHUTDOWN_SECONDS}
    return LaunchConfig(
        min_nodes=nodes.nnodes, max_nodes=nodes.nnodes, nproc_per_node=nproc,
        run_id=nodes.rdzv_id or (f"attncomp-{uuid.uuid4().hex[:8]}" if standalone else "attncomp"),
        rdzv_backend="c10d", rdzv_endpoint="localhost:0" if standalone else nodes.rdzv_endpoint,
        rdzv_configs={"join_timeout": max(60, int(nodes.timeout))},
        max_restarts=nodes.max_restarts, monitor_interval=0.1, start_method="spawn",
        **{key: value for key, value in optional.items() if key in known},
    )


def launch(entrypoint: Callable[..., Any], args: tuple, nproc: int, run_dir: Path,
           nodes: Nodes = Nodes()) -> tuple[list[Any], str | None]:
    """Run entrypoint(*args) in `nproc` workers per node; raise a clear error if any fails. Returns the
    local workers' return values and the stop signal received here (None without one)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError, RendezvousError
    from torch.distributed.launcher.api import elastic_launch

    _quiet_elastic_logging()
    for stale in (run_dir / ERRORS).glob("rank*") if (run_dir / ERRORS).is_dir() else []:
        stale.unlink(missing_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # workers: no C++ stack dumps when a peer goes away
    if QUIET_TRACKER not in sys.warnoptions:  # read when the resource tracker process starts
        sys.warnoptions.append(QUIET_TRACKER)
    forwarder = _SignalForwarder()
    try:
        with forwarder, _spawned_with_sigint_blocked():
            values = elastic_launch(_config(nproc, nodes), entrypoint)(*args)
    except ChildFailedError as failure:
        explained = explain_failure(run_dir, failure.failures)
        if forwarder.received and not isinstance(explained, WorkerError):  # a worker still starting up
            raise Stopped(f"{forwarder.received}: the workers ended before they could save; the last complete "
                          f"checkpoint in {run_dir} is intact (continue with --resume)") from None
        raise explained from None
    except SignalException as err:
        code = PREEMPTED if err.sigval in STOP_SIGNALS else INTERRUPTED
        raise Stopped(f"{err.sigval.name}: the workers were ended without saving; the last complete checkpoint in "
                      f"{run_dir} is intact (continue with --resume)", code) from None
    except RendezvousError as err:
        if _reported(run_dir, peer=False) or _reported(run_dir, peer=True):  # lost mid-run: the workers know more
            raise explain_failure(run_dir, {}) from None
        if isinstance(err, RendezvousConnectionError):
            raise TrainingError(f"lost the connection to the rendezvous at {nodes.rdzv_endpoint}: the machine "
                                "hosting it stopped or lost the network (or it was never reachable)") from None
        gist = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise TrainingError(f"the rendezvous at {nodes.rdzv_endpoint} failed: {gist} (were all {nodes.nnodes} "
                            "machines started with the same --rdzv-endpoint and --rdzv-id, and is the machine at "
                            "that address still up?)") from None
    return [values[k] for k in sorted(values)], forwarder.received
