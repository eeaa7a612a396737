"""Writing files atomically: a temporary file beside the target, flushed to disk, then renamed over it.

A crash mid-write leaves the old file (or none), never half of one. The target must be a regular file
or absent: renaming over a device, a pipe or a socket would replace it (run as root, `-o /dev/null`
would replace /dev/null itself), so such a target is refused, as is a directory in the way. Every
writer of attncomp (checkpoints, generated modules, translations, run records, sweep tables) goes
through `write_atomically`; a failure is one `UsageError` line naming the file.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import BinaryIO, Callable

from attncomp.errors import UsageError, printable


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
