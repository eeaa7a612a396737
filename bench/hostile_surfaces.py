"""The attacks of issue 23 on the surfaces added after the first hostile corpus, one function per category:
sharded checkpoints with payloads, export directories, state files (run.json, checkpoint metrics, import
configs), sweeps, decoding options, closed standard streams and Ctrl-C at real points (import:
bench/hostile_imports.py). (root, hostile files, good artifacts) -> cases.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import signal
from pathlib import Path

import torch

from bench.hostile_harness import Case, Poke
from bench.hostile_corpus import ROOT, copy_run, tiny_spec_text, write_json

Files = dict[str, Path]
LEGACY = ROOT / "tests/fixtures/legacy"
DEEP = "[" * 100_000 + "]" * 100_000


class _Payload:
    """Unpickled, it writes `canary` through `how` (a callable a restricted unpickler must not look up)."""

    def __init__(self, canary: Path, how: str):
        self.canary, self.how = str(canary), how

    def __reduce__(self):
        code = f"open({self.canary!r}, 'w').write('pwned')"
        if self.how == "eval":
            return eval, (code,)
        if self.how == "exec":
            return exec, (code,)
        if self.how == "system":
            return os.system, (f"touch {self.canary}",)
        if self.how == "mkdir":
            return os.mkdir, (self.canary,)
        import subprocess

        return subprocess.Popen, (["touch", self.canary],)


PAYLOADS = ("eval", "exec", "system", "mkdir", "popen")


def _sharded_commands(path: Path, out: Path, g: Files) -> dict[str, list[str]]:
    run = out / f"run_{path.name}"
    if not run.exists():
        shutil.copytree(path.parent, run)
    return {"consolidate": ["consolidate", str(path), "-o", str(out / "one.pt")],
            "translate": ["translate", str(path), "--input", str(g["src"]), "--device", "cpu"],
            "export": ["export", str(path), "--out", str(out / "exported")],
            "average": ["average", str(path), str(path), "-o", str(out / "avg.pt")],
            "init": ["train", str(g["spec"]), "--data", str(g["data"]), "--init", str(path), "--out",
                     str(out / "fresh"), "--procs", "1"],
            "resume": ["train", str(g["spec"]), "--data", str(g["data"]), "--out", str(run), "--resume",
                       "--procs", "1", "--set", "train.steps=1"]}


def sharded(root: Path, f: Files, g: Files) -> list[Case]:
    """Crafted shard indexes (.metadata, per-rank __0.metadata): a whole-file payload and one hidden in a real
    index, five ways to run code each, against every command that reads a sharded checkpoint."""
    cases = []
    for how in PAYLOADS:
        for where in ("whole", "inside", "rank"):
            d = root / "sharded" / f"{how}_{where}"
            canary = d / "CANARY"
            path = d / "holder" / "checkpoint_00000002"
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(LEGACY / "sharded", path)
            if where == "inside":
                index = pickle.loads((LEGACY / "sharded" / ".metadata").read_bytes())
                index.planner_data["x"] = _Payload(canary, how)
                (path / ".metadata").write_bytes(pickle.dumps(index))
            else:
                (path / (".metadata" if where == "whole" else "__0.metadata")).write_bytes(
                    pickle.dumps(_Payload(canary, how)))
            if where == "rank":
                (path / ".metadata").unlink()  # a reader that falls back to the rank's index
            for command, argv in _sharded_commands(path, d, g).items():
                cases.append(Case("sharded", argv, "ckpt", timeout=120, canary=canary,
                                  bad_value=command != "resume", note=f"{how} payload, {where}, {command}"))
    return cases


def _export_copy(root: Path, name: str, kind: str = "safetensors") -> Path:
    d = root / "exports" / name
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(LEGACY / kind, d)
    return d


def _export_argvs(d: Path, root: Path, g: Files) -> dict[str, list[str]]:
    return {"translate": ["translate", str(d), "--input", str(g["src"]), "--device", "cpu"],
            "eval": ["eval", str(d), "--src", str(g["src"]), "--ref", str(g["ref"]), "--device", "cpu"],
            "prepare": ["data", "prepare", "--train", str(g["data"] / "text" / "train"), "--src", "src", "--tgt", "tgt",
                        "--tokenizers", str(d), "--out", str(root / "exports" / f"data_{d.name}")]}


def exports(root: Path, f: Files, g: Files) -> list[Case]:
    """Export directories holding pipes, devices and links to nothing; hostile attncomp.json; a spec over the
    size limit; empty tokenizer models; torch.export directories given to the commands."""
    cases = []
    for name in ("attncomp.json", "spec.attn", "src.model", "tgt.model", "model.safetensors"):
        for kind in ("fifo", "dev_zero", "dev_urandom", "broken", "dir"):
            d = _export_copy(root, f"{kind}_{name}")
            target = d / name
            target.unlink()
            if kind == "fifo":
                os.mkfifo(target)
            elif kind == "dir":
                target.mkdir()
            else:
                target.symlink_to({"dev_zero": "/dev/zero", "dev_urandom": "/dev/urandom"}.get(kind, str(d / "none")))
            for command, argv in _export_argvs(d, root, g).items():
                cases.append(Case("exports", argv, "ckpt", timeout=60, bad_value=True, note=f"{name} {kind}, {command}"))
    meta = json.loads((LEGACY / "safetensors" / "attncomp.json").read_text())
    bad_metas = {"nested": DEEP, "list": "[]", "string": '"x"', "nan step": json.dumps({**meta, "step": float("nan")}),
                 "string step": json.dumps({**meta, "step": "4"}), "list metrics": json.dumps({**meta, "metrics": []}),
                 "inf metric": json.dumps({**meta, "metrics": {"best": float("inf"), "best_step": 1, "stale": 0}}),
                 "huge version": json.dumps({**meta, "version": 10 ** 400})}
    for key, text in bad_metas.items():
        d = _export_copy(root, f"meta_{key.replace(' ', '_')}")
        (d / "attncomp.json").write_text(text)
        for command, argv in _export_argvs(d, root, g).items():
            cases.append(Case("exports", argv, "ckpt", timeout=60, bad_value=True, note=f"attncomp.json {key}, {command}"))
    from attncomp import ir

    for layers, width in ((1024, 65536), (256, 32768), (2, 65536)):
        huge = ir.to_text(ir.load(str(ROOT / "specs/examples/tiny.attn"),
                                  [f"model.layers={layers}", f"model.d_model={width}", f"model.d_ff={width}"]))
        d = _export_copy(root, f"huge_{layers}")
        (d / "spec.attn").write_text(huge)
        write_json(d / "attncomp.json", {**meta, "spec_hash": hashlib.sha256(huge.encode()).hexdigest()})
        for command, argv in _export_argvs(d, root, g).items():  # prepare takes the tokenizers alone: nothing built
            cases.append(Case("exports", argv, "ckpt", timeout=60, bad_value=command != "prepare",
                              note=f"spec over the limit, {command}"))
    for side in ("src", "tgt"):
        d = _export_copy(root, f"empty_{side}")
        (d / f"{side}.model").write_bytes(b"")
        for command, argv in _export_argvs(d, root, g).items():
            cases.append(Case("exports", argv, "ckpt", timeout=60, bad_value=True, note=f"empty {side}.model, {command}"))
    torch_export = _export_copy(root, "torch_export", "torch-export")
    for command, argv in _export_argvs(torch_export, root, g).items():
        cases.append(Case("exports", argv, "ckpt", timeout=60, bad_value=True, note=f"a torch.export directory, {command}"))
    return cases


RUN_RECORDS = {"nested": DEEP, "list": "[]", "string": '"x"', "extended string": '{"extended": "x"}',
               "extended dicts": '{"extended": {"a": 1}}', "step NaN": '{"extended": [{"from": "c", "step": NaN, "changes": []}]}',
               "step inf": '{"extended": [{"from": "c", "step": Infinity, "changes": []}]}',
               "step string": '{"extended": [{"from": "c", "step": "4", "changes": []}]}',
               "changes number": '{"extended": [{"from": "c", "step": 4, "changes": 5}]}', "binary": "\udcff"}


def state_files(root: Path, f: Files, g: Files) -> list[Case]:
    """run.json and a checkpoint's judgement of the wrong shape; run.json as a pipe or a device."""
    cases = []
    for key, text in RUN_RECORDS.items():
        run = copy_run(g, root / "state" / f"run_{key.replace(' ', '_')}")
        (run / "run.json").write_bytes(text.encode("utf-8", errors="surrogateescape"))
        cases.append(Case("state-files", ["train", str(g["spec"]), "--data", str(g["data"]), "--out", str(run),
                                          "--resume", "--procs", "1", "--set", "train.steps=2"], "ckpt", timeout=120,
                          bad_value=True, note=f"run.json {key}"))
    for kind in ("fifo", "dev_zero"):
        run = copy_run(g, root / "state" / f"run_{kind}")
        (run / "run.json").unlink(missing_ok=True)
        os.mkfifo(run / "run.json") if kind == "fifo" else (run / "run.json").symlink_to("/dev/zero")
        cases.append(Case("state-files", ["train", str(g["spec"]), "--data", str(g["data"]), "--out", str(run),
                                          "--resume", "--procs", "1", "--set", "train.steps=2"], "ckpt", timeout=120,
                          bad_value=True, note=f"run.json {kind}"))
    real = torch.load(g["ckpt_full"], weights_only=True)
    judgements = {"best_step NaN": {"best": 1.0, "best_step": float("nan"), "stale": 0},
                  "stale negative": {"best": 1.0, "best_step": 1, "stale": -1},
                  "best inf": {"best": float("inf"), "best_step": 1, "stale": 0},
                  "best_step 1e300": {"best": 1.0, "best_step": 1e300, "stale": 0},
                  "best alone": {"best": 1.0}, "stale float": {"best": 1.0, "best_step": 1, "stale": 0.5}}
    for key, metrics in judgements.items():
        run = copy_run(g, root / "state" / f"metrics_{key.replace(' ', '_')}")
        for path in run.glob("checkpoint_0*.pt"):
            torch.save({**real, "metrics": metrics}, path)
        newest = sorted(run.glob("checkpoint_0*.pt"))[-1]
        for argv in (["translate", str(newest), "--input", str(g["src"]), "--device", "cpu"],
                     ["average", str(run), "--last", "1", "-o", str(run / "avg_out.pt")],
                     ["train", str(g["spec"]), "--data", str(g["data"]), "--out", str(run), "--resume", "--procs",
                      "1", "--set", "train.steps=2"]):
            cases.append(Case("state-files", argv, "ckpt", timeout=120, bad_value=argv[0] != "train",
                              note=f"metrics {key}, {argv[0]}"))
    return cases


