"""How fast `attncomp build` is: base, big, the cost per layer, and every shipped spec in one process.

    python bench/compile_speed.py               # the figures in docs/compiler.md, "Compile speed"
    python bench/compile_speed.py --repeat 5 --layers 6,12,24,48,96

Each figure comes from a fresh Python process (so nothing is cached from an earlier figure):
- `process`: the whole command, `attncomp build SPEC --no-write`, start to exit (Python start-up and
  `import torch` included; `import torch` alone is timed too);
- `build`: `attncomp build SPEC --no-write` run in a process that has imported attncomp's command
  line (and so torch): the first build of the process, then the best of the next `--repeat - 1`;
  the best one's CPU time too (this process's own, less moved by other processes on a busy machine than
  its wall-clock time), and the part each stage took in the best one: parse and resolve the spec (ir.load), compile
  on the meta device (lower + passes of the entry points the report reads), the report (parameters,
  FLOPs counted from the graphs' shapes, attention), of which the FLOP count (attncomp.lower.flops, timed
  again alone), and the same FLOPs counted by FlopCounterMode on meta tensors (the count before 2026-11-22);
- `per layer`: the least-squares slope of the best build time of base over `model.layers` =
  --layers (with `expect.params=none`: other depths do not have base's parameters);
- `all specs`: `attncomp check specs` then `attncomp build specs --no-write` in one process; and
  what the build report does for each (compile on meta, parameters, FLOPs, attention, `expect`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import contextlib, io, json, sys, time
from attncomp.cli.main import run
from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.lower.flops import counted_on_meta, training_flops
from attncomp.report import build_report

spec_path, repeat, overrides = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
sets = [a for o in overrides for a in ("--set", o)]

def build():
    out = io.StringIO()
    start, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(out):
        code = run(["build", spec_path, "--no-write", *sets])
    if code:
        raise SystemExit(f"build {spec_path} exited {code}")
    return time.perf_counter() - start, time.process_time() - cpu

def stages():
    t0 = time.perf_counter()
    spec = ir.load(spec_path, overrides)
    t1 = time.perf_counter()
    model = compile_spec(spec, device="meta")
    model.forward  # what the report reads, lowered and optimised
    t2 = time.perf_counter()
    build_report(model)
    t3 = time.perf_counter()
    training_flops(model)  # the report's FLOP count (attncomp.lower.flops), again alone
    t4 = time.perf_counter()
    counted_on_meta(model)  # the same figure from FlopCounterMode on meta tensors, for comparison
    t5 = time.perf_counter()
    return {"parse": t1 - t0, "compile": t2 - t1, "report": t3 - t2, "of it FLOPs": t4 - t3,
            "meta FLOPs": t5 - t4}

first = build()
best = min([build() for _ in range(repeat - 1)] or [first])
print(json.dumps({"first": first[0], "best": best[0], "best_cpu": best[1], "stages": stages()}))
"""

_ALL = r"""
import contextlib, io, sys, time
from attncomp.cli.main import run
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    checked = run(["check", sys.argv[1]])
    built = run(["build", sys.argv[1], "--no-write"])
if checked or built:
    raise SystemExit(f"check exited {checked}, build exited {built}")
print(time.perf_counter() - start)
"""

_ALL_IR_FLOPS = r"""
import sys, time
from pathlib import Path
from attncomp import ir
from attncomp.compiler import compile_spec
from attncomp.lower.flops import training_flops
from attncomp.report import attention_report, check_expect, count_params
start = time.perf_counter()
for path in sorted(Path(sys.argv[1]).rglob("*.attn")):
    spec = ir.load(path)
    model = compile_spec(spec, device="meta")
    params, _ = count_params(model)
    attention_report(model)
    if not all(row["ok"] for row in check_expect(spec, params, training_flops(model))):
        raise SystemExit(f"{path}: expect not met")
print(time.perf_counter() - start)
"""


def _python(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
    return done.stdout.strip().splitlines()[-1]


def timed_build(spec: str, repeat: int, overrides: list[str] = ()) -> dict:
    return json.loads(_python(_CHILD, spec, str(repeat), json.dumps(list(overrides))))


def process_seconds(spec: str) -> float:
    start = time.perf_counter()
    _python("from attncomp.cli.main import main; main()", "build", spec, "--no-write")
    return time.perf_counter() - start


def slope(xs: list[int], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="builds per process (first + best of the rest)")
    parser.add_argument("--layers", default="6,12,24,48", help="model.layers values for the per-layer slope")
    args = parser.parse_args()
    torch_import = float(_python("import time; t = time.perf_counter(); import torch; "
                                 "print(time.perf_counter() - t)"))
    print(f"import torch alone                      {torch_import:6.2f} s")
    for name in ("base", "big"):
        spec = f"specs/{name}.attn"
        whole = process_seconds(spec)
        got = timed_build(spec, args.repeat)
        parts = ", ".join(f"{k} {v:.3f}" for k, v in got["stages"].items())
        print(f"{name:<5} process {whole:5.2f} s   build first {got['first']:.3f} s, best {got['best']:.3f} s "
              f"(CPU {got['best_cpu']:.3f} s)   ({parts})")
    layers = [int(n) for n in args.layers.split(",")]
    sets = lambda n: [f"model.layers={n}", "expect.params=none"]  # noqa: E731 - other depths miss base's 65M
    got = [timed_build("specs/base.attn", args.repeat, sets(n)) for n in layers]
    times, cpu = [g["best"] for g in got], [g["best_cpu"] for g in got]
    compiling = [g["stages"]["parse"] + g["stages"]["compile"] for g in got]
    shown = ", ".join(f"{n}: {t:.3f}" for n, t in zip(layers, times))
    print(f"per layer (base, model.layers = {args.layers})  build {1000 * slope(layers, times):.1f} ms "
          f"(CPU {1000 * slope(layers, cpu):.1f} ms), parse + compile {1000 * slope(layers, compiling):.1f} ms"
          f"   (best build s by layers: {shown})")
    count = len(list((ROOT / "specs").rglob("*.attn")))
    print(f"all {count} specs: check + build --no-write in one process  {float(_python(_ALL, 'specs')):.2f} s")
    print(f"all {count} specs: the report's work (compile on meta, parameters, FLOPs, attention), one process  "
          f"{float(_python(_ALL_IR_FLOPS, 'specs')):.2f} s")


if __name__ == "__main__":
    main()
