"""The attacks of bench/hostile.py, one function per category: (root, hostile files, good artifacts) -> cases.

Owners (who fixes what fails): front = spec files, extends, spec text, codegen; ckpt = checkpoints and run
directories; cli = option values, output paths, data directories, input files; dist = workers and signals.
"""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import torch

from bench.hostile_harness import Case, Poke
from bench.hostile_corpus import copy_run, odd_named_specs, tiny_spec_text, write_json

Files = dict[str, Path]
PATH_KEYS = ["missing", "dev_zero", "dev_null", "dir", "fifo", "nul", "garbage", "huge", "empty", "zero_link",
             "broken_link", "loop_link", "long", "unreadable", "latin1", "a_file"]


def spec_files(root: Path, f: Files, g: Files) -> list[Case]:
    cases = []
    for key in PATH_KEYS:
        p = str(f[key])
        for argv in (["check", p], ["show", p], ["show", p, "--json"], ["diff", p, str(g["spec"])],
                     ["diff", str(g["spec"]), p], ["build", p, "--no-write"]):
            cases.append(Case("spec-files", argv, "front", timeout=15, note=key))
    cases.append(Case("spec-files", ["check", str(f["dir"])], "front", bad_value=True, note="a directory with no specs"))
    cases.append(Case("spec-files", ["build", str(f["dir"]), "--no-write"], "front", bad_value=True,
                      note="a directory with no specs"))
    cases.append(Case("spec-files", ["check", str(root / "none" / "*.attn")], "front", note="a glob matching nothing"))
    return cases


def extends(root: Path, f: Files, g: Files) -> list[Case]:
    d = root / "extends"
    d.mkdir(exist_ok=True)
    targets = {k: str(f[k]) for k in ("fifo", "dev_zero", "zero_link", "dir", "missing", "huge", "garbage", "nul",
                                      "long", "loop_link", "dev_null", "empty")}
    targets.update({"nul_in_path": "a\\u0000b.attn", "nul_literal": "a\x00b.attn", "very_long": "y" * 5000,
                    "proc_mem": "/proc/self/mem", "etc_passwd": "/etc/passwd", "self": "self.attn",
                    "escape_quote": 'a\\"b.attn', "newline": "a\nb.attn"})
    (d / "cycle_a.attn").write_text('extends "cycle_b.attn"\nmodel a { }\n')
    (d / "cycle_b.attn").write_text('extends "cycle_a.attn"\nmodel b { }\n')
    cases = [Case("extends", ["check", str(d / "cycle_a.attn")], "front", note="a cycle")]
    for key, target in targets.items():
        spec = d / f"{key}.attn" if key != "self" else d / "self.attn"
        spec.write_text(f'extends "{target}"\nmodel x {{ d_model = 64 }}\n')
        for argv in (["check", str(spec)], ["build", str(spec), "--no-write"], ["show", str(spec)]):
            cases.append(Case("extends", argv, "front", timeout=20, note=f"extends {key}"))
    return cases


