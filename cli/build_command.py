"""`attncomp build`: compile specs, report what they are, check `expect`, write generated/."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from attncomp import ir
from attncomp.cli.args import Bad, shown
from attncomp.cli.spec_commands import add_overrides, expand_specs
from attncomp.codegen import output_path, render, write_atomically
from attncomp.compiler import compile_spec
from attncomp.errors import ExpectError, UsageError, printable
from attncomp.lower.size import estimate, refuse_if_too_large
from attncomp.passes import DEFAULT_PASSES, PASSES, check_pass_names
from attncomp.report import build_report, format_report

EMIT = ("ir", "fx", "fx-opt", "py")


def _load(path: str, args: argparse.Namespace):
    """The resolved spec of `path`, refused when its parameters exceed the limit (unless --force)."""
    spec = ir.load(Path(path), args.overrides)
    if not args.force:
        refuse_if_too_large(spec, printable(path))
    return spec


def _emit(stage: str, spec, path: str, passes: list[str], entry: str | None) -> str:
    if stage == "ir":
        return ir.to_text(spec)
    model = compile_spec(spec, passes=() if stage == "fx" else passes, device="meta")
    if stage == "py":
        return render(model, path)
    if entry and entry not in model.entry_points:
        raise UsageError(f'{spec.model.name} has no entry point "{entry}"; it has {", ".join(model.entry_points)}')
    if entry:  # the entry point as one graph: every unit call inlined, every layer unrolled
        return f"# {spec.model.name}.{entry} ({stage}, inlined)\n{model.flat(entry).code.strip()}\n"
    return "\n".join(f"# {spec.model.name}: {unit.name}.{name} ({stage})\n"
                     f"{unit.methods[name].graph.python_code('self').src.strip()}\n"
                     for unit in model.units() for name in unit.methods)


def _build_one(path: str, args: argparse.Namespace) -> dict:
    spec = _load(path, args)
    if not args.json:
        print(f"{spec.model.name}: estimated {estimate(spec).describe()}; building", flush=True)
    model = compile_spec(spec, passes=args.passes, device="meta")
    report = build_report(model)
    result = report.to_json()
    if not report.expect_ok:
        failed = [r for r in report.expect if not r["ok"]]
        details = "; ".join(f"{r['key']} measured {r['measured']:,.0f}, expected {r['low']:,.0f} to "
                            f"{r['high']:,.0f}" for r in failed)
        if not args.json:
            print(format_report(report))
        raise ExpectError(f"{path}: expect not met: {details}")
    target = output_path(path, args.out)
    if not args.no_write:
        write_atomically(target, render(model, path))
        result["generated"] = str(target)
    if not args.json:
        print(format_report(report))
        if not args.no_write:
            print(f"  wrote {printable(str(target))}")
    return result


def _build(args: argparse.Namespace) -> int:
    check_pass_names(args.passes)
    files = expand_specs(args.specs)
    if args.emit:
        for path in files:
            print(_emit(args.emit, _load(path, args), path, args.passes, args.entry), end="")
        return 0
    results = [_build_one(path, args) for path in files]
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=2))
    return 0


def pass_names(text: str) -> list[str]:
    """Comma-separated pass names; '' is no pass at all, an empty name (`,,`) is refused.

    Unknown names are left to `attncomp.passes.check_pass_names`, which suggests the closest.
    """
    if text == "":
        return []
    names = text.split(",")
    if any(not name.strip() for name in names):
        raise Bad(f"an empty pass name in {shown(text)!r}; passes: {', '.join(PASSES)} ('' for none)")
    return names


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="compile specs: report params, FLOPs, fused attention; write generated/")
    p.add_argument("specs", nargs="+", metavar="SPEC", help="spec files, directories or globs")
    p.add_argument("-o", "--out", metavar="DIR", help="write DIR/<spec>.py (default: generated/, mirroring specs/)")
    p.add_argument("--emit", choices=EMIT, help="print one stage instead: ir, fx (lowered: every unit's graphs), "
                                               "fx-opt (after passes), py")
    p.add_argument("--entry", help="with --emit fx|fx-opt: only this entry point, inlined into one graph")
    p.add_argument("--passes", type=pass_names, default=list(DEFAULT_PASSES),
                   help=f"comma-separated passes to run (default: {','.join(DEFAULT_PASSES)}; '' for none)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-write", action="store_true", help="report only; write no generated module")
    p.add_argument("--force", action="store_true",
                   help="build even when the float32 parameters exceed the limit (4 GiB; see docs/compiler.md)")
    add_overrides(p)
    p.set_defaults(handler=_build)
