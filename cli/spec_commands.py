"""`attncomp check`, `show` and `diff`: the front end on its own."""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from pathlib import Path

from attncomp import ir
from attncomp.errors import AttncompError, UsageError, printable
from attncomp.lower import size as model_size


def add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a spec key, e.g. --set model.heads=4 (repeatable; validated like the spec)")


def expand_specs(patterns: list[str]) -> list[str]:
    """Spec arguments -> files: directories are searched for *.attn, unexpanded globs expanded (** too)."""
    files: list[str] = []
    for pattern in patterns:
        if os.path.isdir(pattern):
            found = sorted(str(p) for p in Path(pattern).rglob("*.attn"))
            if not found:
                raise UsageError(f"no spec files (*.attn) in the directory {printable(pattern)}")
            files += found
        elif any(c in pattern for c in "*?[") and not os.path.exists(pattern):
            matches = sorted(glob.glob(pattern, recursive=True))
            if not matches:
                raise UsageError(f"no spec files match {printable(pattern)}")
            files += matches
        else:
            files.append(pattern)
    return _unique(files)


def _unique(files: list[str]) -> list[str]:
    """Each file once, however many names reach it (a `**` glob follows symbolic links round a loop)."""
    seen: set[str] = set()
    kept = []
    for path in files:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            kept.append(path)
    return kept


def _check(args: argparse.Namespace) -> int:
    worst = 0
    files = expand_specs(args.specs)
    for path in files:
        try:
            spec = ir.load(Path(path), args.overrides)
        except AttncompError as err:
            print(err.format(), file=sys.stderr)
            worst = max(worst, err.exit_code)
            continue
        size = model_size.estimate(spec)
        if not args.quiet:
            print(f"ok  {printable(path)}  ({spec.model.name}, {ir.spec_hash(spec)[:12]}, {size.params:,} parameters)")
        if size.bytes > model_size.MAX_PARAM_BYTES:
            print(f"warning: {printable(path)}: {size.describe()}, over the build limit of "
                  f"{model_size.limit_text()}: `attncomp build` refuses it without --force", file=sys.stderr)
    if len(files) > 1 and not args.quiet:
        bad = "all" if worst == 0 else "some"
        print(f"{len(files)} specs checked, {bad} {'valid' if worst == 0 else 'invalid'}", file=sys.stderr)
    return worst


def _show(args: argparse.Namespace) -> int:
    spec = ir.load(Path(args.spec), args.overrides)
    if args.json:
        print(json.dumps(ir.to_json(spec), indent=2))
    else:
        print(f"# {printable(args.spec)} resolved; sha256 {ir.spec_hash(spec)}")
        print(ir.to_text(spec), end="")
    return 0


def _diff(args: argparse.Namespace) -> int:
    a = ir.load(Path(args.a), args.overrides)
    b = ir.load(Path(args.b), args.overrides)
    rows = ir.diff(a, b)
    if args.json:
        print(json.dumps([{"key": k, "a": va, "b": vb} for k, va, vb in rows], indent=2))
        return 1 if rows else 0
    if not rows:
        print(f"{printable(args.a)} and {printable(args.b)} resolve to the same spec")
        return 0
    width = max(len(k) for k, _, _ in rows)
    print(f"{'key':<{width}}  {printable(args.a)}  ->  {printable(args.b)}")
    for key, va, vb in rows:
        print(f"{key:<{width}}  {json.dumps(va)}  ->  {json.dumps(vb)}")
    return 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="validate specs (files, directories or globs)")
    p.add_argument("specs", nargs="+", metavar="SPEC")
    p.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    add_overrides(p)
    p.set_defaults(handler=_check)

    p = sub.add_parser("show", help="print a spec resolved: every default filled in, and its hash")
    p.add_argument("spec", metavar="SPEC")
    p.add_argument("--json", action="store_true", help="print JSON instead of spec text")
    add_overrides(p)
    p.set_defaults(handler=_show)

    p = sub.add_parser("diff", help="the resolved fields in which two specs differ (exit 1 when they do)")
    p.add_argument("a", metavar="SPEC_A")
    p.add_argument("b", metavar="SPEC_B")
    p.add_argument("--json", action="store_true")
    add_overrides(p)
    p.set_defaults(handler=_diff)
