"""`attncomp draw`, `plot` and `page`: pictures of a spec (or two), of runs' curves, and a page per run.

Each needs the `plot` extra (matplotlib); without it the command says so in one line (exit 2). `plot`
reads what runs wrote and imports no compiler; `draw` compiles on the meta device (no weights).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attncomp import files
from attncomp.cli.args import finite_non_negative_float, int_at_least, output_file, shown
from attncomp.cli.spec_commands import add_overrides
from attncomp.errors import UsageError


def _default_picture(specs: list[str]) -> str:
    stems = [Path(s).stem for s in specs]
    return ("-vs-".join(stems) if len(stems) > 1 else stems[0]) + ".svg"


def _draw(args: argparse.Namespace) -> int:
    from attncomp import ir
    from attncomp.plot.figures import image_format, matplotlib, save_figure

    if len(args.specs) > 2:
        raise UsageError(f"draw takes one spec, or two to compare (got {len(args.specs)})")
    out = args.out or _default_picture(args.specs)
    image_format(out)  # a usage error before anything compiles
    matplotlib("attncomp draw")
    specs = [ir.load(Path(path), args.overrides) for path in args.specs]
    from attncomp.draw.picture import spec_picture, two_spec_picture

    if len(specs) == 1:
        figure = spec_picture(specs[0])
    else:
        figure = two_spec_picture(specs[0], specs[1], Path(args.specs[0]).stem, Path(args.specs[1]).stem)
    save_figure(figure, out, salt="drawing")
    print(f"wrote {shown(out)}", file=sys.stderr)
    return 0


def _plot(args: argparse.Namespace) -> int:
    from attncomp.plot.curves import curves_figure
    from attncomp.plot.figures import image_format, matplotlib, save_figure
    from attncomp.plot.runs import read_runs

    image_format(args.out)
    matplotlib("attncomp plot")
    runs = read_runs(args.runs)
    save_figure(curves_figure(runs, args.x), args.out, salt="curves")
    print(f"wrote {shown(args.out)} ({len(runs)} run(s))", file=sys.stderr)
    return 0


def _page(args: argparse.Namespace) -> int:
    from attncomp.plot.figures import matplotlib

    matplotlib("attncomp page")
    from attncomp.draw.page import render_page

    html = render_page(args.run, args.sentences, args.seconds)
    if args.out == "-":  # `-o -` is stdout (cli.args.output_file), never a file named `-`
        sys.stdout.write(html)
        return 0
    files.write_atomically(args.out, html)
    print(f"wrote {shown(args.out)}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("draw", help="draw a spec's architecture (two specs: side by side, differences marked)")
    p.add_argument("specs", nargs="+", metavar="SPEC", help="one spec, or two to compare")
    p.add_argument("-o", "--out", type=output_file, metavar="FILE",
                   help="the picture: .svg, .png or .pdf (default: SPEC.svg, or A-vs-B.svg)")
    add_overrides(p)
    p.set_defaults(handler=_draw)

    p = sub.add_parser("plot", help="plot runs' curves: loss, perplexity, learning rate, tokens/s, BLEU")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories, or a sweep's directory (all its rows)")
    p.add_argument("-o", "--out", type=output_file, required=True, metavar="FILE", help=".svg, .png or .pdf")
    p.add_argument("--x", choices=("updates", "time"), default="updates",
                   help="the horizontal axis: updates (default) or time (minutes since the run's first scalar)")
    p.set_defaults(handler=_plot)

    p = sub.add_parser("page", help="one self-contained HTML page about a run")
    p.add_argument("run", metavar="RUN", help="a run directory (attncomp train --out)")
    p.add_argument("-o", "--out", type=output_file, required=True, metavar="FILE",
                   help="the page (.html; - for stdout)")
    p.add_argument("--sentences", type=int_at_least(0, 1000), default=5, metavar="N",
                   help="validation sentences translated on the page (default 5)")
    p.add_argument("--seconds", type=finite_non_negative_float, default=60.0, metavar="S",
                   help="at most S seconds spent translating them (default 60)")
    p.set_defaults(handler=_page)
