"""Every sub-command of `attncomp`, with generated hostile arguments and files: no traceback, no hang.

The commands and their options come from the argparse parser of attncomp/cli/main.py, so a new command
or option is attacked without a change here. Each example is a command line of real option names with
hostile values (0, -1, huge, nan, inf, empty, missing paths, directories, FIFOs, /dev/zero, NUL bytes,
binary garbage, a 200 MB file, odd file names, output paths under a missing folder or a file; directories
of the later surfaces: a sharded checkpoint whose index carries a payload, exports holding a FIFO or an
empty tokenizer, a torch.export directory, a sweep whose state escapes, a run whose run.json is nested
past the parser) mixed with good ones (a valid spec, data directory and checkpoint, so that commands get past their first argument).
It runs through `attncomp.cli.main.run(argv)` in a sandboxed child (bench/hostile.py) with a time limit.

Asserted for every example: no exception escapes and no traceback is printed; no internal error (exit
70 is a bug, not a pass); no payload ran; the exit code is 0, 1 or 2; a failure says one `error: ...` line (a located
spec error may add its source line, caret and hint); the call ends within its time limit.

ATTNCOMP_HOSTILE_EXAMPLES=N runs N examples per command (default 4; train and demo half as many);
ATTNCOMP_HOSTILE_SEED=S draws other examples than the fixed default set.
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from attncomp.cli.main import _parser
from bench.hostile_corpus import ROOT, copy_run, hostile_files, odd_named_specs, tiny_spec_text

EXAMPLES = int(os.environ.get("ATTNCOMP_HOSTILE_EXAMPLES", "4"))
FEWER = {"train": 2, "demo": 2}  # examples of the commands whose valid runs take seconds (a factor of EXAMPLES / 4)
SEED = os.environ.get("ATTNCOMP_HOSTILE_SEED")
HOSTILE_INTS = ["0", "-1", "1", "2", str(2**63), "9" * 30, "nan", "inf", "", "1e3", "0x10", "abc", " 3"]
HOSTILE_FLOATS = ["0", "-1", "0.5", "1", "nan", "inf", "-inf", "1e309", "-0", "", "abc"]
SMALL_INTS = ["0", "-1", "1", "2", "", "abc", "nan"]  # options whose large values mean real work or processes
HOSTILE_STRINGS = ["", "-", " ", "\n", "x" * 2000, "a=b", "\u2028", "cpu", "cuda", "foo", "cuda:99", "en-de",
                   "'\"", "%s%n", "../../etc/passwd"]
SETS = ["train.steps=1", "model.heads=0", "model.heads=nan", "model.heads=", "=1", "model=", "no.such.key=1",
        "model.d_model=1e999", "train.steps=-5", "model.heads", "model.vocab=shared(0)", "model.heads=1\n2"]
PATHS = ["missing", "dev_zero", "dev_null", "dir", "fifo", "nul", "garbage", "huge", "empty", "zero_link",
         "broken_link", "loop_link", "long", "unreadable", "latin1", "a_file", "deep_missing", "under_file",
         "odd_newline", "odd_quotes", "odd_coding", "odd_u2028", "odd_spaces", "odd_dash",
         "sharded_payload", "export_fifo", "export_empty_model", "torch_export", "sweep_escape", "run_nested_record"]
GOOD_FOR_METAVAR = {"SPEC": "spec", "SPEC_A": "spec", "SPEC_B": "spec", "CHECKPOINT": "ckpt", "FILE": "src",
                    "DIR": "data", "PREFIX": "prefix"}
# (command, option) pairs whose legitimate large values start real work (processes, corpora): small values only
WORK = {("train", "--procs"), ("train", "--gpus"), ("train", "--nnodes"), ("demo", "--procs"),
        ("data sample", "--pairs"), ("data sample", "--held-out"), ("data sample", "--vocab-size"),
        ("data prepare", "--vocab-size"), ("data prepare", "--src-vocab-size"), ("data prepare", "--tgt-vocab-size"),
        ("sweep", "--steps"), ("sweep", "--parallel"), ("sweep", "--bleu-sentences")}
SWEEP_MINUTES = ["0", "-1", "nan", "inf", "", "abc", "0.005"]  # a real budget trains for that long
# output folders of commands that would otherwise run for minutes: only hostile values (demo: a whole training)
HOSTILE_ONLY = {("demo", "--out"): ["a_file", "under_file", "dev_null", "dev_zero", "fifo"],
                ("eval", "--sacrebleu-test"): None}
TIMEOUT = {"train": 60, "demo": 60, "sweep": 90}
HOSTILE_DIRS = {"sharded_payload", "export_fifo", "export_empty_model", "torch_export", "sweep_escape",
                "run_nested_record"}
OUTPUTS = {"out", "output"}  # the dest of every option naming something a command writes
FRESH = "<a new path>"  # replaced by a path that does not exist yet, one per example, so examples do not interact


def commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of every leaf sub-command: `check`, ..., `data prepare`, `data sample`, ..."""
    found = []

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found.append((" ".join(prefix), parser))
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, prefix + (name,))

    walk(_parser(), ())
    return found