def _sweep_state(data: Path, rows: dict) -> dict:
    return {"format": "attncomp-sweep", "version": 1, "rows": rows,
            "options": {"data": str(data.resolve()), "steps": 1, "minutes": None, "overrides": [], "bleu_sentences": 0}}


def sweeps(root: Path, f: Files, g: Files) -> list[Case]:
    """sweep.json rows named to escape, of the wrong shape, as pipes and devices; --out that cannot be made."""
    good = {"name": "tiny", "spec": "tiny.attn", "spec_hash": "0" * 64, "trained": True,
            "result": {"ppl": 10.0, "params_m": 0.1, "steps": 1}}
    states = {f"name {name!r}": _sweep_state(g["data"], {name: {**good, "name": name}})
              for name in ("../../../escaped", "../escaped", "/tmp/escaped", "..", ".", "", "a/b", "a\\b", "x\n",
                           "x\x00y", "tb/../../escaped")}
    for key, result in (("ppl NaN", {"ppl": float("nan")}), ("ppl inf", {"ppl": float("inf")}),
                        ("steps string", {"steps": "1"}), ("ppl list", {"ppl": [1]}), ("no ppl", None),
                        ("params_m string", {"params_m": "x"}), ("bleu NaN", {"bleu": float("nan")})):
        states[key] = _sweep_state(g["data"], {"tiny": {**good, "result": {"steps": 1} if result is None
                                                        else {**good["result"], **result}}})
    options = _sweep_state(g["data"], {})["options"]
    for key, change in (("steps string", {"steps": "1"}), ("minutes NaN", {"minutes": float("nan")}),
                        ("overrides string", {"overrides": "x"}), ("data list", {"data": []})):
        states[f"options {key}"] = {**_sweep_state(g["data"], {}), "options": {**options, **change}}
    texts = {key: json.dumps(value) for key, value in states.items()}
    texts.update({"nested": DEEP, "list": "[]", "rows list": json.dumps({**_sweep_state(g["data"], {}), "rows": []}),
                  "rows nested": '{"format": "attncomp-sweep", "version": 1, "rows": ' + DEEP + "}"})
    base = ["sweep", str(g["spec"]), "--data", str(g["data"]), "--steps", "1", "--bleu-sentences", "0"]
    cases = []
    for i, (key, text) in enumerate(texts.items()):
        out = root / "sweeps" / "a" / "b" / "c" / f"s{i}"
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.json").write_text(text)
        cases.append(Case("sweeps", [*base, "--out", str(out)], "cli", timeout=90, bad_value=True, note=f"sweep.json {key}"))
    for kind in ("fifo", "dev_zero", "dev_urandom", "dir"):
        out = root / "sweeps" / f"state_{kind}"
        out.mkdir(parents=True, exist_ok=True)
        target = out / "sweep.json"
        if not (target.exists() or target.is_symlink()):
            os.mkfifo(target) if kind == "fifo" else target.mkdir() if kind == "dir" else \
                target.symlink_to("/dev/zero" if kind == "dev_zero" else "/dev/urandom")
        cases.append(Case("sweeps", [*base, "--out", str(out)], "cli", timeout=90, bad_value=True, note=f"sweep.json {kind}"))
    for key, out in (("under a file", f["a_file"] / "out"), ("a file", f["a_file"]), ("under /proc", Path("/proc/x/out")),
                     ("/proc itself", Path("/proc")), ("/dev/null", f["dev_null"]), ("a FIFO", f["fifo"]),
                     ("under /dev/null", f["dev_null"] / "out")):
        cases.append(Case("sweeps", [*base, "--out", str(out)], "cli", timeout=90, bad_value=True, note=f"--out {key}"))
    for name in ("..attn", "...attn"):
        spec = root / "sweeps" / "names" / name
        spec.parent.mkdir(parents=True, exist_ok=True)
        spec.write_text(tiny_spec_text())
        cases.append(Case("sweeps", ["sweep", str(spec), *base[2:], "--out", str(root / "sweeps" / "n")], "cli",
                          timeout=90, bad_value=name == "..attn", note=f"spec named {name}"))
    return cases


