"""A large hostile corpus against every `attncomp` command: no traceback, no hang, no code run.

    python -m bench.hostile [--only CATEGORY] [--list] [--failures FILE] [--work DIR]

Every case is a command line (and the files it reaches, made by bench/hostile_corpus.py) run in a
child process of a fork server that has attncomp and torch imported already: each child gets its own
working directory, process group, memory limit (3 GiB of address space) and time limit; a child still
running at its limit is killed with its whole process group and counts as a hang. Printed: a table of
outcomes per category (exit codes, one-line errors, tracebacks, internal errors, hangs, code run) and a
summary line; the exit status is 1 when any case fails, and --failures FILE writes each failing case
(command line, what happened) for routing.

A case fails when: it hangs; an exception escapes `run()` or a traceback is printed; it ends in an
internal error (exit 70, or "internal error" in a worker's report); its exit code is not one of 0, 1,
2 and 75 (a run stopped by SIGTERM after saving, which says `stopped: ...`); it fails without one
clear `error: ...` line (a spec error may add its located line, caret and hint); the payload of a
code-injection case ran; or a value the case names as bad was taken (exit 0).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from bench import hostile_attacks as attacks
from bench.hostile_corpus import good_artifacts, hostile_files
from bench.hostile_harness import (  # noqa: F401 - the harness's names, as bench.hostile has always offered them
    DOCUMENTED_EXITS, ERROR_LINE, INTERNAL, MEMORY_LIMIT, PRELOAD, TRACEBACK, Case, Outcome, Poke, Sandbox, _is_worker,
    _shell, run_cases)


def build_corpus(root: Path, sandbox: Sandbox) -> list[Case]:
    files = hostile_files(root / "files")
    good = good_artifacts(root / "good", sandbox)
    cases: list[Case] = []
    for make in attacks.ALL:
        cases += make(root, files, good)
    return cases


def table(results: list[tuple[Case, Outcome, list[str]]]) -> str:
    """Outcome per category: cases, exit codes seen, failing, one-line?, traceback, internal, hang, code run."""
    rows: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    codes: dict[str, set] = defaultdict(set)
    for case, outcome, problems in results:
        row = rows[case.category]
        row["cases"] += 1
        row["fail"] += bool(problems)
        codes[case.category].add("hang" if outcome.hung else str(outcome.code))
        row["traceback"] += any(p.startswith(("traceback", "exception")) for p in problems)
        row["internal"] += any("internal error" in p for p in problems)
        row["not one line"] += any(p.startswith(("exit", "error line")) or " error lines " in p for p in problems)
        row["hang"] += outcome.hung
        row["code run"] += outcome.code_ran
        row["taken"] += any(p.startswith("bad value") for p in problems)
    head = ["category", "cases", "exits", "fail", "traceback", "internal", "not one line", "hang", "code run", "taken"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in sorted(rows):
        row = rows[name]
        exits = ",".join(sorted(codes[name]))
        lines.append(f"| {name} | {row['cases']} | {exits} | " + " | ".join(str(row[h]) for h in head[3:]) + " |")
    return "\n".join(lines)


def failure_report(results: list[tuple[Case, Outcome, list[str]]]) -> str:
    by_owner: dict[str, list[str]] = defaultdict(list)
    for case, outcome, problems in results:
        if problems:
            by_owner[case.owner].append(f"- [{case.category}] {_shell(case.argv)}{'  # ' + case.note if case.note else ''}"
                                        f"\n    {'; '.join(problems)}\n    {outcome.summary()}")
    return "\n\n".join(f"## {owner} ({len(items)})\n" + "\n".join(items) for owner, items in sorted(by_owner.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], metavar="CATEGORY", help="run these categories only")
    parser.add_argument("--list", action="store_true", help="list the cases and run nothing")
    parser.add_argument("--failures", metavar="FILE", help="write the failing cases, grouped by owner, to FILE")
    parser.add_argument("--work", metavar="DIR", help="keep the corpus and outputs here (default: a temp dir)")
    args = parser.parse_args(argv)
    root = Path(args.work or tempfile.mkdtemp(prefix="attncomp-hostile-"))
    root.mkdir(parents=True, exist_ok=True)
    sandbox = Sandbox(root / "runs")
    (root / "runs").mkdir(exist_ok=True)
    cases = build_corpus(root / "corpus", sandbox)
    if args.only:
        cases = [c for c in cases if c.category in args.only or c.category.split(":")[0] in args.only]
    if args.list:
        for case in cases:
            print(f"{case.category}\t{case.owner}\t{_shell(case.argv)}")
        return 0
    start = time.monotonic()
    results = run_cases(cases, sandbox)
    print(table(results))
    failed = sum(bool(p) for _, _, p in results)
    report = failure_report(results)
    if args.failures:
        Path(args.failures).write_text(report + "\n")
    elif failed:
        print("\n" + report)
    print(f"\n{len(results)} hostile cases, {len(results) - failed} held, {failed} failed "
          f"({time.monotonic() - start:.0f}s; work in {root})")
    return 1 if failed else 0


if __name__ == "__main__":
    if __package__ in (None, ""):  # `python bench/hostile.py`: the repository root, for `bench.` imports
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
