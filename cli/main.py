"""`attncomp COMMAND ...`: one argparse sub-command per stage, errors as one clear message."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from attncomp.errors import AttncompError

COMMANDS: list[tuple[str, str]] = [
    ("attncomp.cli.spec_commands", "register"),
    ("attncomp.cli.build_command", "register"),
    ("attncomp.cli.data_command", "register"),
    ("attncomp.cli.train_command", "register"),
    ("attncomp.cli.decode_command", "register"),
    ("attncomp.cli.demo_command", "register"),
    ("attncomp.cli.sweep_command", "register"),
]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attncomp",
        description="Compile Transformer specs to PyTorch; train, decode and score them.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    import importlib

    for module, func in COMMANDS:
        getattr(importlib.import_module(module), func)(sub)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the command, and turn every AttncompError into its exit code."""
    args = _parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int | None] = args.handler
    try:
        return handler(args) or 0
    except AttncompError as err:
        print(err.format(), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `attncomp show ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
