"""Calls into compiled libraries (tokenizers, sentencepiece, CTranslate2, pyarrow): one rule for their failures.

A compiled library fails in its own ways. tokenizers' Rust code panics (a regular expression that backtracks
past Oniguruma's limit, an id it has no token for): pyo3 raises `pyo3_runtime.PanicException`, a
`BaseException` that `except Exception` does not catch, after Rust's panic hook has printed the panic and a
stack backtrace on stderr. sentencepiece raises RuntimeError or OSError with C++ messages; CTranslate2 and
pyarrow raise types of their own. So every such call is made inside `native(what, ...)`: whatever it raises,
but Ctrl-C, an exit and an error attncomp already words, becomes one `error(...)` line that names the file
(`what`) and says what to do; what the library wrote on stderr meanwhile is held back, and written out only
when the call succeeded (a warning is kept; a panic's backtrace is not shown).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Callable, Iterator

from attncomp.errors import AttncompError, DataError

PASSED_THROUGH = (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError, AttncompError)


def reason(err: BaseException) -> str:
    """The first line of a library's message (a Rust panic's, a C++ exception's), shortened; its type where empty."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return (lines[0] if lines else type(err).__name__)[:200]


@contextlib.contextmanager
def _stderr_held() -> Iterator[None]:
    """File descriptor 2 sent to a temporary file for the block; copied to stderr afterwards only on success."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no stderr at all (`2>&-`): nothing to hold back
        yield
        return
    held = tempfile.TemporaryFile()
    ok = False
    try:
        os.dup2(held.fileno(), 2)
        yield
        ok = True
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        if ok:
            held.seek(0)
            written = held.read()
            if written:
                with contextlib.suppress(OSError):
                    os.write(2, written)
        held.close()


@contextlib.contextmanager
def native(what: str, hint: str = "", error: Callable[[str], Exception] = DataError) -> Iterator[None]:
    """Run the block (a call into a compiled library): its failure, a Rust panic included, is one `error` line
    `what: reason (hint)`; Ctrl-C, exits, MemoryError and attncomp's own errors pass through unchanged."""
    try:
        with _stderr_held():
            yield
    except PASSED_THROUGH:
        raise
    except BaseException as err:  # noqa: BLE001 - pyo3's PanicException derives from BaseException
        raise error(f"{what}: {reason(err)}" + (f"; {hint}" if hint else "")) from None
