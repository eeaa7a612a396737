"""Reading user files safely, and writing files atomically.

Every reader of a spec, a shard index, an export's or an import's files, a tokenizer model, a data
manifest, run.json or sweep.json goes through `read_regular` (text inputs such as `--input` may be
pipes on purpose, and are not read here): only a regular file is opened (a named pipe, a device such as /dev/zero or a socket is refused before it is
read, and opening never blocks), and at most `limit` bytes are read, counted on the bytes actually
read (a /proc file reports size 0). JSON files go through `read_json`, which also refuses NaN and
infinities and nesting too deep to check (Python's parser would raise RecursionError).

Writing: a temporary file beside the target, flushed to disk, then renamed over it.

A crash mid-write leaves the old file (or none), never half of one. The target must be a regular file
or absent: renaming over a device, a pipe or a socket would replace it (run as root, `-o /dev/null`
would replace /dev/null itself), so such a target is refused, as is a directory in the way. Every
writer of attncomp (checkpoints, generated modules, translations, run records, sweep tables) goes
through `write_atomically`; a failure is one `UsageError` line naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO, Callable

from attncomp.errors import UsageError, printable

MAX_JSON_BYTES = 64 << 20  # a config, manifest or record; far more is certainly the wrong file
MAX_JSON_DEPTH = 64  # deeper nesting than any file attncomp reads has; Python's parser recurses


def shown_path(path: str | os.PathLike) -> str:
    """A path for an error line: relative when shorter, escaped, and cut when thousands of characters long."""
    try:
        shown = os.path.relpath(path)
    except ValueError:  # another drive on Windows, or a NUL byte
        shown = str(path)
    shown = printable(shown)
    return shown if len(shown) <= 160 else f"{shown[:80]}...{shown[-60:]} ({len(shown)} characters)"


def os_reason(err: OSError) -> str:
    if err.errno == errno.ENAMETOOLONG:
        return "the path is too long"
    return (err.strerror or str(err)).lower()


def check_regular(path: str | os.PathLike, *, what: str = "file",
                  error: Callable[[str], Exception] = UsageError) -> str:
    """`path` is a regular file (links followed), or `error(message)` is raised; returns the path as
    shown in messages. For a file a library opens by name (safetensors' memory map); `read_regular`
    checks again on the file it opened."""
    shown = shown_path(path)
    if "\x00" in str(path):
        raise error(f"the path {shown} contains a NUL byte")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"no such {what}: {shown}") from None
    except OSError as err:
        raise error(f"cannot read {shown}: {os_reason(err)}") from None
    if stat.S_ISDIR(mode):
        raise error(f"{shown} is a directory, not a {what}")
    if not stat.S_ISREG(mode):
        raise error(f"{shown} is not a regular file (a pipe, device or socket); a {what} must be a file")
    return shown


def present(path: str | os.PathLike, *, what: str = "file", error: Callable[[str], Exception] = UsageError) -> bool:
    """Whether a file is at `path`: a regular file is, nothing (no entry, a bad name) is not, and anything
    else (a directory, pipe or device, a link to one or to nothing) raises `error` as `check_regular` does:
    an optional file is then refused, not skipped as if it were absent."""
    try:
        if not os.path.lexists(path):
            return False
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False
    check_regular(path, what=what, error=error)
    return True


def read_regular(path: str | os.PathLike, *, limit: int, what: str = "file",
                 error: Callable[[str], Exception] = UsageError) -> bytes:
    """The bytes of the regular file `path`, opened without blocking, at most `limit` of them; otherwise
    `error(message)` is raised, the message naming the path and `what` it should have been."""
    shown = check_regular(path, what=what, error=error)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        raise error(f"cannot read {shown}: {os_reason(err)}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between stat and open
            raise error(f"{shown} is not a regular file; a {what} must be a file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as err:
        raise error(f"cannot read {shown}: {os_reason(err)}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise error(f"{shown} is larger than {limit} bytes; that is not a {what}")
    return b"".join(chunks)


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, escapes included (unrolled: no backtracking)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _depth(text: str) -> int:
    """The deepest nesting of brackets outside strings (an upper bound where a string is unterminated), counted
    without a Python loop over the text: a tokenizer.json of 10 MB is measured in a fraction of a second."""
    import numpy as np

    brackets = np.frombuffer(_NOT_BRACKET.sub("", _STRING.sub("", text)).encode("ascii"), dtype=np.uint8)
    if brackets.size == 0:
        return 0
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def parse_json(text: str | bytes, shown: str, error: Callable[[str], Exception] = UsageError) -> Any:
    """Strict JSON: no NaN or infinities, at most MAX_JSON_DEPTH levels deep; `error(message)` otherwise."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not a number JSON allows")

    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _depth(text) > MAX_JSON_DEPTH:
            raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
        return json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise error(f"{shown} is not valid JSON ({str(err).splitlines()[0][:160]})") from None


def read_json(path: str | os.PathLike, *, what: str, limit: int = MAX_JSON_BYTES,
              error: Callable[[str], Exception] = UsageError) -> Any:
    """The JSON value of the regular file `path` (see `read_regular` and `parse_json`)."""
    return parse_json(read_regular(path, limit=limit, what=what, error=error), shown_path(path), error)


def check_target(path: Path) -> None:
    """Refuse a target that a rename must not replace: a directory, a device, a pipe or a socket."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as err:
        raise UsageError(f"cannot write {printable(str(path))}: {(err.strerror or str(err)).lower()}") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"cannot write {printable(str(path))}: a directory is in the way")
    if not stat.S_ISREG(mode):
        raise UsageError(f"cannot write {printable(str(path))}: it is not a regular file (a device, pipe or socket)")


def make_dir(path: str | os.PathLike) -> None:
    """`path` and its parents as directories, or one `UsageError` line saying why not (a file in the way,
    no permission, a file system such as /proc that holds no new directories)."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        reason = "a file is in the way" if isinstance(err, (FileExistsError, NotADirectoryError)) else os_reason(err)
        raise UsageError(f"cannot make the directory {shown_path(path)}: {reason}") from None


def write_atomically(path: str | os.PathLike, data: str | bytes | Callable[[BinaryIO], None], *,
                     make_parents: bool = False, tmp_name: str | None = None) -> None:
    """Write `data` (text, bytes, or a function that writes to a binary file) to `path` atomically.

    `tmp_name` names the temporary file (default `.NAME.tmp-PID`); a name that a later start can
    recognise lets it remove what a killed write left behind.
    """
    path = Path(path)
    tmp = path.with_name(tmp_name or f".{path.name}.tmp-{os.getpid()}")
    try:
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        check_target(path)
        with open(tmp, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        reason = "a file is in the way" if isinstance(err, (FileExistsError, NotADirectoryError)) else \
            (err.strerror or str(err)).lower()
        raise UsageError(f"cannot write {printable(str(path))}: {reason}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
