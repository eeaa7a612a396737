"""What a worker does to be one of many: agree with the others, notice the ones that went away.

- `check_shared_storage`: every rank writes a token into its --out, rank 0 must see them all;
  otherwise every rank stops with one error that explains the need for shared storage.
- `agree`: a few values decided on one rank (rank 0's clock) or on any (a stop signal), made the
  same everywhere with one all-reduce at a sync point.
- `Heartbeat`: a thread that stamps this rank's key in the run's store every second; when a
  collective fails, `peer_failure` names the ranks whose stamps stopped (frozen or dead workers,
  or a whole machine), instead of the survivor's own gloo/NCCL error.
- `StopFlag`: SIGTERM/SIGUSR1 in a worker only set a flag; the loop saves and stops at its next
  sync point.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pydantic
import torch
import torch.distributed as dist

from attncomp import files
from attncomp.errors import AttncompError, TrainingError, UsageError
from attncomp import checkpoint as ckpt
from attncomp.train.launch import STOP_SIGNALS, mark_ended

STORAGE_WAIT = 3.0  # seconds rank 0 keeps looking for the other ranks' tokens (slow network file systems)
BEAT = 1.0  # seconds between heartbeats


class StorageError(TrainingError):
    """The ranks of a run do not see the same run directory."""


class StopFlag:
    """The name of the first SIGTERM/SIGUSR1 this worker got, or None."""

    def __init__(self):
        self.signal: str | None = None

    def install(self) -> StopFlag:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._set)
        return self

    def _set(self, signum, frame) -> None:
        self.signal = self.signal or signal.Signals(signum).name


def check_shared_storage(out: Path, rank: int, world: int) -> None:
    """Every rank proves it sees rank 0's run directory (a token file each, after a barrier)."""
    token = [uuid.uuid4().hex if rank == 0 else None]
    dist.broadcast_object_list(token, 0)
    mine = out / f".storage-{token[0]}-rank{rank}"
    mine.write_text(f"{rank}\n")
    dist.barrier()
    verdict: list = [None, None]
    if rank == 0:
        deadline = time.monotonic() + STORAGE_WAIT
        while True:
            missing = [r for r in range(world) if not (out / f".storage-{token[0]}-rank{r}").exists()]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        verdict = [missing, str(out.resolve())]
    dist.broadcast_object_list(verdict, 0)
    dist.barrier()
    mine.unlink(missing_ok=True)
    missing, seen = verdict
    if missing:
        ranks = ", ".join(map(str, missing))
        raise StorageError(f"rank(s) {ranks} do not write to the --out directory that rank 0 sees ({seen}): every "
                           "machine of a run must see the same --out on shared storage (NFS, Lustre, ...), because "
                           "the checkpoints rank 0 writes are what every rank resumes from; give each machine the "
                           "same path on a shared file system")


def agree_on_checkpoint(out: Path, rank: int, world: int, warn) -> ckpt.Checkpoint | None:
    """Rank 0 picks the checkpoint to resume from and tells the others; every rank reads that one, and if
    any cannot, every rank stops with the same message."""
    found = ckpt.latest_readable(out, warn=warn) if rank == 0 else None
    if not dist.is_initialized():
        return found
    choice = [str(found.path) if found else None]
    dist.broadcast_object_list(choice, 0)
    if choice[0] is None:
        return None
    problem = None
    if rank != 0:
        try:
            found = ckpt.load(choice[0], model=False)
        except AttncompError as err:
            problem = str(err)
    problems: list = [None] * world
    dist.all_gather_object(problems, problem)
    failed = {r: p for r, p in enumerate(problems) if p is not None}
    if failed:
        first = min(failed)
        raise TrainingError(f"rank(s) {', '.join(map(str, failed))} cannot read {choice[0]}, the checkpoint rank 0 "
                            f"resumes from (rank {first}: {failed[first]}); every machine must see the same --out "
                            "on shared storage")
    return found


RUN_RECORD = "run.json"


class _Extension(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True, populate_by_name=True)
    from_: str = pydantic.Field(alias="from")
    step: pydantic.conint(strict=True, ge=0)
    changes: list[str]


class RunRecord(pydantic.BaseModel):
    """run.json: the train command's options (for a reader) and the keys each --resume changed (read back)."""

    model_config = pydantic.ConfigDict(extra="allow")
    extended: list[_Extension] = []


def read_run_record(out: Path) -> dict:
    """run.json of the run directory `out` ({} when there is none), checked by RunRecord; a damaged one is
    one UsageError line saying what to do (it is the record of the run's extensions: kept, never overwritten
    unread; nothing else reads it, so moving it away loses only that record)."""
    path = out / RUN_RECORD
    if not path.exists() and not path.is_symlink():
        return {}
    shown = files.shown_path(path)
    remedy = ("it is kept as it is: move it away (rename or delete it) and run again; the checkpoints do not "
              "depend on it, only its record of what earlier --resume runs changed is lost")

    def refused(reason: str) -> UsageError:
        return UsageError(f"{shown} is not a run record ({reason}); {remedy}")

    data = files.read_json(path, what="run record", error=refused)
    try:
        RunRecord.model_validate(data)
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])[:80] or "the top level"
        raise refused(f"{where}: {first['msg'][:160]}") from None
    return data


