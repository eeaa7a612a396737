"""Issue 45's category of bench/hostile.py for `train.precision = float8` (docs/training.md, *Float8*): bad values in
a spec and through `--set`, and float8 runs where float8 matrix products cannot run (this machine's CPU, no GPU,
two workers sharded). A bad value ends in one line and exit 2 (file:line:col for a spec); a run refused leaves no
run directory behind. (root, hostile files, good artifacts) -> cases.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench.hostile_harness import Case
from bench.hostile_special import LOCATED, _write

CAT = "float8"
SPEC = ("model m {{\n  vocab = shared(61)  d_model = 16  heads = 2  d_ff = 32\n  decoder {{ layers = 1 }}\n}}\n"
        "train {{\n  precision = {precision}\n}}\n")
# (precision as written in a spec, what the error must say): each on line 5
BAD = [("float9", "did you mean"), ("fp8", "precision"), ("FLOAT8", "precision"), ('"float8"', ""),
       ("float8(1)", ""), ("[float8]", ""), ("8", "precision"), ("float8 float8", ""), ("", "")]
SETS = ["fp8", "float16", "FLOAT8", "", "float8,bf16", "null", "8", "e4m3"]  # ("float8 " is float8: --set trims)


def float8(root: Path, f: dict, g: dict) -> list[Case]:
    d = root / "float8"
    cases = []
    for precision, said in BAD:
        name = re.sub(r"[^a-z0-9]+", "_", precision).strip("_") or "empty"
        spec = _write(d / "specs" / f"{name}.attn", SPEC.format(precision=precision))
        for argv in (["check", str(spec)], ["build", str(spec), "--no-write"]):
            cases.append(Case(CAT, argv, "front", timeout=30, bad_value=True, note=f"precision = {precision}",
                              expect=LOCATED + ".*" + re.escape(said)))
    for value in SETS:
        cases.append(Case(CAT, ["check", str(g["spec"]), "--set", f"train.precision={value}"], "front", timeout=30,
                          bad_value=True, note=f"--set train.precision={value!r}", expect=r"error: "))
    # float8 where its products cannot run (no emulation asked): refused before a worker starts, nothing written
    for name, extra in (("cpu", ["--procs", "1"]), ("gpu", ["--gpus", "1"]), ("fsdp", ["--procs", "2", "--fsdp"])):
        out = d / "runs" / name
        argv = ["train", str(g["spec"]), "--data", str(g["data"]), "--out", str(out), *extra,
                "--set", "train.precision=float8", "--set", "train.steps=1"]
        cases.append(Case(CAT, argv, "cli", timeout=60, bad_value=True, note=f"float8 on {name}", absent=[out],
                          expect=r"error: "))
    return cases
