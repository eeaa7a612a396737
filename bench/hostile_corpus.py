"""The cases of bench/hostile.py: hostile files, spec texts, checkpoints, data directories, options, signals.

`hostile_files(root)` makes the files every attack reuses (also used by tests/hostile/); `good_artifacts`
makes a tiny valid spec, data directory and checkpoint; `build_corpus` (bench/hostile.py) returns several hundred
cases.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import shutil
from pathlib import Path

from bench.hostile_harness import Case, Poke, Sandbox

ROOT = Path(__file__).resolve().parent.parent
TINY_SET = ["train.steps=1", "train.checkpoint.every=1", "train.batch=tokens(600)"]


def hostile_files(root: Path) -> dict[str, Path]:
    """Paths no command should choke on: missing, directories, FIFOs, devices, binary, huge, odd names."""
    root.mkdir(parents=True, exist_ok=True)
    f: dict[str, Path] = {"missing": root / "missing.attn", "dev_zero": Path("/dev/zero"), "dev_null": Path("/dev/null"),
                          "dir": root / "a_dir", "fifo": root / "fifo.attn", "nul": root / "nul.attn",
                          "garbage": root / "garbage.bin", "huge": root / "huge.attn", "empty": root / "empty.attn",
                          "zero_link": root / "zero.attn", "broken_link": root / "broken.attn",
                          "loop_link": root / "loop.attn", "long": root / ("x" * 300 + ".attn"),
                          "deep_missing": root / "no" / "such" / "dir" / "out",
                          "under_file": root / "a_file" / "out", "a_file": root / "a_file",
                          "unreadable": root / "unreadable.attn", "latin1": root / "latin1.attn"}
    f["dir"].mkdir(exist_ok=True)
    if not f["fifo"].exists():
        os.mkfifo(f["fifo"])
    f["nul"].write_bytes(b"model x {\n  d_model = 6\x004\n}\n")
    f["garbage"].write_bytes(bytes(range(256)) * 64 + os.urandom(4096))
    with open(f["huge"], "wb") as out:  # sparse: 200 MB of NUL bytes that take no disk
        out.truncate(200 << 20)
    f["empty"].write_bytes(b"")
    f["a_file"].write_text("in the way\n")
    f["unreadable"].write_text("model x { }\n")
    f["unreadable"].chmod(0)  # root reads it anyway; the others see a permission error
    f["latin1"].write_bytes("# caf\xe9\nmodel x { d_model = 64 }\n".encode("latin-1"))
    for link, target in (("zero_link", "/dev/zero"), ("broken_link", str(root / "nowhere")),
                         ("loop_link", str(f["loop_link"]))):
        if not f[link].is_symlink():
            f[link].symlink_to(target)
    return f


@functools.lru_cache(maxsize=1)
def tiny_spec_text() -> str:
    """specs/examples/tiny.attn resolved (no `extends`), one update of training."""
    from attncomp import ir

    return ir.to_text(ir.load(str(ROOT / "specs/examples/tiny.attn"), TINY_SET))


def odd_named_specs(root: Path, text: str) -> dict[str, Path]:
    """The tiny spec under names with newlines, quotes, a coding= declaration and U+2028."""
    names = {"newline": "new\nline.attn", "quotes": "q'u\"o`te.attn", "coding": "x(coding=raw_unicode_escape).attn",
             "u2028": "line\u2028sep.attn", "spaces": " lead and trail .attn", "dash": "-dash.attn"}
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for key, name in names.items():
        out[key] = root / name
        out[key].write_text(text)
    return out


def good_artifacts(root: Path, sandbox: Sandbox, data: Path | None = None, run: Path | None = None) -> dict[str, Path]:
    """A valid spec, a prepared data directory, a run directory with checkpoints, two text files.

    `data` and `run` reuse a prepared directory and a finished run of tiny.attn instead of making them.
    """
    root.mkdir(parents=True, exist_ok=True)
    g = {"spec": root / "tiny.attn", "data": data or root / "data", "run": run or root / "run",
         "src": root / "src.txt", "ref": root / "ref.txt"}
    g["spec"].write_text(tiny_spec_text())
    for argv in (["data", "sample", "--out", str(g["data"]), "--pairs", "200", "--held-out", "20", "--force"],
                 ["train", str(g["spec"]), "--data", str(g["data"]), "--out", str(g["run"]), "--procs", "1"]):
        if (argv[0] == "data" and data) or (argv[0] == "train" and (g["run"] / "checkpoint_avg.pt").exists()):
            continue
        outcome = sandbox.run(argv, timeout=300)
        if outcome.code != 0:
            raise RuntimeError(f"could not prepare {argv}: {outcome.summary()}")
    g["ckpt"] = g["run"] / "checkpoint_avg.pt"
    g["ckpt_full"] = sorted(g["run"].glob("checkpoint_0*.pt"))[-1]
    lines = (g["data"] / "text/test.src").read_text().splitlines()[:3]
    g["src"].write_text("\n".join(lines) + "\n")
    g["ref"].write_text("\n".join((g["data"] / "text/test.tgt").read_text().splitlines()[:3]) + "\n")
    return g


def copy_run(good: dict[str, Path], dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(good["run"], dest)
    return dest


def write_json(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


SIGNALS = {"SIGSTOP": signal.SIGSTOP, "SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT}
__all__ = ["Case", "Poke", "hostile_files", "good_artifacts", "tiny_spec_text", "odd_named_specs"]