def record_extension(out: Path, path: Path, step: int, changes: list[str]) -> None:
    """Append a resumed run's changed keys to run.json (atomically)."""
    data = read_run_record(out)
    data.setdefault("extended", []).append({"from": path.name, "step": step, "changes": changes})
    files.write_atomically(out / RUN_RECORD, json.dumps(data, indent=2) + "\n")


def all_reduce(t: torch.Tensor) -> torch.Tensor:
    """Sum `t` over the workers in place (nothing to do for one)."""
    if dist.is_initialized():
        dist.all_reduce(t)
    return t


def agree(values: list[float], device: torch.device) -> list[float]:
    """The element-wise maximum over all ranks (a rank with nothing to say passes 0)."""
    if not dist.is_initialized():
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


class Heartbeat(threading.Thread):
    """Stamps `alive/<rank>` in a store of its own (a client of the run's TCPStore) every BEAT seconds."""

    def __init__(self, rank: int, world: int):
        super().__init__(daemon=True, name="attncomp-heartbeat")
        self.rank, self.world = rank, world
        self.address = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
        prefix = f"attncomp-alive/{os.environ.get('TORCHELASTIC_RUN_ID', '')}/" \
                 f"{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        self.store = dist.PrefixStore(prefix, dist.TCPStore(*self.address, is_master=False,
                                                            timeout=timedelta(seconds=5)))
        self.me = f"{socket.gethostname()} {os.getpid()}"
        self.store.set(str(rank), f"0 {self.me}")
        self.done = threading.Event()

    def run(self) -> None:
        beat = 0
        while not self.done.is_set():
            beat += 1
            try:
                self.store.set(str(self.rank), f"{beat} {self.me}")
            except Exception:  # the store's host is gone; peer_failure will say so
                return
            self.done.wait(BEAT)

    def stop(self) -> None:
        """End the beats before the process group goes: a daemon thread still inside the store's C++ client
        while the interpreter exits can abort the process ("terminate called without an active exception")."""
        self.done.set()
        self.join(timeout=5 * BEAT)

    def silent(self) -> dict[int, tuple[str, int]] | None:
        """{rank: (host, pid)} of the ranks whose stamp did not move over 2.5 beats (None: the store itself
        is unreachable)."""
        try:
            before = self._stamps()
            time.sleep(2.5 * BEAT)
            after = self._stamps()
        except Exception:
            return None
        found = {}
        for r in range(self.world):
            if r != self.rank and after[r] == before[r]:
                _, host, pid = (after[r] or b"0 ? 0").decode().split(" ")
                found[r] = (host, int(pid))
        return found

    def _stamps(self) -> list[bytes | None]:
        return [self.store.get(str(r)) if self.store.check([str(r)]) else None for r in range(self.world)]


def _end_if_frozen(out: Path, rank: int, host: str, pid: int) -> bool:
    """A silent worker on this machine that is still there (stopped, hung) is ended now rather than after
    the launcher's 30 s grace; a dead one (gone, or a zombie) is left for the launcher to report."""
    if host != socket.gethostname():
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state in ("Z", "X"):
        return False
    mark_ended(out, rank)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    return True


def peer_failure(err: Exception, out: Path, rank: int, heartbeat: Heartbeat | None,
                 timeout: float) -> TrainingError:
    """A collective failed on this rank: name the workers that stopped responding (and end the frozen
    ones on this machine)."""
    gist = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
    silent = heartbeat.silent() if heartbeat is not None else {}
    if silent is None:
        host, port = heartbeat.address
        who = (f"the run's store at {host}:{port} (on the machine of rank 0) is unreachable too: that machine "
               "stopped or lost the network")
    elif silent:
        ended = [r for r, (host, pid) in silent.items() if _end_if_frozen(out, r, host, pid)]
        who = "; ".join(f"worker {r} (rank {r}, pid {pid} on {host}) stopped responding (no heartbeat)"
                        f"{': frozen, ended it' if r in ended else ''}" for r, (host, pid) in sorted(silent.items()))
    else:
        who = "every worker still answers; see the other workers' errors"
    return TrainingError(f"worker {rank}: a collective operation failed ({gist}); {who}. Collectives wait at most "
                         f"--timeout {timeout:g} s")


def is_collective_failure(err: Exception) -> bool:
    """gloo/NCCL errors: a peer went away or a collective timed out."""
    if isinstance(err, getattr(dist, "DistError", ())):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and any(
        s in text for s in ("gloo", "Gloo", "NCCL", "Connection closed", "Connection reset", "Timed out", "timed out",
                            "Broken pipe"))