def decode_options(root: Path, f: Files, g: Files) -> list[Case]:
    """Sampling settings that were 0 or inf in float32, counts that never finish."""
    base = ["translate", str(g["ckpt"]), "--input", str(g["src"]), "--device", "cpu"]
    cases = []
    for option in (["--temperature", "1e-300"], ["--temperature", "5e-324"], ["--temperature", "1e-45"],
                   ["--temperature", "1e300"], ["--temperature", "1.7e308"], ["--top-p", "1e-300"],
                   ["--top-p", "5e-324"], ["--top-p", "1e-45"], ["--temperature", "1e-300", "--top-p", "1e-300"],
                   ["--temperature", "1e300", "--top-k", "1"], ["--top-k", "1000000000"], ):
        cases.append(Case("decode-options", [*base, *option], "cli", timeout=90, note=" ".join(option)))
    for seed in ("-1", str(1 << 63), str(1 << 70)):
        cases.append(Case("decode-options", [*base, "--sample", "--seed", seed], "cli", timeout=60, bad_value=True,
                          note=f"--seed {seed}"))
    for option in (["--sample", "--nbest", "10000000"], ["--beam", "10000000"], ["--nbest", "1025", "--beam", "1025"],
                   ["--sample", "--nbest", "100000"], ["--beam", "5000"]):
        cases.append(Case("decode-options", [*base, *option], "cli", timeout=60, bad_value=True, note=" ".join(option)))
    return cases


