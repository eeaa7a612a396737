"""The suite's guard on signal handling (tests/conftest.py, issue 23): a test that leaves a signal's handler or
the signal mask other than it found them fails in its teardown, naming what changed, and the next test starts
with them restored. Run in a pytest of its own (in a child process), on a file of tests that misbehave."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT

MISBEHAVING = '''
import signal


def test_leaves_sigint_ignored():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_then_sigint_is_a_keyboard_interrupt_again():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_leaves_a_sigterm_handler():
    signal.signal(signal.SIGTERM, lambda *_: None)


def test_leaves_sigint_blocked():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def test_puts_back_what_it_changes():
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, previous)


def test_then_all_is_as_at_the_start():
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, ())
'''


@pytest.mark.slow  # a pytest in a subprocess
def test_a_test_that_leaves_signal_handling_changed_fails_and_the_next_starts_clean(tmp_path):
    (tmp_path / "test_misbehaving.py").write_text(MISBEHAVING)
    # the suite's conftest as a plugin, in a directory of its own (no xdist, no addopts from pyproject.toml);
    # SIGINT at its default as a terminal gives it, whatever started this suite (a background job ignores it)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
                             "-p", "no:warnings", "-q", "-rE", "--tb=no", "test_misbehaving.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"})  # summary lines whole
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "6 passed, 3 errors" in out, out
    left = "AssertionError: the test left the process's signal handling changed (it is restored now): "
    assert f"ERROR test_misbehaving.py::test_leaves_sigint_ignored - {left}SIGINT: default_int_handler -> SIG_IGN\n" \
        in out, out
    assert f"ERROR test_misbehaving.py::test_leaves_a_sigterm_handler - {left}SIGTERM: SIG_DFL -> " \
           "test_leaves_a_sigterm_handler.<locals>.<lambda>\n" in out, out
    assert f"ERROR test_misbehaving.py::test_leaves_sigint_blocked - {left}blocked signals: [] -> ['SIGINT']\n" \
        in out, out
