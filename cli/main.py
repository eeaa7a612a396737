"""`attncomp COMMAND ...`: one argparse sub-command per stage, errors as one clear message.

Exit codes (README, "Exit codes"): 0 success; 1 a failed check, an unmet `expect`, a training failure
or a differing `diff`; 2 a bad spec, data directory or command line (argparse's usage errors too);
70 an internal error, a bug in attncomp, reported in one line with the traceback written to a file;
130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from typing import Callable, Sequence

from attncomp.cli import familiar
from attncomp.errors import AttncompError, printable, printable_lines, shortened

COMMANDS: list[tuple[str, tuple[str, ...]]] = [  # (module whose `register` adds them, the commands)
    ("attncomp.cli.spec_commands", ("check", "show", "diff")),
    ("attncomp.cli.build_command", ("build",)),
    ("attncomp.cli.data_command", ("data",)),
    ("attncomp.cli.train_command", ("train", "average", "consolidate")),
    ("attncomp.cli.decode_command", ("translate", "eval")),
    ("attncomp.cli.export_command", ("export",)),
    ("attncomp.cli.import_command", ("import",)),
    ("attncomp.cli.demo_command", ("demo",)),
    ("attncomp.cli.sweep_command", ("sweep",)),
    ("attncomp.cli.picture_commands", ("draw", "plot", "page")),
]

EXIT_INTERNAL = 70  # EX_SOFTWARE of sysexits.h: "an internal software error has been detected"
EXIT_INTERRUPTED = 130
TRACEBACK_DIR_ENV = "ATTNCOMP_TRACEBACK_DIR"  # where internal errors leave their traceback (default: temp dir)


def _parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The command line's parser. Where `argv` starts with a command, only the module that registers it is
    imported (`attncomp data prepare` starts without importing torch); help and unknown words get them all."""
    parser = argparse.ArgumentParser(
        prog="attncomp",
        description="Compile Transformer specs to PyTorch; train, decode and score them.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if list(argv[:1]) == ["--version"]:  # answered before any command's module (torch) is imported
        return parser
    import importlib

    named = [module for module, commands in COMMANDS if argv and argv[0] in commands]
    for module in named or [module for module, _ in COMMANDS]:
        importlib.import_module(module).register(sub)
    return parser


def _version() -> str:
    """attncomp's version and those a bug report needs beside it, read without importing torch."""
    from importlib.metadata import PackageNotFoundError, version

    from attncomp import __version__

    try:
        torch = version("torch")
    except PackageNotFoundError:  # a checkout on PYTHONPATH beside a torch built from source
        torch = "not installed as a package"
    return f"attncomp {__version__} (torch {torch}, python {sys.version.split()[0]})"


def _parse(argv: list[str]) -> argparse.Namespace:
    """parse_args, with a flag another toolkit uses (fairseq's --lr, the Trainer's --output_dir) told how attncomp
    spells it, in the usage error of the command it was given to."""
    parser = _parser(argv)
    commands = [name for _, names in COMMANDS for name in names]
    if argv and not argv[0].startswith("-") and argv[0] not in commands:  # argparse would list them all, no more
        word = shortened(printable(argv[0]))
        parser.error(f'unknown command "{word}"{familiar.command_hint(argv[0], commands)}; '
                     f"commands: {', '.join(commands)}")
    args, extra = parser.parse_known_args(argv)
    if extra:
        command, words = parser, argv
        while words and (found := _command(command, words[0])) is not None:  # `attncomp data prepare`'s own
            command, words = found, words[1:]
        command.error(f"unrecognized arguments: {' '.join(extra)}{familiar.hints(extra)}")
    return args


def _command(parser: argparse.ArgumentParser, word: str) -> argparse.ArgumentParser | None:
    """The sub-command parser `word` names under `parser`, or None."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and word in action.choices:
            return action.choices[word]
    return None


def _save_traceback(err: BaseException, argv: Sequence[str] | None) -> str:
    """Write the traceback of `err` to a new file and return its path ('' when nothing could be written)."""
    folder = os.environ.get(TRACEBACK_DIR_ENV) or tempfile.gettempdir()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        fd, path = tempfile.mkstemp(prefix=f"attncomp-traceback-{stamp}-", suffix=".txt", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(f"attncomp {list(sys.argv[1:] if argv is None else argv)!r}\n\n")
            f.write("".join(traceback.format_exception(type(err), err, err.__traceback__)))
    except (OSError, ValueError):
        return ""
    return path


def internal_error(err: BaseException, argv: Sequence[str] | None = None) -> str:
    """The one line that reports an exception that is not an AttncompError (a bug), traceback saved aside."""
    message = " ".join(str(err).split())  # one line, whatever the exception text holds
    if len(message) > 300:
        message = message[:297] + "..."
    path = _save_traceback(err, argv)
    where = f"the traceback is in {path}" if path else "the traceback could not be written"
    line = f"internal error: {type(err).__name__}: {message or '(no message)'} — a bug in attncomp; {where}"
    return printable(line)  # no control character of the message or the path


def run(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the command, and turn every AttncompError into its exit code.

    Any other exception is a bug: one line on stderr, the traceback in a file, exit EXIT_INTERNAL.
    argparse's usage errors leave by SystemExit(2), as argparse makes them.
    """
    try:
        # a usage error leaves here by SystemExit(2)
        args = _parse(sys.argv[1:] if argv is None else list(argv))
        handler: Callable[[argparse.Namespace], int | None] = args.handler
        return handler(args) or 0
    except AttncompError as err:
        print(printable_lines(err.format()), file=sys.stderr)  # no control character of a path or value
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `attncomp show ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as err:  # the last line of defence: never a traceback on the terminal
        print(internal_error(err, argv), file=sys.stderr)
        return EXIT_INTERNAL


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
