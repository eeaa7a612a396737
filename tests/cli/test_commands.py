"""The command table of cli/main.py: each command is registered by the module it names, and a command
imports only its own module (so `attncomp data ...` starts without torch)."""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attncomp import ir
from attncomp.cli import familiar, main
from tests.conftest import ROOT


def test_each_module_registers_the_commands_the_table_gives_it():
    for module, commands in main.COMMANDS:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(sub)
        assert tuple(sub.choices) == commands, module


def test_the_full_parser_has_every_command_once():
    names = [name for _, commands in main.COMMANDS for name in commands]
    parser = main._parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(sub.choices) == sorted(names) and len(set(names)) == len(names)


def test_data_prepare_starts_without_importing_torch(tmp_path):
    code = ("import sys\nfrom attncomp.cli.main import run\n"
            f"code = run(['data', 'prepare', '--train', {str(tmp_path / 'none')!r}, '--src', 'en', '--tgt', 'de', "
            f"'--out', {str(tmp_path / 'out')!r}])\n"
            "print(code, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "False"], done.stdout + done.stderr
    assert "no " in done.stderr and "none.en" in done.stderr


def test_version_names_attncomp_torch_and_python_without_importing_torch():
    import attncomp

    code = ("import sys\nfrom attncomp.cli.main import run\n"
            "try:\n    run(['--version'])\nexcept SystemExit as e:\n    print('exit', e.code, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    first, last = done.stdout.splitlines()[0], done.stdout.splitlines()[-1]
    assert last == "exit 0 False", done.stdout + done.stderr
    assert first.startswith(f"attncomp {attncomp.__version__} (torch ") and f"python {sys.version.split()[0]})" in first
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    project = pyproject.split("[project]\n")[1].split("\n[")[0]
    assert 'dynamic = ["version"]' in project and "\nversion = " not in project  # one place: attncomp.__version__
    assert 'version = { attr = "attncomp.__version__" }' in pyproject
def test_a_flag_of_another_toolkit_is_told_its_spelling(capsys):
    """fairseq's --lr and --max_update: the train command's usage error, with how attncomp says each."""
    with pytest.raises(SystemExit) as stop:
        main.run(["train", "x.attn", "--data", "d", "--lr", "1e-3", "--max_update", "10", "--wat"])
    assert stop.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("attncomp train: error: unrecognized arguments: --lr 1e-3 --max_update 10 --wat; ")
    assert 'attncomp spells --lr as --set "train.schedule=constant(lr = LR)"' in line
    assert "attncomp spells --max-update as --set train.steps=N" in line and "--wat as" not in line


def _options() -> set[str]:
    """Every option of every command and sub-command."""
    found, todo = set(), [main._parser()]
    while todo:
        parser = todo.pop()
        for action in parser._actions:
            found.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


@pytest.mark.parametrize("flag", sorted(familiar.FLAGS))
def test_each_spelling_given_for_a_familiar_flag_is_attncomps(flag):
    """Its --set is a key the language takes (placeholders filled in) and every other flag it names exists."""
    how = familiar.FLAGS[flag]
    values = {"LR": "1e-3", "N": "50", "C": "1.0", "W": "0.01", "E": "0.1"}
    filled = re.sub(r"\b(LR|N|C|W|E)\b", lambda m: values[m.group()], how)
    for override in re.findall(r'--set "([^"]+)"|--set (\S+)', filled):
        ir.load(ROOT / "specs" / "examples" / "tiny.attn", [override[0] or override[1]])
    named = set(re.findall(r"--[a-z][a-z-]*", how)) - {"--set"}
    assert named <= _options(), named - _options()


@pytest.mark.parametrize("word, said", [("trian", '(did you mean "train"?)'),
                                        ("compile", '(attncomp calls it "build")'),
                                        ("preprocess", '(attncomp calls it "data prepare")')])
def test_an_unknown_command_is_told_the_one_meant(word, said, capsys):
    with pytest.raises(SystemExit) as stop:
        main.run([word, "x.attn"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2 and line.startswith(f'attncomp: error: unknown command "{word}" {said}; commands: ')
