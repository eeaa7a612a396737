"""Issue 43's factory category of bench/hostile.py: `attncomp train --model module:function --recipe FILE`
(attncomp/train/factory.py, docs/training.md "Any model") with hostile factory names (empty, no colon, many
colons, NUL and newline in a path, modules that do not exist or raise on import, functions that raise or return
None, a non-module, a module outside the protocol, `FILE.py:function` naming a FIFO, a directory or /dev/zero),
hostile recipes (a model block, nested garbage, huge numbers, no train block) and `--resume` of a factory run
with another factory, a spec or another recipe. Every case must be refused in one line (exit 2), train nothing
and write no run directory. (root, hostile files, good artifacts) -> cases.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bench.hostile_harness import Case
from bench.hostile_special import _quiet, _write
from tests.conftest import ROOT

CAT = "factory"
TINY = f"{ROOT / 'generated/examples/tiny.py'}:Model"
RECIPE = "train {\n  batch = tokens(400)\n  steps = 1\n  checkpoint { every = 1  average_last = 1 }\n}\n" \
         "decode { beam = 2  max_len = src + 5 }\n"
FACTORIES = '''
import torch
from torch import nn

def raises():
    raise RuntimeError("no weights here")
def exits():
    raise SystemExit(3)
def interrupts():
    raise KeyboardInterrupt
def none():
    return None
def number():
    return 42
def plain():
    return nn.Linear(2, 2)
class Liar(nn.Module):
    family = "alien"
    loss_inputs = ("src",)
def liar():
    return Liar()
def half():
    m = nn.Linear(2, 2)
    m.family = "decoder_only"
    return m
value = 3
'''
RECIPES = {  # name -> text; each must be refused before any training
    "a model block": "model x { d_model = 8 }\n" + RECIPE,
    "only a model block": "model x { }\n",
    "nested garbage": "train { " * 2000 + "}" * 2000 + "\n",
    "binary": "\udcff\x00\x01 train {",
    "huge steps": RECIPE.replace("steps = 1", "steps = 99999999999999999999999999"),
    "steps 1e400": RECIPE.replace("steps = 1", "steps = 1e400"),
    "huge batch": RECIPE.replace("tokens(400)", "tokens(1e308)"),
    "negative steps": RECIPE.replace("steps = 1", "steps = -1"),
    "nan peak": "train { schedule = inverse_sqrt(peak = nan, warmup = 1)  steps = 1 }\n",
    "an expect block": RECIPE + "expect { params = 5 }\n",
    "extends": 'extends "/dev/zero"\n' + RECIPE,
    "a decode block alone, with a bad beam": "decode { beam = 0 }\n",
}


def _factory_files(d: Path) -> Path:
    """A working directory holding factories.py, broken.py (raises on import) and odd .py paths."""
    cwd = d / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    _write(cwd / "factories.py", FACTORIES)
    _write(cwd / "broken.py", "raise RuntimeError('import-time failure')\n")
    _write(cwd / "exits_on_import.py", "import sys\nsys.exit(4)\n")
    _write(cwd / "syntax.py", "def make(:\n")
    for name, make in (("fifo.py", os.mkfifo), ("zero.py", lambda p: p.symlink_to("/dev/zero")),
                       ("dangling.py", lambda p: p.symlink_to(cwd / "nowhere.py")), ("a_dir.py", os.mkdir)):
        path = cwd / name
        if not (path.exists() or path.is_symlink()):
            make(path)
    return cwd


def _names(cwd: Path, f: dict) -> list[str]:
    return ["", ":", "nocolon", "a:b:c:d", "factories::plain", "factories:", ":plain", "factories:no-name",
            "factories:plain()", "factories:__class__", "fac tories:plain", "no_such_module_here:make",
            "os.path.nonexistent_sub:make", "broken:make", "exits_on_import:make", "syntax.py:make",
            "factories:absent", "factories:value", "factories:raises", "factories:exits", "factories:interrupts",
            "factories:none", "factories:number", "factories:plain", "factories:liar", "factories:half",
            "fifo.py:make", "zero.py:make", "dangling.py:make", "a_dir.py:make", "/dev/zero:make",
            f"{f['fifo']}:make", f"{f['dir']}:make", "bad\x00name.py:make", "new\nline.py:make",
            "new\nline:make", "\x1b[31mred:make", "missing.py:make", "../../../../etc/passwd.py:make",
            "os:system", "builtins:exit", "builtins:input"]


def _resumable(d: Path, g: dict) -> Path | None:
    """A factory's finished run (tiny.py's Model, one update) to resume with something else."""
    run = d / "factory_run"
    if not (run / "checkpoint_avg.pt").exists():
        shutil.rmtree(run, ignore_errors=True)
        recipe = _write(d / "recipe.attn", RECIPE)
        if _quiet(["train", "--model", TINY, "--recipe", str(recipe), "--data", str(g["data"]), "--out", str(run),
                   "--procs", "1"]) != 0:
            return None
    return run


def factory(root: Path, f: dict, g: dict) -> list[Case]:
    d = root / "factory"
    cwd = _factory_files(d)
    recipe = _write(d / "recipe.attn", RECIPE)
    data = ["--data", str(g["data"]), "--procs", "1"]
    cases = []
    for i, name in enumerate(_names(cwd, f)):
        out = d / "out" / f"name{i}"
        cases.append(Case(CAT, ["train", "--model", name, "--recipe", str(recipe), *data, "--out", str(out)], "front",
                          timeout=60, bad_value=True, cwd=cwd, absent=[out], note=f"--model {name!r}"))
    for i, (note, text) in enumerate(RECIPES.items()):
        path = d / "recipes" / f"recipe{i}.attn"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        out = d / "out" / f"recipe{i}"
        cases.append(Case(CAT, ["train", "--model", TINY, "--recipe", str(path), *data, "--out", str(out)], "front",
                          timeout=60, bad_value=True, absent=[out], note=f"a recipe: {note}"))
    for key in ("missing", "dev_zero", "dir", "fifo", "nul", "garbage", "huge", "broken_link", "loop_link"):
        out = d / "out" / f"recipe-{key}"
        cases.append(Case(CAT, ["train", "--model", TINY, "--recipe", str(f[key]), *data, "--out", str(out)], "front",
                          timeout=60, bad_value=True, absent=[out], note=f"--recipe {key}"))
    for argv, note in ((["--recipe", str(recipe)], "--recipe without --model"),
                       (["--model", TINY, str(g["spec"])], "--model and a spec"),
                       (["--model", TINY, "--recipe", str(recipe), "--set", "model.d_model=8"], "--set a model key")):
        out = d / "out" / ("opt-" + note.replace(" ", "_"))
        cases.append(Case(CAT, ["train", *argv, *data, "--out", str(out)], "front", timeout=60, bad_value=True,
                          absent=[out], note=note))
    # the good spec's weights fit tiny.py's Model (generated from the same spec): taken, one update trained
    cases.append(Case(CAT, ["train", "--model", TINY, "--recipe", str(recipe), "--init", str(g["ckpt"]), *data,
                            "--out", str(d / "out" / "init")], "front", timeout=90, note="--init a spec's weights"))
    cases.append(Case(CAT, ["train", "--model", TINY, "--recipe", str(recipe), "--init", str(f["garbage"]), *data,
                            "--out", str(d / "out" / "init-garbage")], "front", timeout=60, bad_value=True,
                      absent=[d / "out" / "init-garbage"], note="--init garbage"))
    run = _resumable(d, g)
    if run is None:
        return cases
    other = _write(cwd / "other.py", f"import runpy\nModel = runpy.run_path({TINY.rsplit(':', 1)[0]!r})['Model']\n")
    for argv, note in ((["--model", f"{other}:Model", "--recipe", str(recipe)], "another factory, the same model"),
                       (["--model", "factories:liar", "--recipe", str(recipe)], "a factory that is refused anyway"),
                       ([str(g["spec"])], "a spec"),
                       (["--model", TINY, "--recipe", str(recipe), "--set", "train.seed=9"], "another recipe"),
                       (["--model", TINY], "no recipe: every key its default")):
        cases.append(Case(CAT, ["train", *argv, *data, "--out", str(run), "--resume"], "front", timeout=90,
                          bad_value=True, cwd=cwd, note=f"--resume a factory's run with {note}"))
    return cases
