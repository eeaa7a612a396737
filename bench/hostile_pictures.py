"""Issue 43's pictures category of bench/hostile.py: `attncomp draw`, `plot` and `page` (docs/pictures.md) on
hostile input: specs that are bad, huge, links or FIFOs; run directories whose TensorBoard event files, run.json
or checkpoints are damaged (NaN and inf scalars, nested JSON, binary, empty, truncated, a FIFO, /dev/zero, a
link to nothing); hostile sweep directories; hostile output paths; names with newlines and escapes. A case that
must fail is run in a fresh working directory that must stay empty (its `-o` is relative to it), so a refused
command writes nothing, not even a temporary file. (root, hostile files, good artifacts) -> cases.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from bench.hostile_corpus import copy_run, odd_named_specs, write_json
from bench.hostile_harness import Case

CAT = "pictures"


def _fresh(d: Path, name: str) -> Path:
    """A working directory for one case, emptied (it must still be empty after a refused command)."""
    cwd = d / "cwd" / name
    if cwd.exists():
        shutil.rmtree(cwd)
    cwd.mkdir(parents=True)
    return cwd


def _refused(d: Path, name: str, argv: list[str], note: str, timeout: float = 60) -> Case:
    """A command that must be refused (exit non-zero, one line) and leave its working directory empty."""
    cwd = _fresh(d, name)
    return Case(CAT, argv, "cli", timeout=timeout, bad_value=True, note=note, cwd=cwd, absent=[cwd / "*"])


def _event_file(path: Path, values: list[tuple[int, float]]) -> None:
    """An event file of train/loss scalars (NaN, inf, huge steps: what a diverged run logs)."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(path)) as writer:
        for step, value in values:
            writer.add_scalar("train/loss", value, step)


