"""Progress that a cluster log can read: a tqdm bar on a terminal, plain timed lines otherwise.

When stderr is not a terminal (a batch job's log file, a pipe), a bar would print nothing useful,
so `Progress` writes one line at most every `interval` seconds and one line when it closes:

    translate: 1,200/3,003 sent (41.3 sent/s, ETA 0:00:44)
    translate: 3,003 sent in 72.4s (41.5 sent/s)
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from typing import TextIO

from tqdm import tqdm

DEFAULT_INTERVAL = 30.0  # seconds between lines without a terminal


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


def clock(seconds: float) -> str:
    """H:MM:SS, whole seconds."""
    return str(timedelta(seconds=int(max(0.0, seconds))))


class Progress:
    """Count `total` items of `unit`; see the module docstring for what is shown where."""

    def __init__(self, total: int, desc: str, unit: str, interval: float = DEFAULT_INTERVAL,
                 stream: TextIO | None = None, enabled: bool = True, summary: bool = True):
        self.total, self.desc, self.unit, self.interval = total, desc, unit, interval
        self.summary = summary  # the closing line (without a terminal)
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = is_terminal(self.stream)
        self.done = 0
        self.started = self.last_line = time.monotonic()
        self.bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream, leave=False) \
            if enabled and self.tty else None

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.enabled and time.monotonic() - self.last_line >= self.interval:
            self.last_line = time.monotonic()
            rate = self.done / max(self.last_line - self.started, 1e-9)
            eta = (self.total - self.done) / rate if rate > 0 else 0.0
            self._line(f"{self.done:,}/{self.total:,} {self.unit} ({rate:,.1f} {self.unit}/s, ETA {clock(eta)})")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.summary and self.done:
            seconds = time.monotonic() - self.started
            self._line(f"{self.done:,} {self.unit} in {seconds:.1f}s ({self.done / max(seconds, 1e-9):,.1f} "
                       f"{self.unit}/s)")

    def _line(self, text: str) -> None:
        print(f"{self.desc}: {text}", file=self.stream, flush=True)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
