"""`attncomp sweep`: train every spec with the same data, budget and --set options, score each on the
validation set and write one table beside the paper's Table 3 (attncomp.sweep)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from attncomp import files
from attncomp.cli.args import output_dir, positive_float_at_most
from attncomp.cli.spec_commands import add_overrides, expand_specs
from attncomp.errors import UsageError
from attncomp.plot import figures
from attncomp.sweep.run import plan, run_sweep
from attncomp.sweep.state import Options, SweepState
from attncomp.sweep.table import CHART

MAX_MINUTES = 525_600  # a year: a budget must end


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _options(args: argparse.Namespace) -> Options:
    if (args.steps is None) == (args.minutes is None):
        raise UsageError("give the budget of every row: --steps N or --minutes M (one of them)")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be at least 1, not {args.steps}")
    if args.minutes is not None and not args.minutes > 0:
        raise UsageError(f"--minutes must be more than 0, not {args.minutes:g}")
    if args.parallel < 1:
        raise UsageError(f"--parallel must be at least 1, not {args.parallel}")
    if args.bleu_sentences < 0:
        raise UsageError(f"--bleu-sentences must be 0 (no BLEU) or more, not {args.bleu_sentences}")
    return Options(data=str(Path(args.data).resolve()), steps=args.steps, minutes=args.minutes,
                   overrides=tuple(args.overrides), bleu_sentences=args.bleu_sentences)


def _sweep(args: argparse.Namespace) -> int:
    options = _options(args)
    paths = expand_specs(args.specs)
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise UsageError(f"no spec file {missing[0]}")
    rows = plan(paths, options)
    out = Path(args.out)
    state = SweepState.open(out, options)
    files.make_dir(out)  # before any training: a --out that cannot be made is refused now
    say = lambda message: print(message, file=sys.stderr)  # noqa: E731
    say(f"sweep: {len(rows)} row(s) -> {out} ({'one at a time' if args.parallel == 1 else f'{args.parallel} at once'})")
    previous = signal.signal(signal.SIGTERM, _interrupt)  # stop the rows in training, keep what is finished
    try:
        run_sweep(state, rows, parallel=args.parallel, say=say)
    finally:
        signal.signal(signal.SIGTERM, previous)
    say(f"sweep: done; table in {out / 'results.md'} (.csv, .json), HParams in {out / 'tb'}")
    if figures.available():
        say(f"sweep: chart in {out / CHART}")
    else:
        say(f"sweep: chart skipped: {figures.SKIPPED}")
    print((out / "results.md").read_text(), end="")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="train many specs with one budget, score them, tabulate beside the paper")
    p.add_argument("specs", nargs="+", metavar="SPEC", help="spec files, directories or globs")
    p.add_argument("--data", required=True, metavar="DIR", help="a directory made by `attncomp data`")
    p.add_argument("--out", type=output_dir, default="runs/sweep", metavar="DIR",
                   help="sweep directory (default runs/sweep); run again with the same DIR to resume")
    p.add_argument("--steps", type=int, metavar="N", help="train every row for N updates (sets train.steps)")
    p.add_argument("--minutes", type=positive_float_at_most(MAX_MINUTES, "minutes"), metavar="M",
                   help=f"or train every row for M minutes (at most {MAX_MINUTES:,}: a year)")
    p.add_argument("--parallel", type=int, default=1, metavar="N",
                   help="rows trained at once, each a child process with its share of the CPU threads (default 1)")
    p.add_argument("--bleu-sentences", type=int, default=500, metavar="N",
                   help="validation sentences translated for BLEU with each spec's beam (default 500; 0: none)")
    add_overrides(p)
    p.set_defaults(handler=_sweep)