def _damaged_runs(d: Path, g: dict) -> dict[str, Path]:
    """Copies of the good run, each damaged in one way."""
    runs: dict[str, Path] = {}

    def run(name: str) -> Path:
        runs[name] = copy_run(g, d / "runs" / name)
        return runs[name]

    def events(r: Path) -> Path:
        return next((r / "tb").glob("events.out.tfevents.*"))

    good_events = events(g["run"]).read_bytes()
    for name, damage in {"events binary": lambda p: p.write_bytes(os.urandom(4096)),
                         "events empty": lambda p: p.write_bytes(b""),
                         "events truncated": lambda p: p.write_bytes(good_events[: len(good_events) // 2 + 3]),
                         "events huge length": lambda p: p.write_bytes(b"\xff" * 8 + b"\0" * 8)}.items():
        damage(events(run(name)))
    for name in ("events fifo", "events dev zero", "events dangling", "events a directory", "tb a file"):
        r = run(name)
        path = events(r)
        path.unlink()
        if name == "events fifo":
            os.mkfifo(path)
        elif name == "events dev zero":
            path.symlink_to("/dev/zero")
        elif name == "events dangling":
            path.symlink_to(r / "nowhere")
        elif name == "events a directory":
            path.mkdir()
        else:
            shutil.rmtree(r / "tb")
            (r / "tb").write_text("not a directory\n")
    r = run("events nan inf")
    shutil.rmtree(r / "tb")
    _event_file(r / "tb", [(1, float("nan")), (2, float("inf")), (3, float("-inf")), (2**62, 1e38), (-5, 1.0)])
    for name, text in {"run.json nan": '{"data": NaN, "spec": Infinity}', "run.json nested": "[" * 200000,
                       "run.json binary": "\udcff\x00\x01", "run.json empty": "", "run.json truncated": '{"data": "/t',
                       "run.json a list": "[1, 2]", "run.json data a number": '{"data": 1e999, "spec": 7}'}.items():
        (run(name) / "run.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    for name, target in {"run.json fifo": None, "run.json dev zero": "/dev/zero",
                         "run.json dangling": "nowhere"}.items():
        path = run(name) / "run.json"
        path.unlink()
        if target is None:
            os.mkfifo(path)
        else:
            path.symlink_to(target)
    for name, data in {"data a fifo": "fifo", "data dev zero": "/dev/zero", "data a file": "run.json"}.items():
        r = run(name)
        record = json.loads((r / "run.json").read_text())
        if data == "fifo":
            os.mkfifo(r / "fifo")
        record["data"] = data if data.startswith("/") else str(r / data)
        write_json(r / "run.json", record)
    r = run("no tb, checkpoints truncated")
    shutil.rmtree(r / "tb")
    for ckpt in r.glob("checkpoint_*.pt"):
        ckpt.write_bytes(ckpt.read_bytes()[:100])
    r = run("only a spec")
    for path in list(r.iterdir()):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    (r / "spec.attn").write_text("model x {}\n")
    runs["new\nline\x1b[31m"] = copy_run(g, d / "runs" / "new\nline\x1b[31m")
    return runs


def _sweeps(d: Path, g: dict) -> dict[str, Path]:
    """Directories that look like sweeps: sweep.json and rows/, each hostile in one way."""
    found = {}
    for name, state, rows in (("state garbage", b"\xff\x00garbage", "good"), ("state nested", b"[" * 200000, "good"),
                              ("state fifo", None, "good"), ("rows empty", b"{}", "empty"),
                              ("rows a file", b"{}", "file"), ("rows damaged", b"{}", "damaged"),
                              ("rows a link loop", b"{}", "loop")):
        s = d / "sweeps" / name
        if s.exists():
            shutil.rmtree(s)
        s.mkdir(parents=True)
        if state is None:
            os.mkfifo(s / "sweep.json")
        else:
            (s / "sweep.json").write_bytes(state)
        if rows == "file":
            (s / "rows").write_text("x\n")
            continue
        (s / "rows").mkdir()
        if rows == "good":
            copy_run(g, s / "rows" / "A")
        elif rows == "damaged":
            (s / "rows" / "A").mkdir()
            (s / "rows" / "B").mkdir()
            (s / "rows" / "B" / "tb").write_text("x")
        elif rows == "loop":
            (s / "rows" / "A").symlink_to(s / "rows" / "A")
        found[name] = s
    return found


def _draw_cases(d: Path, f: dict, g: dict) -> list[Case]:
    cases = []
    for key in ("missing", "dev_zero", "dir", "fifo", "nul", "garbage", "huge", "empty", "zero_link", "broken_link",
                "loop_link", "long", "unreadable", "latin1"):
        cases.append(_refused(d, f"draw-{key}", ["draw", str(f[key]), "-o", "pic.svg"], f"draw a spec: {key}"))
    for key, spec in odd_named_specs(d / "odd", g["spec"].read_text()).items():
        cases.append(Case(CAT, ["draw", str(spec), "-o", str(d / "out" / f"odd-{key}.svg")], "cli", timeout=90,
                          note=f"a spec named with {key}"))
    cases.append(_refused(d, "draw-three", ["draw", *[str(g["spec"])] * 3, "-o", "p.svg"],
                          "three specs"))
    cases.append(_refused(d, "draw-set", ["draw", str(g["spec"]), "--set", "model.d_model=-1", "-o", "p.svg"],
                          "a bad --set"))
    cases.append(_refused(d, "draw-versus-fifo", ["draw", str(g["spec"]), str(f["fifo"]), "-o", "p.svg"],
                          "two specs, the second a FIFO"))
    return cases


def _outputs(d: Path, f: dict, g: dict) -> list[Case]:
    """Hostile `-o` paths for the three commands: each refused, except a link to nothing, which is replaced by
    the picture (the path named is written; nothing is made where the link pointed)."""
    for name in ("a_dir.svg", "a_dir.html"):
        (d / name).mkdir(exist_ok=True)
    # a missing folder of this category's own: the outputs category's `train --out` makes files/no/such/dir
    outs = {"a missing folder": str(d / "no" / "such" / "dir" / "out.svg"),
            "a file in the way": f"{f['under_file']}.svg",
            "a directory": str(d / "a_dir.svg"), "/dev/null": "/dev/null", "/proc": "/proc/self/x.svg",
            "no suffix": "pic", "a .txt suffix": "pic.txt", "an empty name": ""}
    cases = []
    for command, argv in (("draw", ["draw", str(g["spec"])]), ("plot", ["plot", str(g["run"])]),
                          ("page", ["page", str(g["run"]), "--sentences", "0"])):
        suffix = ".html" if command == "page" else ".svg"
        for note, out in outs.items():
            if command == "page" and note in ("no suffix", "a .txt suffix"):
                continue  # a page is HTML whatever its name
            out = out.removesuffix(".svg") + suffix if out.endswith(".svg") else out
            cases.append(_refused(d, f"{command}-out-{note}", [*argv, "-o", out], f"{command} -o {note}", timeout=90))
        link, target = d / f"dangling-{command}{suffix}", d / f"nowhere-{command}"
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(target / f"x{suffix}")
        cases.append(Case(CAT, [*argv, "-o", str(link)], "cli", timeout=90, absent=[target],
                          note=f"{command} -o a link to nothing"))
    return cases


def pictures(root: Path, f: dict, g: dict) -> list[Case]:
    d = root / "pictures"
    (d / "out").mkdir(parents=True, exist_ok=True)
    cases = _draw_cases(d, f, g) + _outputs(d, f, g)
    runs = _damaged_runs(d, g)
    for name, run in runs.items():
        slug = name.replace(" ", "-").replace("\n", "").replace("\x1b[31m", "")
        cases.append(Case(CAT, ["plot", str(run), "-o", str(d / "out" / f"plot-{slug}.svg")], "cli", timeout=60,
                          note=f"plot a run: {name}"))
        cases.append(Case(CAT, ["page", str(run), "-o", str(d / "out" / f"page-{slug}.html"), "--sentences", "1",
                                "--seconds", "10"], "cli", timeout=120, note=f"page of a run: {name}"))
    for name, sweep in _sweeps(d, g).items():
        cases.append(Case(CAT, ["plot", str(sweep), "-o", str(d / "out" / f"sweep-{name.replace(' ', '-')}.svg")],
                          "cli", timeout=60, note=f"plot a sweep: {name}"))
    for key in ("missing", "dev_zero", "fifo", "garbage", "broken_link", "loop_link", "a_file"):
        cases.append(_refused(d, f"plot-{key}", ["plot", str(f[key]), "-o", "p.svg"], f"plot a run: {key}"))
        cases.append(_refused(d, f"page-{key}", ["page", str(f[key]), "-o", "p.html"], f"page of a run: {key}"))
    for command, out in (("draw", "-"), ("page", "-"), ("plot", "-")):  # `-` is stdout: never a file named -
        cwd = _fresh(d, f"{command}-stdout")
        source = str(g["spec"] if command == "draw" else g["run"])
        cases.append(Case(CAT, [command, source, "-o", out, *(["--sentences", "0"] if command == "page" else [])],
                          "cli", timeout=90, cwd=cwd, absent=[cwd / "*"], note=f"{command} -o - (stdout)"))
    for argv, note in ((["page", str(g["run"]), "-o", "p.html", "--sentences", "-1"], "--sentences -1"),
                       (["page", str(g["run"]), "-o", "p.html", "--seconds", "nan"], "--seconds nan"),
                       (["page", str(g["run"]), "-o", "p.html", "--sentences", "99999999999999999999"], "huge"),
                       (["plot", str(g["run"]), "-o", "p.svg", "--x", "epochs"], "--x epochs")):
        cases.append(_refused(d, "opt-" + note.replace(" ", ""), argv, note))
    return cases
