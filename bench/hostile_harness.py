"""The hostile harness (bench/hostile.py's runner): a fork server that has attncomp and torch imported already,
and a child process per case, each in its own working directory, process group, memory limit and time limit;
what a case is (`Case`, its `Poke`), what it did (`Outcome`) and the rules it is held to (`Outcome.problems`).
The corpus (bench/hostile_corpus.py, the attacks in bench/hostile_*.py) and the driver (bench/hostile.py)
import it; it imports neither, so the hostile modules import one another without a circle.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

DOCUMENTED_EXITS = (0, 1, 2, 75, 130)  # 75: a run stopped by SIGTERM/SIGUSR1 after saving; 130: Ctrl-C (README)
MEMORY_LIMIT = 3 << 30  # bytes of address space per case (torch alone maps about 0.7 GiB)
ERROR_LINE = re.compile(r"^(?:.*:\d+:\d+: |attncomp[\w -]*: )?error: \S")  # located, plain or argparse's
TRACEBACK = re.compile(r"^Traceback \(most recent call last\)|^  File \"", re.M)
INTERNAL = re.compile(r"internal error")
# imported once by the fork server, not by every case: the commands, and what `train` and `sweep` import
# before they read anything (the runner and launcher, with sympy through torch: about 6 s a case otherwise)
PRELOAD = ["torch", "attncomp.cli.main", "attncomp.cli.spec_commands", "attncomp.cli.build_command",
           "attncomp.cli.data_command", "attncomp.cli.train_command", "attncomp.cli.decode_command",
           "attncomp.cli.demo_command", "attncomp.cli.sweep_command", "attncomp.cli.export_command",
           "attncomp.compiler", "attncomp.loading", "attncomp.train.worker", "attncomp.sweep.run"]


@dataclass
class Outcome:
    """What one command line did."""

    argv: list[str]
    code: int | None = None
    stdout: str = ""
    stderr: str = ""
    hung: bool = False
    escaped: str = ""  # the traceback of an exception that left run()
    seconds: float = 0.0
    code_ran: bool = False  # a code-injection canary was written
    poked: bool | None = None  # whether the case's signal reached a worker (None: the case sends none)

    def problems(self, *, bad_value: bool = False, command: str = "", expect: str = "") -> list[str]:
        """Why this outcome breaks the rules (empty when it keeps them)."""
        found = []
        if self.poked is False:
            found.append("harness: the signal found no worker to hit (the run ended or never started workers)")
        if expect and not re.search(expect, self.stderr, re.M):
            found.append(f"stderr lacks {expect!r} (e.g. the error names the wrong line)")
        if self.hung:
            found.append(f"hang, or too slow (killed after {self.seconds:.0f}s)")
        if self.escaped:
            found.append("exception escaped run(): " + self.escaped.strip().splitlines()[-1][:200])
        elif TRACEBACK.search(self.stderr) or TRACEBACK.search(self.stdout):
            found.append("traceback printed")
        if self.code_ran:
            found.append("CODE RAN: the injected payload wrote its canary")
        internal = [line for line in self.stderr.splitlines() if INTERNAL.search(line)]
        if self.code == 70 or internal:
            found.append(internal[0][:300] if internal else "internal error: exit 70")
        elif self.code is not None and self.code not in DOCUMENTED_EXITS and not self.hung:
            found.append(f"undocumented exit code {self.code}")
        if self.code not in (None, 0) and not internal and not self.hung and not self.escaped:
            found += self._error_lines(command)
        if bad_value and self.code == 0:
            found.append("bad value taken: exit 0")
        return found

    def _error_lines(self, command: str) -> list[str]:
        lines = self.stderr.splitlines()
        if self.code == 75:  # preempted: `stopped: SIGTERM: saved ...; continue with --resume`
            said = any(line.startswith("stopped: ") for line in lines)
            return [] if said else ["exit 75 without a 'stopped: ...' line"]
        if self.code == 130:  # Ctrl-C: `interrupted`, or train's `stopped: SIGINT: ...`
            said = any(line == "interrupted" or line.startswith("stopped: SIGINT") for line in lines)
            return [] if said else ["exit 130 without an 'interrupted' or 'stopped: SIGINT' line"]
        errors = [line for line in lines if ERROR_LINE.match(line)]
        if not errors:
            if command == "diff" and self.code == 1:
                return []  # `diff` exits 1 when the specs differ; documented
            tail = lines[-1][:200] if lines else "(nothing on stderr)"
            return [f"exit {self.code} without an 'error: ...' line; stderr ends: {tail!r}"]
        found = []
        if len(errors) > 1 and command not in ("check", "build"):  # these two report each spec they were given
            found.append(f"{len(errors)} error lines for one failure: {errors[:2]!r}")
        too_long = [line for line in errors if len(line) > 600]
        return found + ([f"error line of {len(too_long[0])} characters (dumps input?)"] if too_long else [])

    def summary(self) -> str:
        tail = self.stderr.strip().splitlines()[-1][:240] if self.stderr.strip() else ""
        return f"exit {'hang' if self.hung else self.code}; stderr: {tail!r}"


def _one_thread() -> None:
    """Make OMP_NUM_THREADS=1 hold: torch read its thread count when the fork server imported it, so
    the environment alone no longer changes it. Two intra-op threads on the shared, loaded 2-core
    machine decoded a 64-token line in 19.2 s against 0.9 s with one, and cases hung by that alone."""
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))


def _child(argv: list[str], cwd: str, out_dir: str, stdin_path: str | None, env: dict[str, str],
           after: list[str], closed: tuple[int, ...] = (), poke: Poke | None = None) -> None:  # pragma: no cover - runs in the fork server's child
    os.setpgrp()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as `attncomp` started from a terminal
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    os.chdir(cwd)
    os.environ.update(env)
    _one_thread()
    os.dup2(os.open(stdin_path or os.devnull, os.O_RDONLY), 0)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        os.dup2(os.open(os.path.join(out_dir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    for fd in closed:  # started with `<&-` or `>&-`: Python then has None for the stream
        os.close(fd)
        setattr(sys, ("stdin", "stdout")[fd], None)
    result: dict = {"code": None, "escaped": ""}
    fired = _poke_within(poke) if poke is not None else []
    try:
        from attncomp.cli.main import run

        result["code"] = run(argv)
    except SystemExit as stop:
        result["code"] = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - exactly what this harness looks for
        result["escaped"] = traceback.format_exc()
    for pattern in after:  # import what a build wrote: an injected payload runs here if anywhere
        for module in sorted(Path(cwd).glob(pattern)):
            try:
                import runpy

                runpy.run_path(str(module), run_name="hostile_import")
            except BaseException:  # noqa: BLE001 - a module that fails to import ran no payload past that point
                pass
    if sys.stdout is not None:
        sys.stdout.flush()
    sys.stderr.flush()
    result["poked"] = bool(fired)
    Path(out_dir, "result.json").write_text(json.dumps(result))
    os._exit(0)


def _poke_within(poke: Poke) -> list[bool]:  # pragma: no cover - runs in the fork server's child
    """Poke.within: an audit hook that sends the poke's signal to this process group as the process opens the
    first file inside a directory matching `poke.when` (once, `poke.delay` seconds after this call at the
    earliest). Returns the list it appends True to when it has fired."""
    import fnmatch

    fired: list[bool] = []
    pattern, earliest = str(poke.when), time.monotonic() + poke.delay

    def hook(event: str, args: tuple) -> None:
        if fired or event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        folder = os.path.dirname(os.path.abspath(os.fsdecode(args[0])))
        if fnmatch.fnmatchcase(folder, pattern) and time.monotonic() >= earliest:
            fired.append(True)
            os.killpg(0, poke.signum)  # KeyboardInterrupt is raised here, in the open call, for SIGINT

    sys.addaudithook(hook)
    return fired


def _is_worker(cmd: str) -> bool:
    """A spawned training worker, not multiprocessing's resource tracker. Workers' command lines carry
    `-W ignore::UserWarning:multiprocessing.resource_tracker` (attncomp.train.launch.QUIET_TRACKER) too,
    so the tracker is told apart by the code it runs."""
    return "spawn_main" in cmd and "resource_tracker import main" not in cmd


def _group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the live processes in a process group."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid:
                found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except (OSError, ValueError):
            continue
    return sorted(found)


@dataclass
class Poke:
    """Send `signum` to one training worker (the newest spawned process) `delay` seconds into a case; with
    `worker=None`, to the case's whole process group as a terminal's Ctrl-C does, once a worker is spawned
    (`workers=True`) or once a file matching `when` exists (a phase has begun: a sweep row's final checkpoint,
    the temporary directory an export or a data preparation builds in).

    `within=True`: the case's own process sends it to its group, from an audit hook, as it opens the first file
    inside a directory matching `when` (no earlier than `delay`), so that the signal lands while that directory
    exists and is being filled. Polling from outside every 0.2 s cannot see a directory that lives for a tenth
    of a second: `export --format ctranslate2`'s build directory of the tiny model, in a fork server's child,
    which has torch imported already (polled every millisecond: 0.10 s, 10.84 s to 10.95 s into the case).
    The signal reaches the process group as a terminal's Ctrl-C does; the process sees it in the open call."""

    delay: float
    signum: int
    worker: int | None = -1  # index among the spawned workers, oldest first; None: the process group
    when: Path | None = None
    within: bool = False  # with `when`: sent by the case itself as it opens a file in a directory matching `when`

    def fire(self, pgid: int) -> bool:
        workers = [pid for pid, cmd in _group_members(pgid) if _is_worker(cmd)]
        if self.worker is None:
            begun = self.when is not None and any(self.when.parent.glob(self.when.name))
            if (self.when is not None and not begun) or (self.when is None and not workers):
                return False
            os.killpg(pgid, self.signum)
            return True
        if len(workers) < 2:
            return False
        os.kill(workers[self.worker], self.signum)
        return True