SPEC_TEXTS = {
    "u2028_comment": "# a\u2028b\nmodel x {\n  d_model = oops\n}\n",
    "formfeed_comment": "# a\x0cb\nmodel x {\n  d_model = oops\n}\n",
    "fs_comment": "# a\x1cb\nmodel x {\n  d_model = oops\n}\n",
    "cr_only": "# a\rmodel x {\r  d_model = oops\r}\r",
    "crlf": "# a\r\nmodel x {\r\n  d_model = oops\r\n}\r\n",
    "bom": "\ufeffmodel x { d_model = 64 }\n",
    "deep": "model x " + "{ " * 2000 + "}" * 2000 + "\n",
    "long_line": "model x { d_model = " + "9" * 100000 + " }\n",
    "huge_model": "model big { layers = 1024 d_model = 65536 heads = 8 vocab = shared(16777216) encoder { } decoder { } }\n",
    "negative": "model x { d_model = -64 }\n",
    "zero_heads": "model x { heads = 0 }\n",
    "nan": "model x { d_model = nan }\n",
    "float_overflow": "model x { dropout { residual = 1e999 } }\n",
    "unicode_ident": "model \u00e9\u0301 { }\n",
    "only_comment": "# nothing\n",
    "unterminated_string": 'extends "abc\nmodel x { }\n',
    "many_models": "model a { }\nmodel b { }\n",
    "dup_key": "model x { d_model = 64 d_model = 128 }\n",
    "control_chars": "model x {\x01\x02\x03 }\n",
    "lone_surrogate_bytes": b"model x { } # \xed\xa0\x80\n",
    "invalid_utf8": b"model x { } # \xff\xfe\n",
}
LINE_ENDS = ("u2028_comment", "formfeed_comment", "fs_comment", "cr_only", "crlf")
SETS = ["model.heads=0", "model.heads=nan", "model.heads=", "=1", "model=", "no.such.key=1", "model.d_model=1e999",
        "model.heads=-1", "train.steps=0", "train.steps=-5", "a.b.c.d.e=1", "model.heads", "model.vocab=shared(0)",
        "model.heads=1\n2", "train.schedule=constant(lr = nan)", "model.layers=100000000"]


def spec_text(root: Path, f: Files, g: Files) -> list[Case]:
    d = root / "texts"
    d.mkdir(exist_ok=True)
    cases = []
    for key, text in SPEC_TEXTS.items():
        spec = d / f"{key}.attn"
        spec.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        where = r":3:\d+: error: " if key in LINE_ENDS else ""  # `d_model = oops` is on line 3
        for argv in (["check", str(spec)], ["build", str(spec), "--no-write"]):
            cases.append(Case("spec-text", argv, "front", timeout=30, note=key, expect=where))
    for value in SETS:
        for argv in (["check", str(g["spec"]), "--set", value], ["build", str(g["spec"]), "--no-write", "--set", value]):
            cases.append(Case("spec-text", argv, "front", timeout=30, bad_value=True, note=f"--set {value!r}"))
    return cases


PAYLOAD = "open({canary!r}, 'w').write('pwned')"


def codegen(root: Path, f: Files, g: Files) -> list[Case]:
    cases = []
    base = tiny_spec_text()
    for i, (folder, name, comment) in enumerate([
            ("", "x(coding=raw_unicode_escape).attn", "# \\u000a{payload}  #"),
            ("coding=unicode_escape", "plain.attn", "# \\n{payload}  #"),
            ("coding=unicode_escape", "plain2.attn", "# \\u000a{payload}  #"),
            ("", "q'\"\"\"x.attn", "# '''\"\"\" {payload}"),
            ("", "n\nl.attn", "# \u2028{payload}"),
            ("", "bs\\x.attn", "# \\\n{payload}"),
            ("", "imp.attn", "# __import__('os').system('true') \\u000a{payload}"),
            ("", "x\u2028y(coding=raw_unicode_escape).attn", "# \\u2028\\u000a{payload}")]):
        d = root / "codegen" / f"c{i}" / folder
        d.mkdir(parents=True, exist_ok=True)
        canary = d / "CANARY"
        canary.unlink(missing_ok=True)
        spec = d / name
        spec.write_text(comment.format(payload=PAYLOAD.format(canary=str(canary))) + "\n" + base)
        out = d / "out"
        cases.append(Case("codegen", ["build", str(spec), "-o", str(out)], "front", timeout=60, canary=canary,
                          after=[str(out.relative_to(d)) + "/*.py"], note=f"injection {i}", cwd=d))
    return cases


def _save(path: Path, payload) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, path)
    return path