COMMANDS = dict(commands())


def _file(key: str) -> str:
    return f"<file:{key}>"  # a hostile file, made afresh for each example (commands may write over them)


def _values(command: str, action: argparse.Action, good: dict) -> st.SearchStrategy[str]:
    option = action.option_strings[-1] if action.option_strings else action.dest
    if action.dest == "overrides":
        return st.sampled_from(SETS)
    if (command, option) in HOSTILE_ONLY:
        keys = HOSTILE_ONLY[(command, option)]
        return st.sampled_from([_file(k) for k in keys] if keys else ["", "nonsense"])
    if action.choices:
        return st.sampled_from(sorted(action.choices) + ["", "nonsense"])
    if (command, option) == ("sweep", "--minutes"):
        return st.sampled_from(SWEEP_MINUTES)
    if action.type is int:
        return st.sampled_from(SMALL_INTS if (command, option) in WORK else HOSTILE_INTS)
    if action.type is float:
        return st.sampled_from(HOSTILE_FLOATS)
    # a FIFO given as an input or output FILE waits for its other end, as it should (`--input <(zcat x.gz)`)
    paths = [_file(k) for k in PATHS if not (k == "fifo" and action.metavar == "FILE")]
    if action.dest in OUTPUTS:  # never the good artifacts: the examples that follow read them
        return st.one_of(st.sampled_from(paths), st.just(FRESH))
    role = GOOD_FOR_METAVAR.get(action.metavar or "")
    if role:
        return st.one_of(st.sampled_from([str(good[role])] * 3 + paths), st.just(FRESH))
    return st.sampled_from(HOSTILE_STRINGS + paths[:6] + [str(good["spec"]), str(good["data"])])


@st.composite
def command_lines(draw, command: str, good: dict) -> list[str]:
    """A command line of `command`: every positional, a random subset of its options, hostile values."""
    parser = COMMANDS[command]
    argv = command.split()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:
            count = 1 if action.nargs in (None, 1) else draw(st.integers(1, 3))
            argv += [draw(_values(command, action, good)) for _ in range(count)]
            continue
        forced = (command, action.option_strings[-1]) in HOSTILE_ONLY and action.option_strings[-1] == "--out"
        if not (action.required or forced or draw(st.booleans())):
            continue
        name = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            argv.append(name)
            continue
        for _ in range(draw(st.integers(1, 2)) if isinstance(action, argparse._AppendAction) else 1):
            argv += [name, draw(_values(command, action, good))]
    if command == "train":  # one update whatever the spec says; last --set wins
        argv += ["--set", "train.steps=1", "--set", "train.checkpoint.every=1"]
    if command in ("translate", "eval"):  # an untrained model writes to max_len: keep decoding short
        argv += ["--set", "decode.max_len=4"]
    if command == "sweep" and "--steps" not in argv and "--minutes" not in argv:  # a budget of one update
        argv += ["--steps", "1"]
    return argv


class _Payload:
    def __init__(self, canary: Path):
        self.canary = str(canary)

    def __reduce__(self):
        return os.mkdir, (self.canary,)


def hostile_dirs(where: Path, good: dict, names: frozenset | set = frozenset(HOSTILE_DIRS)) -> dict[str, Path]:
    """Directories of issue 23's surfaces (those in `names`), made afresh; unpickling anything in them makes
    where/CANARY. One at a time for tests/hostile/test_property_readers.py, whose commands may write into it."""
    import json
    import pickle
    import shutil

    legacy = ROOT / "tests/fixtures/legacy"
    d = {"sharded_payload": where / "run_s" / "checkpoint_00000002", "export_fifo": where / "export_fifo",
         "export_empty_model": where / "export_empty", "torch_export": where / "torch_export",
         "sweep_escape": where / "sweep", "run_nested_record": where / "run_r"}
    d = {name: path for name, path in d.items() if name in names}
    if "sharded_payload" in d:
        shutil.copytree(legacy / "sharded", d["sharded_payload"])
        index = pickle.loads((legacy / "sharded" / ".metadata").read_bytes())
        index.planner_data["x"] = _Payload(where / "CANARY")
        (d["sharded_payload"] / ".metadata").write_bytes(pickle.dumps(index))
    for key in {"export_fifo", "export_empty_model"} & d.keys():
        shutil.copytree(legacy / "safetensors", d[key])
    if "export_fifo" in d:
        (d["export_fifo"] / "src.model").unlink()
        os.mkfifo(d["export_fifo"] / "src.model")
    if "export_empty_model" in d:
        (d["export_empty_model"] / "tgt.model").write_bytes(b"")
    if "torch_export" in d:
        shutil.copytree(legacy / "torch-export", d["torch_export"])
    if "sweep_escape" in d:
        d["sweep_escape"].mkdir(parents=True)
        (d["sweep_escape"] / "sweep.json").write_text(json.dumps({"format": "attncomp-sweep", "version": 1, "options": {
            "data": str(good["data"]), "steps": 1, "minutes": None, "overrides": [], "bleu_sentences": 0},
            "rows": {"../../../escaped": {"name": "../../../escaped", "spec": "x", "spec_hash": "0" * 64}}}))
    if "run_nested_record" in d:
        copy_run(good, d["run_nested_record"])
        (d["run_nested_record"] / "run.json").write_text("[" * 100_000 + "]" * 100_000)
    return d


