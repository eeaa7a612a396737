"""Option value types for argparse: a bad value is refused with argparse's own one-line usage error.

Each function takes the option's text and returns the parsed value, or raises
`argparse.ArgumentTypeError`, which argparse prints as

    usage: attncomp train [-h] ...
    attncomp train: error: argument --log-every: must be at least 1 (got 0)

and exits with status 2, before anything runs. Path types check only what can be known before the
command starts (a missing parent, a directory or file in the way, no permission); the writes
themselves are atomic (`write_text_atomic`).
"""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import Callable

from attncomp import files
from attncomp.errors import printable


Bad = argparse.ArgumentTypeError


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise Bad(f"expected a whole number, got '{shown(text)}'") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise Bad(f"expected a number, got '{shown(text)}'") from None
    if not math.isfinite(value):
        raise Bad(f"must be a finite number (got {shown(text)})")
    return value


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """A whole number >= low (and <= high when given)."""

    def parse(text: str) -> int:
        value = _int(text)
        if value < low:
            raise Bad(f"must be at least {low} (got {value})")
        if high is not None and value > high:
            raise Bad(f"must be at most {high} (got {value})")
        return value

    parse.__name__ = f"int_at_least_{low}"  # argparse names the type in some messages
    return parse


positive_int = int_at_least(1)
positive_int.__name__ = "positive_int"
non_negative_int = int_at_least(0)
non_negative_int.__name__ = "non_negative_int"


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _float(text)
    if value <= 0:
        raise Bad(f"must be greater than 0 (got {shown(text)})")
    return value


def positive_float_at_most(high: float, unit: str) -> Callable[[str], float]:
    """A finite number > 0 and <= high: a budget or a time limit (inf ran on; 1e300 overflowed a timedelta)."""

    def parse(text: str) -> float:
        value = positive_float(text)
        if value > high:
            raise Bad(f"must be at most {high:g} {unit} (got {shown(text)})")
        return value

    parse.__name__ = "positive_float"
    return parse


def finite_non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    value = _float(text)
    if value < 0:
        raise Bad(f"must be 0 or more (got {shown(text)})")
    return value


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    value = _float(text)
    if not 0 < value <= 1:
        raise Bad(f"must be greater than 0 and at most 1 (got {shown(text)})")
    return value


def language(text: str) -> str:
    """A file-name suffix such as `en` or `de`: letters, digits, `_` and `-` only."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", text):
        raise Bad(f"a language suffix is 1-32 letters, digits, '_' or '-' (got {text!r})")
    return text


def _name(text: str) -> str:
    if not text or "\0" in text:
        raise Bad("expected a path, got an empty one" if not text else f"a path cannot contain NUL: {text!r}")
    return text


def shown(path: str | Path) -> str:
    """A path as an error message shows it: control characters escaped, cut in the middle when very long."""
    text = printable(str(path))
    return text if len(text) <= 120 else f"{text[:60]}...{text[-40:]} ({len(text)} characters)"


def _checked(check: Callable[[str], str]) -> Callable[[str], str]:
    """A path type whose file-system errors (a name too long, a loop of links) are refusals too."""

    def parse(text: str) -> str:
        try:
            return check(text)
        except OSError as err:
            raise Bad(f"{shown(text)}: {err.strerror or err}") from None

    parse.__name__, parse.__doc__ = check.__name__, check.__doc__
    return parse


def _writable_dir(directory: Path, for_what: str) -> None:
    if not directory.exists():
        raise Bad(f"{shown(for_what)}: directory {shown(directory)} does not exist")
    if not directory.is_dir():
        raise Bad(f"{shown(for_what)}: {shown(directory)} is a file, not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise Bad(f"{shown(for_what)}: no permission to write in {shown(directory)}")


@_checked
def output_file(text: str) -> str:
    """A file to write: its directory exists and is writable, no directory is in the way; `-` is stdout."""
    if _name(text) == "-":
        return text
    path = Path(text)
    if path.is_dir():
        raise Bad(f"{shown(text)} is a directory; give a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise Bad(f"no permission to write {shown(text)}")
    _writable_dir(path.parent if str(path.parent) else Path("."), text)
    return text


@_checked
def output_dir(text: str) -> str:
    """A directory to create or fill: no file in the way, and the nearest existing ancestor writable."""
    path = Path(_name(text))
    if path.is_symlink() and not path.exists():
        raise Bad(f"{shown(text)} is a symbolic link to nothing; remove it or give another directory")
    if path.exists():
        if not path.is_dir():
            raise Bad(f"{shown(text)} is a file, not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise Bad(f"no permission to write in {shown(text)}")
        return text
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    _writable_dir(ancestor, text)
    return text


@_checked
def input_file(text: str) -> str:
    """A readable regular file; `-` is stdin."""
    if _name(text) == "-":
        return text
    path = Path(text)
    if not path.exists():
        raise Bad(f"no such file: {shown(text)}")
    if path.is_dir():
        raise Bad(f"{shown(text)} is a directory, not a file")
    if not path.is_file():
        raise Bad(f"{shown(text)} is not a regular file")
    if not os.access(path, os.R_OK):
        raise Bad(f"no permission to read {shown(text)}")
    return text


def device(text: str) -> str:
    """`cpu`, `cuda` or `cuda:N`, and only a CUDA device this machine has."""
    match = re.fullmatch(r"(cpu|cuda)(?::(\d+))?", text)
    if not match or (match.group(1) == "cpu" and match.group(2)):
        raise Bad(f"expected cpu, cuda or cuda:N (got {text!r})")
    if match.group(1) == "cuda":
        import torch

        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(match.group(2) or 0)
        if not have:
            raise Bad(f"{shown(text)}: this machine has no CUDA device (use --device cpu)")
        if index >= have:
            raise Bad(f"{shown(text)}: this machine has {have} CUDA device(s), cuda:0 to cuda:{have - 1}")
    return text


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename: `path` is whole or untouched."""
    files.write_atomically(path, text)