def checkpoint_files(root: Path, g: Files) -> dict[str, Path]:
    d = root / "ckpts"
    real = torch.load(g["ckpt"], weights_only=True)
    out = {"empty_dict": _save(d / "empty_dict.pt", {}), "list": _save(d / "list.pt", [1, 2]),
           "tag_only": _save(d / "tag_only.pt", {"format": real["format"], "version": real["version"]}),
           "tensor": _save(d / "tensor.pt", torch.zeros(3))}
    for key in real:
        out[f"no_{key}"] = _save(d / f"no_{key}.pt", {k: v for k, v in real.items() if k != key})
    for key, bad in (("spec", 'extends "/etc/passwd"\n'), ("spec", "garbage {{{"), ("spec", 5), ("model", "x"),
                     ("model", {}), ("tokenizers", {"src": torch.zeros(3, dtype=torch.uint8)}),
                     ("tokenizers", {"src": torch.zeros(3, dtype=torch.uint8), "tgt": torch.zeros(3, dtype=torch.uint8)}),
                     ("step", -1), ("step", "x"), ("version", 999), ("version", "2"), ("format", "other"),
                     ("kind", "nonsense"), ("spec_hash", "0" * 64)):
        name = f"bad_{key}_{len(out)}"
        out[name] = _save(d / f"{name}.pt", {**real, key: bad})
    model = {k: (torch.full_like(v, float("nan")) if v.is_floating_point() else v) for k, v in real["model"].items()}
    out["nan_weights"] = _save(d / "nan_weights.pt", {**real, "model": model})
    out["wrong_shape"] = _save(d / "wrong_shape.pt", {**real, "model": {k: v[..., :1] if v.dim() else v
                                                                        for k, v in real["model"].items()}})
    raw = g["ckpt"].read_bytes()
    (d / "truncated.pt").write_bytes(raw[: len(raw) // 2])
    out["truncated"] = d / "truncated.pt"
    flipped = bytearray(raw)
    for i in range(100, len(flipped), 997):
        flipped[i] ^= 0xFF
    (d / "flipped.pt").write_bytes(bytes(flipped))
    out["flipped"] = d / "flipped.pt"
    return out


# a checkpoint that lacks one of these, or holds a wrong type in one, must be refused by every command
REFUSED = {"empty_dict", "list", "tag_only", "tensor", "pickle", "truncated", "flipped", "no_format", "no_version",
           "no_spec", "no_spec_hash", "no_tokenizers", "no_model", "no_kind"}


class _Evil:
    def __init__(self, canary: str):
        self.canary = canary

    def __reduce__(self):
        return (eval, (f"open({self.canary!r}, 'w').write('pwned')",))


def checkpoints(root: Path, f: Files, g: Files) -> list[Case]:
    files = checkpoint_files(root, g)
    canary = root / "ckpts" / "PICKLE_CANARY"
    files["pickle"] = _save(root / "ckpts" / "pickle.pt", {**torch.load(g["ckpt"], weights_only=True),
                                                          "extra": _Evil(str(canary))})
    for key in ("dir", "fifo", "dev_zero", "garbage", "empty", "nul", "huge", "missing", "broken_link"):
        files[key] = f[key]
    cases = []
    out = root / "ckpt_out"
    out.mkdir(exist_ok=True)
    for key, path in files.items():
        bad = key in REFUSED or key.startswith("bad_") or key in f
        cases.append(Case("checkpoints", ["translate", str(path), "--input", str(g["src"]), "--device", "cpu"], "ckpt",
                          timeout=40, canary=canary, note=key, bad_value=bad))
        cases.append(Case("checkpoints", ["average", str(path), str(g["ckpt"]), "-o", str(out / f"{key}.pt")], "ckpt",
                          timeout=40, canary=canary, note=key, bad_value=bad or key == "wrong_shape"))
    for key in ("no_tokenizers", "nan_weights", "bad_spec_" , "truncated"):
        for name, path in files.items():
            if name.startswith(key):
                cases.append(Case("checkpoints", ["eval", str(path), "--src", str(g["src"]), "--ref", str(g["ref"]),
                                                  "--device", "cpu"], "ckpt", timeout=40, note=name))
                break
    cases.append(Case("checkpoints", ["translate", str(g["ckpt"]), "--input", str(g["src"]), "--device", "cpu",
                                      "--spec", str(f["fifo"])], "ckpt", timeout=20, note="--spec a FIFO"))
    return cases


def run_dirs(root: Path, f: Files, g: Files) -> list[Case]:
    cases = []
    unreadable = copy_run(g, root / "rundirs" / "unreadable_newest")
    newest = sorted(unreadable.glob("checkpoint_0*.pt"))[-1]
    (newest.with_name("checkpoint_99999999.pt")).write_bytes(b"not a checkpoint")
    cases.append(Case("run-dirs", ["average", str(unreadable), "--last", "2", "-o", str(root / "rundirs" / "u.pt")],
                      "ckpt", timeout=40, note="newest unreadable"))
    cases.append(Case("run-dirs", ["train", str(g["spec"]), "--data", str(g["data"]), "--out", str(unreadable),
                                   "--procs", "1", "--resume", "--set", "train.steps=3"], "ckpt", timeout=120,
                      note="resume past an unreadable newest"))
    stale = copy_run(g, root / "rundirs" / "stale_tmp")
    (stale / "checkpoint_00000009.pt.tmp").write_bytes(b"half")
    cases.append(Case("run-dirs", ["train", str(g["spec"]), "--data", str(g["data"]), "--out", str(stale), "--procs",
                                   "1", "--resume", "--set", "train.steps=2"], "ckpt", timeout=120, note="stale .tmp"))
    empty = root / "rundirs" / "empty"
    empty.mkdir(parents=True, exist_ok=True)
    for last in ("0", "-1", "100000000000"):
        cases.append(Case("run-dirs", ["average", str(g["run"]), "--last", last, "-o", str(root / "rundirs" / "l.pt")],
                          "cli", bad_value=last != "100000000000", note=f"--last {last}"))
    cases.append(Case("run-dirs", ["average", str(empty), "-o", str(root / "rundirs" / "e.pt")], "ckpt"))
    return cases


def _shuffle_idx(d: Path) -> None:
    """Offsets shuffled, count and last value kept: a reader that trusts them loops or reads garbage."""
    idx = np.fromfile(d / "train.src.idx", dtype=np.int64)
    mid = idx[1:-1].copy()
    np.random.default_rng(0).shuffle(mid)
    np.concatenate([idx[:1], mid, idx[-1:]]).astype(np.int64).tofile(d / "train.src.idx")


def _negative_idx(d: Path) -> None:
    idx = np.fromfile(d / "train.tgt.idx", dtype=np.int64)
    idx[3] = -(1 << 40)
    idx.tofile(d / "train.tgt.idx")


MANIFEST_EDITS = {**{f"no_{k}": (lambda k: lambda m: m.pop(k))(k) for k in ("format", "vocab", "dtype", "splits",
                                                                           "languages")},
                  "dtype_bad": lambda m: m.update(dtype="object"),
                  "pairs_wrong": lambda m: m["splits"]["train"].update(pairs=-3)}
DATA_EDITS = {"manifest_garbage": lambda d: (d / "manifest.json").write_text("{{{"),
              "manifest_list": lambda d: (d / "manifest.json").write_text("[]"),
              "manifest_empty": lambda d: (d / "manifest.json").write_text(""),
              "idx_shuffled": _shuffle_idx, "idx_negative": _negative_idx,
              "bin_truncated": lambda d: (d / "train.src.bin").write_bytes((d / "train.src.bin").read_bytes()[:-2]),
              "no_spm": lambda d: (d / "spm.model").unlink(),
              "spm_garbage": lambda d: (d / "spm.model").write_bytes(b"garbage"),
              "idx_missing": lambda d: (d / "valid.src.idx").unlink()}


def _corrupt_data(root: Path, g: Files) -> dict[str, Path]:
    """Copies of the good data directory, each broken in one way."""
    import json
    import shutil

    out = {}
    for name in [*MANIFEST_EDITS, *DATA_EDITS]:
        d = root / "datas" / name
        if d.exists():
            shutil.rmtree(d)
        shutil.copytree(g["data"], d)
        out[name] = d
        if name in MANIFEST_EDITS:
            manifest = json.loads((d / "manifest.json").read_text())
            MANIFEST_EDITS[name](manifest)
            write_json(d / "manifest.json", manifest)
        else:
            DATA_EDITS[name](d)
    return out


def data_dirs(root: Path, f: Files, g: Files) -> list[Case]:
    cases = []
    dirs = _corrupt_data(root, g)
    for key in ("missing", "a_file", "dir", "fifo", "dev_null"):
        dirs[key] = f[key]
    for name, d in dirs.items():
        # every variant is broken: training must refuse it; `info` reads the manifest only
        cases.append(Case("data-dirs", ["data", "info", str(d)], "cli", timeout=20, note=name,
                          bad_value=name in MANIFEST_EDITS or name.startswith("manifest")))
        cases.append(Case("data-dirs", ["train", str(g["spec"]), "--data", str(d), "--out", str(root / "dr" / name),
                                        "--procs", "1", "--set", "train.steps=3"], "cli", timeout=90, note=name,
                          bad_value=True))
    txt = root / "prep"
    txt.mkdir(exist_ok=True)
    (txt / "one.src").write_text("a\n")
    (txt / "one.tgt").write_text("b\n")
    (txt / "long.src").write_text(" ".join(["w"] * 2000) + "\n")
    (txt / "long.tgt").write_text(" ".join(["w"] * 2000) + "\n")
    (txt / "uneven.src").write_text("a\nb\n")
    (txt / "uneven.tgt").write_text("a\n")
    (txt / "bin.src").write_bytes(bytes(range(256)) * 10)
    (txt / "bin.tgt").write_bytes(bytes(range(256)) * 10)
    (txt / "e.src").write_text("")
    (txt / "e.tgt").write_text("")
    (txt / "bad.tsv").write_text("no tab here\n")
    (txt / "gz.src.gz").write_bytes(b"not gzip")
    (txt / "gz.tgt.gz").write_bytes(b"not gzip")
    for prefix, bad in (("one", False), ("long", True), ("uneven", True), ("bin", False), ("e", True),
                        ("bad.tsv", True), ("gz", True), ("missing", True)):
        argv = ["data", "prepare", "--train", str(txt / prefix), "--out", str(root / "prep_out" / prefix),
                "--vocab-size", "16", "--max-len", "50"]
        cases.append(Case("data-dirs", argv, "cli", timeout=60, bad_value=bad, note=f"prepare {prefix}"))
    return cases


def _train(g: Files, root: Path, *extra: str, name: str) -> list[str]:
    return ["train", str(g["spec"]), "--data", str(g["data"]), "--out", str(root / "opt_runs" / name), *extra]


def options(root: Path, f: Files, g: Files) -> list[Case]:
    bad: list[tuple[list[str], str]] = []
    for opt, values in (("--log-every", ["0", "-1"]), ("--max-tokens-per-gpu", ["0", "-1"]), ("--stop-at", ["0", "-1"]),
                        ("--time-limit", ["0", "-1", "nan", "inf", "-inf"]), ("--procs", ["0", "-1"]),
                        ("--gpus", ["0", "-1", "1"]), ("--nnodes", ["0", "-1"]), ("--node-rank", ["-1", "5"])):
        for v in values:
            bad.append((_train(g, root, "--procs", "1", opt, v, name=f"{opt}{v}") if opt not in ("--procs", "--gpus")
                        else _train(g, root, opt, v, name=f"{opt}{v}"), "cli" if opt not in ("--nnodes", "--node-rank")
                        else "dist"))
    dec = ["translate", str(g["ckpt"]), "--input", str(g["src"]), "--device", "cpu"]
    for opt, values in (("--beam", ["0", "-1"]), ("--alpha", ["nan", "inf", "-1", "-inf"]), ("--nbest", ["0", "-1"]),
                        ("--batch-tokens", ["0", "-1"])):
        bad += [(dec + [opt, v], "cli") for v in values]
    bad += [(dec[:-1] + [v], "cli") for v in ("foo", "cuda", "cuda:99", "", "cpu:-1", "meta")]
    out = str(root / "opt_out")
    for opt, values in (("--pairs", ["0", "-1"]), ("--held-out", ["-1"]), ("--vocab-size", ["0", "-1", "3"])):
        bad += [(["data", "sample", "--out", f"{out}/s{opt}{v}", opt, v], "cli") for v in values]
    prep = ["data", "prepare", "--train", str(g["data"] / "text/train"), "--valid", str(g["data"] / "text/valid")]
    for opt, values in (("--max-len", ["0", "-1"]), ("--character-coverage", ["nan", "-1", "2", "0"]),
                        ("--src-vocab-size", ["0", "-1"]), ("--vocab-size", ["-1", "7"])):
        bad += [(prep + ["--out", f"{out}/p{opt}{v}", "--vocab-size", "64", opt, v, "--separate-vocab"], "cli")
                for v in values]
    bad += [(["demo", "--out", f"{out}/demo{v}", "--procs", v], "cli") for v in ("0", "-1")]
    bad += [(["build", str(g["spec"]), "--no-write", "--passes", "nonsense"], "front"),
            (["build", str(g["spec"]), "--emit", "fx", "--entry", "nonsense"], "front"),
            (["build", str(g["spec"]), "--no-write", "--passes", ",,,"], "front")]
    cases = [Case("options", argv, owner, timeout=120, bad_value=True) for argv, owner in bad]
    for argv in (["train", "--data"], ["translate"], ["data"], ["nonsense"], ["--help-me"], ["check"],
                 ["train", str(g["spec"]), "--data", str(g["data"]), "--procs", "x"], ["eval", str(g["ckpt"])],
                 ["eval", str(g["ckpt"]), "--sacrebleu-test", "wmt14"], ["translate", str(g["ckpt"]), "--beam", "1e9"]):
        cases.append(Case("options", argv, "cli", timeout=30, bad_value=True, note="usage"))
    return cases


def outputs(root: Path, f: Files, g: Files) -> list[Case]:
    cases = []
    # not a FIFO: writing to one waits for its reader, as it should (`--output >(gzip > x.gz)`)
    for key in ("deep_missing", "under_file", "a_file", "dir", "dev_null", "dev_zero", "broken_link"):
        p = str(f[key])
        for argv, owner in ((["train", str(g["spec"]), "--data", str(g["data"]), "--out", p, "--procs", "1"], "cli"),
                            (["build", str(g["spec"]), "-o", p], "cli"),
                            (["translate", str(g["ckpt"]), "--input", str(g["src"]), "--output", p, "--device", "cpu"],
                             "cli"),
                            (["eval", str(g["ckpt"]), "--src", str(g["src"]), "--ref", str(g["ref"]), "--output", p,
                              "--device", "cpu"], "cli"),
                            (["average", str(g["ckpt"]), "-o", p], "cli"),
                            (["data", "sample", "--out", p, "--pairs", "50", "--held-out", "5"], "cli")):
            # an existing file is a fine output for commands that write a file (they replace it atomically),
            # an existing directory for those that fill one (train, build); anything else must be refused
            writes_file, fills_dir = argv[0] in ("translate", "eval", "average"), argv[0] in ("train", "build")
            bad = key == "under_file" or (key == "a_file" and not writes_file) or (key == "dir" and not fills_dir) \
                or (key == "dev_zero" and argv[0] not in ("translate", "eval"))
            cases.append(Case("outputs", argv, owner, timeout=120, bad_value=bad, note=key))
    return cases


def _decode_limit(path: Path) -> float:
    """Seconds a decoding case may take: 90, and 2 more per line to translate. Each line is real work:
    the corpus's checkpoint (one update) never says </s>, so every line runs to the output bound (the
    spec's `src + 10` of a source cut to 256 tokens); garbage.bin's 77 lines of 256 tokens took about
    1 s each on the shared 2-core machine (load 10), so a flat 90 s judged the machine, not a hang."""
    try:
        lines = sum(1 for line in path.read_bytes().split(b"\n") if line.strip()) if path.is_file() else 0
    except OSError:
        lines = 0
    return 90.0 + 2.0 * lines


def inputs(root: Path, f: Files, g: Files) -> list[Case]:
    d = root / "inputs"
    d.mkdir(exist_ok=True)
    (d / "long_line.txt").write_text("a " * 200000 + "\n")
    (d / "nul.txt").write_bytes(b"hello\x00world\n\x00\n")
    (d / "many_empty.txt").write_text("\n" * 50)
    (d / "cr.txt").write_text("a\rb\rc\r")
    cases = []
    for key, path in {**{k: f[k] for k in ("garbage", "empty", "dir", "missing", "nul", "latin1")},
                      **{p.stem: p for p in sorted(d.glob("*.txt"))}}.items():
        limit = _decode_limit(path)
        cases.append(Case("inputs", ["translate", str(g["ckpt"]), "--input", str(path), "--device", "cpu"], "cli",
                          timeout=limit, note=key))
        cases.append(Case("inputs", ["eval", str(g["ckpt"]), "--src", str(path), "--ref", str(path), "--device", "cpu"],
                          "cli", timeout=limit, note=key))
        cases.append(Case("inputs", ["translate", str(g["ckpt"]), "--device", "cpu"], "cli", timeout=limit,
                          stdin=path if path.is_file() else None, note=f"stdin {key}"))
    cases.append(Case("inputs", ["eval", str(g["ckpt"]), "--src", str(f["empty"]), "--ref", str(f["empty"]),
                                 "--device", "cpu"], "cli", bad_value=True, note="eval on empty files"))
    return cases


def workers(root: Path, f: Files, g: Files) -> list[Case]:
    cases = []
    long = ["--set", "train.steps=400", "--set", "train.checkpoint.every=100"]
    for name, which in (("SIGSTOP", -1), ("SIGKILL", -1), ("SIGKILL", 0), ("SIGTERM", -1)):
        if True:
            # --timeout 20: a frozen worker ends the run within --timeout + about 3 s (docs/training.md)
            argv = _train(g, root, "--procs", "2", *long, "--timeout", "20", name=f"sig_{name}_{which}")
            cases.append(Case("workers", argv, "dist", timeout=150, poke=Poke(12.0, getattr(signal, name), which),
                              note=f"{name} to worker {which}"))
    for extra in (["--nnodes", "2", "--rdzv-endpoint", "nonsense"], ["--nnodes", "2", "--rdzv-endpoint", "host:port"],
                  ["--nnodes", "2", "--rdzv-endpoint", "localhost:99999"], ["--nnodes", "2"],
                  ["--nnodes", "2", "--rdzv-endpoint", "[::1"], ["--rdzv-endpoint", ":"]):
        cases.append(Case("workers", _train(g, root, "--procs", "1", *extra, name="nn"), "dist", timeout=60,
                          bad_value=True, note="multi-node options"))
    return cases


from bench.hostile_imports import imports  # noqa: E402 - issue 23's categories, in files of their own
from bench.hostile_hardening import hardening  # noqa: E402 - issue 43's categories
from bench.hostile_normalizers import normalizers  # noqa: E402 - issue 42's normalisers
from bench.hostile_special import special_ids  # noqa: E402
from bench.hostile_sharing import sharing  # noqa: E402 - issue 42's sharing across layers
from bench.hostile_surfaces import SURFACES  # noqa: E402
from bench.hostile_prefix import prefix_lm  # noqa: E402 - issue 42's prefix-LM category
from bench.hostile_pictures import pictures  # noqa: E402 - issue 43's draw, plot and page
from bench.hostile_factory import factory  # noqa: E402 - issue 43's model factories and recipes
from bench.hostile_float8 import float8  # noqa: E402 - issue 45's train.precision = float8

ALL = [spec_files, extends, spec_text, codegen, checkpoints, run_dirs, data_dirs, options, outputs, inputs, workers,
       *SURFACES, imports, special_ids, hardening, prefix_lm, sharing, normalizers,
       pictures, factory, float8]
