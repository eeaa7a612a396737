"""Errors a person can act on: a location, the source line with a caret, and what was expected.

Every stage raises an `AttncompError`; the command line prints `error.format()` and exits with
`error.exit_code`, never a traceback.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Iterable


@dataclass(frozen=True)
class Span:
    """A place in a spec: file, 1-based line and column, and the text of that line for the caret."""

    path: str
    line: int
    column: int
    source_line: str = field(default="", repr=False, compare=False)
    width: int = field(default=1, repr=False, compare=False)

    def __str__(self) -> str:
        return f"{printable(self.path)}:{self.line}:{self.column}"

    def caret(self) -> str:
        """The source line and a caret under the offending text (empty when the line is unknown)."""
        if not self.source_line:
            return ""
        # one cell per character, so the caret stays under its column: tabs and characters a terminal
        # would not print as one cell (form feed, U+2028, ...) are shown as a space
        line = "".join(c if c.isprintable() else " " for c in self.source_line.rstrip("\n"))
        if len(line) > 200:  # keep a minified or binary line readable around the column
            start = max(0, self.column - 80)
            line = line[start : start + 160]
            pad = self.column - 1 - start
        else:
            pad = self.column - 1
        marks = "^" + "~" * max(0, min(self.width, 80) - 1)
        return f"    {line}\n    {' ' * pad}{marks}"


class AttncompError(Exception):
    """Base of every error attncomp reports to a user."""

    exit_code = 1

    def format(self) -> str:
        return f"error: {shortened(printable(str(self)))}"


class SpecError(AttncompError):
    """A spec is malformed or inconsistent; points at the offending line."""

    exit_code = 2

    def __init__(self, message: str, span: Span | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint

    def format(self) -> str:
        where = f"{self.span}: " if self.span else ""
        parts = [f"{where}error: {shortened(printable(self.message))}"]
        if self.span and self.span.caret():
            parts.append(self.span.caret())
        if self.hint:
            parts.append(f"    hint: {printable(self.hint)}")
        return "\n".join(parts)

    def __str__(self) -> str:
        where = f"{self.span}: " if self.span else ""
        return f"{where}{printable(self.message)}"


class ExpectError(AttncompError):
    """A built model does not meet an `expect` line of its spec."""

    exit_code = 1


class DataError(AttncompError):
    """Input data is missing, malformed or does not fit the spec."""

    exit_code = 2


class TrainingError(AttncompError):
    """Training stopped: a worker died, the loss diverged, a checkpoint is unusable."""

    exit_code = 1


class UsageError(AttncompError):
    """A command was given arguments it cannot use (missing file, bad option value)."""

    exit_code = 2


def printable(text: str) -> str:
    """`text` with every non-printable character escaped as in repr(), so a hostile file name or value
    stays on one line of an error message."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shortened(text: str, limit: int = 400) -> str:
    """`text` cut in the middle when longer than `limit`, so that a value of 100,000 digits or a
    minified line quoted in a message stays one readable line."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 120]} ...[{len(text) - limit + 40:,} characters]... {text[-80:]}"


def printable_lines(text: str) -> str:
    """`text` with every non-printable character but the newlines between its lines escaped: the last
    guard before a terminal, for messages that are several lines on purpose (a spec error's caret)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """' (did you mean "x"?)' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""
