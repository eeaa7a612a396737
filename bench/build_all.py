"""What `attncomp build --no-write` does for every shipped spec, timed: load, compile on the meta device, report.

    python bench/build_all.py            # wall-clock and CPU seconds of one pass over specs/, median of --runs

Each run is a fresh process (nothing cached from an earlier run); the figure excludes Python start-up
and `import torch`. CPU time (the process's own) moves less than wall-clock time on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, sys, time
from pathlib import Path
from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.report import build_report
paths = sorted(Path(sys.argv[1]).rglob("*.attn"))
start, cpu = time.perf_counter(), time.process_time()
for path in paths:
    report = build_report(compile_spec(ir.load(path), device="meta"))
    if not report.expect_ok:
        raise SystemExit(f"{path}: expect not met")
print(json.dumps({"specs": len(paths), "wall": time.perf_counter() - start, "cpu": time.process_time() - cpu}))
"""


def one_run(folder: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, folder], capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--specs", default="specs")
    args = parser.parse_args()
    runs = [one_run(args.specs) for _ in range(args.runs)]
    wall, cpu = (statistics.median(r[key] for r in runs) for key in ("wall", "cpu"))
    shown = ", ".join(f"{r['wall']:.2f}/{r['cpu']:.2f}" for r in runs)
    print(f"{runs[0]['specs']} specs: load + compile on meta + build report, median of {args.runs} runs: "
          f"wall {wall:.2f} s, CPU {cpu:.2f} s   (wall/CPU per run: {shown})")


if __name__ == "__main__":
    main()