def _resolve(argv: list[str], where: Path, good: dict) -> list[str]:
    """Placeholders -> paths: hostile files made afresh under `where`, a new path that does not exist yet."""
    files = hostile_files(where / "files")
    files.update({f"odd_{k}": v for k, v in odd_named_specs(where / "odd", tiny_spec_text()).items()})
    if any(a.startswith("<file:") and a[len("<file:"):-1] in HOSTILE_DIRS for a in argv):
        files.update(hostile_dirs(where / "dirs", good))
    resolved = []
    for a in argv:
        if a == FRESH:
            a = str(where / "new")
        elif a.startswith("<file:"):
            a = str(files[a[len("<file:"):-1]])
        resolved.append(a)
    return resolved


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_survives_hostile_arguments(command, tiny_artifacts, sandbox, tmp_path):
    good = dict(tiny_artifacts, prefix=tiny_artifacts["data"] / "text" / "train")
    seen: list[str] = []

    @settings(max_examples=max(1, FEWER.get(command, 4) * EXAMPLES // 4), deadline=None, database=None, derandomize=SEED is None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(argv=command_lines(command, good))
    def attack(argv: list[str]) -> None:
        where = tmp_path / f"example{len(seen)}"
        argv = _resolve(argv, where, good)
        outcome = sandbox.run(argv, timeout=TIMEOUT.get(command.split()[0], 30), canary=where / "dirs" / "CANARY")
        seen.append(shlex.join(argv))
        problems = outcome.problems(command=command.split()[0])
        assert not problems, f"attncomp {shlex.join(argv)}\n  {'; '.join(problems)}\n  {outcome.summary()}"

    if SEED is not None:
        attack = seed(int(SEED))(attack)
    attack()
    assert len(seen) >= 1


def test_every_command_is_attacked():
    """The parser's leaf commands are what the property test runs; none escapes by being nested."""
    names = set(COMMANDS)
    assert {"check", "show", "diff", "build", "train", "average", "translate", "eval", "demo",
            "data prepare", "data sample", "data info", "consolidate", "export", "import", "sweep"} <= names
    for name, parser in COMMANDS.items():
        assert parser.get_default("handler") is not None, f"{name} has no handler"


def _run_with_handler(monkeypatch, tmp_path, exc: BaseException) -> int:
    """attncomp check X, its handler replaced by one that raises `exc`."""
    from attncomp.cli import main

    monkeypatch.setenv(main.TRACEBACK_DIR_ENV, str(tmp_path))
    real = main._parser

    def parser(argv=()):
        p = real(argv)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                action.choices["check"].set_defaults(handler=lambda args: (_ for _ in ()).throw(exc))
        return p

    monkeypatch.setattr(main, "_parser", parser)
    return main.run(["check", "x.attn"])


def test_a_bug_is_one_line_exit_70_and_its_traceback_goes_to_a_file(monkeypatch, tmp_path, capsys):
    code = _run_with_handler(monkeypatch, tmp_path, ValueError("bad\nthing"))
    err = capsys.readouterr().err
    assert code == 70
    assert err.count("\n") == 1 and err.startswith("internal error: ValueError: bad thing — a bug in attncomp; ")
    assert "Traceback" not in err
    trace = err.strip().rsplit("the traceback is in ", 1)[1]
    assert "Traceback (most recent call last)" in open(trace).read() and "ValueError: bad" in open(trace).read()


def test_attncomp_errors_interrupts_and_usage_errors_keep_their_codes(monkeypatch, tmp_path, capsys):
    from attncomp.cli.main import run
    from attncomp.errors import DataError, SpecError

    assert _run_with_handler(monkeypatch, tmp_path, DataError("no manifest")) == 2
    assert capsys.readouterr().err == "error: no manifest\n"
    assert _run_with_handler(monkeypatch, tmp_path, SpecError("bad key")) == 2
    assert _run_with_handler(monkeypatch, tmp_path, KeyboardInterrupt()) == 130
    assert capsys.readouterr().err.endswith("interrupted\n")
    with pytest.raises(SystemExit) as stop:
        run(["check"])
    assert stop.value.code == 2
    assert not list(tmp_path.iterdir()), "no traceback file for errors that are not bugs"