def streams(root: Path, f: Files, g: Files) -> list[Case]:
    """Commands started with standard input or output closed (`<&-`, `>&-`), as a careless script starts them."""
    ckpt, src, ref = str(g["ckpt"]), str(g["src"]), str(g["ref"])
    no_input = [["translate", ckpt, "--device", "cpu"], ["translate", ckpt, "--device", "cpu", "--stream"],
                ["translate", ckpt, "--device", "cpu", "--input", "-"], ["translate", ckpt, "--device", "cpu", "--sample"],
                ["eval", ckpt, "--src", "-", "--ref", ref, "--device", "cpu"],
                ["eval", ckpt, "--src", src, "--ref", "-", "--device", "cpu"]]
    cases = [Case("streams", argv, "cli", timeout=60, bad_value=True, closed=(0,), note="stdin closed")
             for argv in no_input]
    no_output = [["translate", ckpt, "--device", "cpu", "--input", src],
                 ["translate", ckpt, "--device", "cpu", "--stream", "--input", src],
                 ["translate", ckpt, "--device", "cpu", "--input", src, "--nbest", "2"],
                 ["translate", ckpt, "--device", "cpu", "--input", src, "--output", "-"]]
    cases += [Case("streams", argv, "cli", timeout=60, bad_value=True, closed=(1,), note="stdout closed")
              for argv in no_output]
    both = ["translate", ckpt, "--device", "cpu", "--stream"]
    cases.append(Case("streams", both, "cli", timeout=60, bad_value=True, closed=(0, 1), note="both closed"))
    fine = [["translate", ckpt, "--device", "cpu", "--input", src, "--output", str(root / "streams" / "out.txt")],
            ["eval", ckpt, "--src", src, "--ref", ref, "--device", "cpu"], ["show", str(g["spec"])],
            ["check", str(g["spec"])], ["build", str(g["spec"]), "--no-write"], ["data", "info", str(g["data"])],
            ["export", ckpt, "--out", str(root / "streams" / "export")]]
    (root / "streams").mkdir(parents=True, exist_ok=True)
    cases += [Case("streams", argv, "cli", timeout=60, closed=(0, 1), note="no stream needed: stdin and stdout closed")
              for argv in fine]
    return cases