class Sandbox:
    """Runs command lines in children of a fork server that has attncomp imported (fast, isolated)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(PRELOAD)
        self.count = 0

    def run(self, argv: Sequence[str], *, timeout: float = 30.0, stdin: Path | None = None, canary: Path | None = None,
            after: Sequence[str] = (), poke: Poke | None = None, cwd: Path | None = None,
            closed: tuple[int, ...] = ()) -> Outcome:
        self.count += 1
        out_dir = Path(tempfile.mkdtemp(prefix=f"case{self.count}-", dir=self.root))
        work = Path(cwd) if cwd else out_dir
        env = {"ATTNCOMP_TRACEBACK_DIR": str(out_dir), "OMP_NUM_THREADS": "1"}
        within = replace(poke, when=Path(os.path.abspath(poke.when))) if poke is not None and poke.within else None
        proc = self.ctx.Process(target=_child, args=(list(argv), str(work), str(out_dir),
                                                    str(stdin) if stdin else None, env, list(after), closed, within))
        start = time.monotonic()
        proc.start()
        hung, poked = self._wait(proc, timeout, None if within else poke, start)
        seconds = time.monotonic() - start
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # workers a command left behind, and a hung command
        except (ProcessLookupError, PermissionError):
            pass
        proc.join()
        outcome = Outcome(list(argv), hung=hung, seconds=seconds, poked=poked)
        outcome.stdout = _read(out_dir / "stdout")
        outcome.stderr = _read(out_dir / "stderr")
        if (out_dir / "result.json").exists():
            result = json.loads((out_dir / "result.json").read_text())
            outcome.code, outcome.escaped = result["code"], result["escaped"]
            outcome.poked = result["poked"] if within else outcome.poked
        elif not hung:
            outcome.escaped = f"the child died (exit {proc.exitcode}) without a result"
        outcome.code_ran = bool(canary and canary.exists())
        return outcome

    @staticmethod
    def _wait(proc, timeout: float, poke: Poke | None, start: float) -> tuple[bool, bool | None]:
        """(hung, poked): wait for the child, sending the poke's signal when its time comes."""
        poked = None if poke is None else False
        while proc.is_alive():
            elapsed = time.monotonic() - start
            if elapsed > timeout:
                return True, poked
            if poke is not None and not poked and elapsed >= poke.delay:
                poked = poke.fire(proc.pid)
            proc.join(0.2)
        return False, poked


