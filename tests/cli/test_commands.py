"""The command table of cli/main.py: each command is registered by the module it names, and a command
imports only its own module (so `attncomp data ...` starts without torch)."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

from attncomp.cli import main


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