def interrupts(root: Path, f: Files, g: Files) -> list[Case]:
    """Ctrl-C (SIGINT to the process group) while train's workers start, while a sweep scores a row, and while
    export and data prepare build their directories."""
    cases = []
    for procs in ("1", "2"):
        for delay in (0.0, 1.0, 3.0):
            out = root / "interrupts" / f"train_{procs}_{delay}"
            shutil.rmtree(out, ignore_errors=True)
            argv = ["train", str(g["spec"]), "--data", str(g["data"]), "--out", str(out), "--procs", procs]
            cases.append(Case("interrupts", argv, "dist", timeout=120, poke=Poke(delay, signal.SIGINT, worker=None),
                              note=f"Ctrl-C once {procs} worker(s) are spawned, {delay} s into the run at the earliest"))
    for i in range(3):
        out = root / "interrupts" / f"sweep_{i}"
        shutil.rmtree(out, ignore_errors=True)
        argv = ["sweep", str(g["spec"]), "--data", str(g["data"]), "--steps", "1", "--bleu-sentences", "20",
                "--out", str(out)]
        cases.append(Case("interrupts", argv, "dist", timeout=180,
                          poke=Poke(0.0, signal.SIGINT, worker=None, when=out / "rows" / "tiny" / "checkpoint_avg.pt"),
                          note="Ctrl-C while the sweep scores its row"))
    return cases + _interrupted_outputs(root, g)


def _interrupted_outputs(root: Path, g: Files) -> list[Case]:
    """Ctrl-C once `export` and `data prepare` have begun building their directory (its temporary name appears):
    `interrupted`, exit 130, and neither --out nor the temporary directory left. CTranslate2 builds the tiny
    model's directory in a tenth of a second, too briefly for a poll from outside: that case's export sends the
    Ctrl-C itself as it writes its first file there (Poke.within), with model.bin and its config written."""
    cases = []
    for i, (fmt, delay) in enumerate((("torch-export", 0.0), ("torch-export", 2.0), ("ctranslate2", 0.0))):
        out = root / "interrupts" / f"export_{i}" / "tiny"
        shutil.rmtree(out.parent, ignore_errors=True)
        out.parent.mkdir(parents=True)
        building = out.parent / ".tiny.tmp-*"
        cases.append(Case("interrupts", ["export", str(g["ckpt"]), "--format", fmt, "--out", str(out)], "cli", timeout=120,
                          poke=Poke(delay, signal.SIGINT, worker=None, when=building, within=fmt == "ctranslate2"),
                          expect=r"^interrupted$", absent=[out, building],
                          note=f"Ctrl-C once export --format {fmt} builds its directory, {delay} s in at the earliest"))
    text = root / "interrupts" / "big"
    for side in ("src", "tgt"):  # 40,000 pairs: seconds of reading, sentencepiece and encoding
        text.with_suffix(f".{side}").write_text((g["data"] / "text" / f"train.{side}").read_text() * 200)
    for i, delay in enumerate((0.0, 1.0, 2.0)):  # it takes about 7 s
        out = root / "interrupts" / f"prepare_{i}" / "data"
        shutil.rmtree(out.parent, ignore_errors=True)
        out.parent.mkdir(parents=True)
        cases.append(Case("interrupts", ["data", "prepare", "--train", str(text), "--out", str(out), "--vocab-size", "256"],
                          "cli", timeout=120, poke=Poke(delay, signal.SIGINT, worker=None, when=out.parent / ".data.tmp-*"),
                          expect=r"^interrupted$", absent=[out, out.parent / ".data.tmp-*"],
                          note=f"Ctrl-C once data prepare builds its directory, {delay} s in at the earliest"))
    return cases


SURFACES = [sharded, exports, state_files, sweeps, decode_options, streams, interrupts]