def _read(path: Path) -> str:
    try:
        data = path.read_bytes()
        data = data if len(data) <= 40000 else data[:20000] + b"\n[...]\n" + data[-20000:]
        return data.decode("utf-8", errors="backslashreplace")
    except OSError:
        return ""


@dataclass
class Case:
    """One hostile command line: its category, the argv and how to judge it."""

    category: str
    argv: list[str]
    owner: str  # the helper area that owns the behaviour: front, ckpt, dist, cli
    timeout: float = 30.0
    bad_value: bool = False  # exit 0 is a failure: the case names a value that must be refused
    stdin: Path | None = None
    canary: Path | None = None
    after: list[str] = field(default_factory=list)
    poke: Poke | None = None
    note: str = ""
    cwd: Path | None = None
    expect: str = ""  # a regular expression stderr must match (a located error's line number)
    closed: tuple[int, ...] = ()  # standard streams the command starts without: 0 (`<&-`), 1 (`>&-`)
    absent: list[Path] = field(default_factory=list)  # globs nothing may match afterwards (an interrupted build's)


def run_cases(cases: list[Case], sandbox: Sandbox, progress: bool = True) -> list[tuple[Case, Outcome, list[str]]]:
    results = []
    for i, case in enumerate(cases, 1):
        outcome = sandbox.run(case.argv, timeout=case.timeout, stdin=case.stdin, canary=case.canary,
                              after=case.after, poke=case.poke, cwd=case.cwd, closed=case.closed)
        command = next((a for a in case.argv if not a.startswith("-")), "")
        problems = outcome.problems(bad_value=case.bad_value, command=command, expect=case.expect)
        left = sorted(str(p) for pattern in case.absent for p in pattern.parent.glob(pattern.name))
        problems += [f"left behind: {', '.join(left)}"] if left else []
        results.append((case, outcome, problems))
        if progress:
            mark = "FAIL" if problems else "ok"
            print(f"[{i}/{len(cases)}] {mark:4} {case.category}: {_shell(case.argv)[:150]}", file=sys.stderr)
    return results


def _shell(argv: Sequence[str]) -> str:
    import shlex

    return "attncomp " + " ".join(shlex.quote(a) for a in argv)
