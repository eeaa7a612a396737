"""Optional third-party libraries (the `interop`, `parquet` and `plot` extras): imported when a command needs one,
or one clear line saying how to install it, never an ImportError traceback."""

from __future__ import annotations

import importlib

from attncomp.errors import UsageError


def require(module: str, for_what: str, extra: str = "interop"):
    """Import a third-party library of an extra (`interop` unless named), or fail with one line saying how to
    get it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        if isinstance(err.__cause__, KeyboardInterrupt) or isinstance(err.__context__, KeyboardInterrupt):
            raise KeyboardInterrupt from None  # Ctrl-C while a compiled extension loaded, not a missing library
        raise UsageError(f"{for_what} needs the Python package '{module}': "
                         f"pip install 'attncomp[{extra}]'") from None
