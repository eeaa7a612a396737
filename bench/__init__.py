"""Benchmarks: quality (BLEU side by side), throughput (GPU), padding, the paper's parameter table."""

from __future__ import annotations

import subprocess
import sys
from typing import Callable


def run_command(main: Callable[[], object]) -> None:
    """Run a benchmark's main as a command: an attncomp error is its one line and exit code, as in the CLI."""
    from attncomp.errors import AttncompError

    try:
        main()
    except AttncompError as err:
        print(err.format(), file=sys.stderr)
        sys.exit(err.exit_code)
    except subprocess.CalledProcessError as err:  # the command has printed its own error
        print(f"error: {' '.join(map(str, err.cmd[:4]))} ... failed (exit code {err.returncode})", file=sys.stderr)
        sys.exit(err.returncode)
