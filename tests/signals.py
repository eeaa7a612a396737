"""Signals at real points of a run, for tests: `attncomp` runs as a child in its own process group, and a
test sends a signal to the launcher, one worker or the whole group once a line of the run's output appears
(a step's progress line, the line that opens a phase). Nothing in attncomp itself knows about it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.hostile import _is_worker
from tests.conftest import ROOT


class Watched:
    """`attncomp ARGV` in its own process group, its stdout and stderr read line by line into `lines`."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None):
        self.lines: list[str] = []
        self.child = subprocess.Popen([sys.executable, "-m", "attncomp.cli.main", *argv], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                      env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.child.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, limit: float = 180) -> None:
        """Until a line holding `text` has appeared (an AssertionError with the output if it never does)."""
        deadline = time.monotonic() + limit
        while not any(text in line for line in self.lines):
            assert self.child.poll() is None or self.reader.is_alive(), f"ended before {text!r}:\n{self.output}"
            assert time.monotonic() < deadline, f"no {text!r} within {limit} s:\n{self.output}"
            time.sleep(0.05)

    def workers(self) -> list[int]:
        """The pids of the training workers (spawned processes of the group), oldest first: rank order."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                fields = stat[stat.rindex(")") + 2:].split()
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if int(fields[2]) == self.child.pid and _is_worker(cmd):
                found.append((int(fields[19]), int(entry.name)))  # start time, pid
        return [pid for _, pid in sorted(found)]

    def signal_worker(self, index: int, signum: int) -> None:
        os.kill(self.workers()[index], signum)

    def signal_launcher(self, signum: int) -> None:
        os.kill(self.child.pid, signum)

    def signal_group(self, signum: int) -> None:
        os.killpg(self.child.pid, signum)

    def finish(self, limit: float = 240) -> tuple[int, str]:
        try:
            code = self.child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(self.child.pid, signal.SIGKILL)
            raise AssertionError(f"still running after {limit} s:\n{self.output}") from None
        self.reader.join(5)
        return code, self.output
