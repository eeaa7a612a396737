"""Shared test helpers: golden files, the repository root, CPU-only defaults."""

from __future__ import annotations

import _signal
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").rglob("*.attn"))
UPDATE = os.environ.get("ATTNCOMP_UPDATE_GOLDEN") == "1"

# Threads per test process: the cores shared among pytest-xdist's workers (one each for `-n 2` on two cores, two
# for `-n 0`). Under xdist, OMP_NUM_THREADS carries the count to the commands and training workers the tests
# start (without it a one-process training takes two). Two processes of two OpenMP threads on two cores spin
# against each other: two tiny trainings side by side took 378 and 500 s on two threads each against 60 and 102 s
# on one (60 steps of specs/examples/tiny.attn, this machine under other work, load average 6-8, 2026-11-28); with
# the load at 2-3, test_ctranslate2.py beside test_checkpoint_sharded.py under `-n 2` took 110 s before, 101 s after.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
THREADS = max(1, min(2, (os.cpu_count() or 1) // WORKERS))
if WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
torch.set_num_threads(THREADS)


def spec_id(path: Path) -> str:
    return str(path.relative_to(ROOT / "specs").with_suffix(""))


def check_golden(path: Path, actual: str) -> None:
    """Compare `actual` with the golden file; ATTNCOMP_UPDATE_GOLDEN=1 rewrites it instead."""
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"missing golden file {path}; run with ATTNCOMP_UPDATE_GOLDEN=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{path} differs (ATTNCOMP_UPDATE_GOLDEN=1 rewrites it after review)"


# Files whose tests train, launch workers or run whole commands in subprocesses (seconds to minutes
# each): the `slow` tier. `pytest -m "not slow"` is the edit loop's fast tier; CI runs everything.
SLOW_FILES = {
    "tests/train/test_runner.py", "tests/train/test_runner_workers.py",
    "tests/train/test_distributed.py", "tests/train/test_checkpoint_sharded.py",
    "tests/train/test_checkpoint_average.py", "tests/train/test_choices_train.py", "tests/train/test_objectives.py",
    "tests/train/test_compile_dynamic.py", "tests/train/test_validation.py", "tests/sweep/test_sweep.py",
    "tests/hostile/test_property.py", "tests/hostile/test_property_readers.py",
    "tests/hostile/test_interrupts.py", "tests/hostile/test_workers.py",
    "tests/hostile/test_checkpoints.py", "tests/hostile/test_cli_values.py", "tests/hostile/test_state_files.py",
    "tests/hostile/test_sharded.py", "tests/hostile/test_exports.py", "tests/hostile/test_leftovers.py",
    "tests/hostile/test_sweep.py", "tests/hostile/test_decode_options.py", "tests/interop/test_ctranslate2.py",
    "tests/interop/test_marian_import.py", "tests/interop/test_torch_export.py", "tests/decode/test_translate.py",
    "tests/decode/test_stream.py", "tests/test_legacy.py", "tests/data/test_streaming.py",
    "tests/train/test_job_example.py", "tests/draw/test_draw_every_spec.py", "tests/draw/test_page.py",
    "tests/train/test_prefix_lm_objective.py", "tests/train/test_factory.py", "tests/train/test_factory_example.py",
    "tests/hostile/test_pictures.py",
}


# Tests run once per shipped spec: the paper's size variants of base (big and Table 3's rows: the same
# layers at other sizes) go to the slow tier; base and every spec with a layer of its own stay fast.
SIZE_VARIANT = re.compile(r"\[(big\b|table3/|table3-small/)")


def examples(n: int) -> int:
    """Hypothesis examples for a property test: n, or a quarter of it in the fast tier (`-m "not slow"`)."""
    return max(10, n // 4) if os.environ.get("ATTNCOMP_FAST_TIER") == "1" else n


# The files that take longest, longest first (seconds in the idle full run of 2026-11-28, `--durations=60`,
# each file's listed tests added up). Under pytest-xdist a file runs on one worker, and files are handed out in
# the order collected: these go first, and the rest by their number of tests (what xdist's own reordering does,
# off in pyproject's addopts since it handed out these few-test files last, so that one worker ran a minutes-long
# file while the other idled). test_ctranslate2 pays for the shared trained_tiny fixture, which test_runner and
# test_runner_workers then find made.
HEAVY_FIRST = (
    "tests/train/test_distributed.py",  # 205 s
    "tests/interop/test_ctranslate2.py",  # 162 s
    "tests/train/test_runner.py",  # 150 s
    "tests/train/test_runner_workers.py",  # 116 s
    "tests/hostile/test_property_readers.py",  # 87 s
    "tests/sweep/test_sweep.py",  # 75 s
    "tests/train/test_factory.py",  # 67 s
    "tests/hostile/test_interrupts.py",  # 56 s
    "tests/bench/test_quality_smoke.py",  # 55 s
    "tests/train/test_checkpoint_sharded.py",  # 48 s
    "tests/hostile/test_workers.py",  # 44 s
    "tests/lower/test_attention_parts.py",  # 26 s
    "tests/hostile/test_property.py",  # 26 s
)


class _HeavyFirst:
    @pytest.hookimpl(trylast=True)  # after `-m` and `-k` have deselected
    def pytest_collection_modifyitems(self, items):
        files = [item.nodeid.split("::")[0] for item in items]
        count = {name: files.count(name) for name in set(files)}
        first = {name: rank for rank, name in enumerate(HEAVY_FIRST)}
        order = sorted(range(len(items)), key=lambda i: (first.get(files[i], len(first)), -count[files[i]], i))
        items[:] = [items[i] for i in order]


def pytest_configure(config):
    if "not slow" in (config.option.markexpr or ""):
        os.environ["ATTNCOMP_FAST_TIER"] = "1"  # read by examples() as the test modules are imported
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers collect; the order they agree on is the one handed out
        config.pluginmanager.register(_HeavyFirst(), "attncomp-heavy-first")


def pytest_collection_modifyitems(config, items):
    slow = pytest.mark.slow
    for item in items:
        if item.nodeid.split("::")[0] in SLOW_FILES or item.nodeid.startswith("tests/bench/") \
                or SIZE_VARIANT.search(item.nodeid):
            item.add_marker(slow)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# Signal handlers and the signal mask are the process's, and a test must leave them as it found them: a library
# call that left SIGINT ignored in a pytest worker would make every later child of that worker ignore Ctrl-C, and
# a researcher's notebook unable to stop (issue 23). Checked from each test's setup to its teardown (its fixtures,
# of any scope, included) with _signal's raw getters: about 20 µs a test (signal.getsignal's enums cost 20 times
# that). A test that changes them fails in its teardown, and they are put back, so that the next one starts clean.
_SIGNALS = tuple(sorted(int(s) for s in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}))
_SIGNAL_STATE = pytest.StashKey[tuple]()


def _signal_state() -> tuple[tuple, frozenset]:
    return tuple(_signal.getsignal(s) for s in _SIGNALS), frozenset(_signal.pthread_sigmask(_signal.SIG_BLOCK, ()))


def _handler_name(handler) -> str:
    if handler in (0, 1):
        return ("SIG_DFL", "SIG_IGN")[handler]
    return "set outside Python" if handler is None else getattr(handler, "__qualname__", repr(handler))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_SIGNAL_STATE] = _signal_state()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        before = item.stash.get(_SIGNAL_STATE, None)
        if before is not None and _signal_state() != before:
            _signals_restored(*before)


def _names(signals: frozenset) -> list[str]:
    return sorted(signal.Signals(s).name for s in signals)


def _signals_restored(handlers: tuple, mask: frozenset) -> None:
    changed = []
    for signum, handler in zip(_SIGNALS, handlers):
        now = _signal.getsignal(signum)
        if now != handler:
            changed.append(f"{signal.Signals(signum).name}: {_handler_name(handler)} -> {_handler_name(now)}")
            if handler is not None:
                signal.signal(signum, handler)
    now_mask = frozenset(_signal.pthread_sigmask(_signal.SIG_SETMASK, mask))
    if now_mask != mask:
        changed.append(f"blocked signals: {_names(mask)} -> {_names(now_mask)}")
    raise AssertionError("the test left the process's signal handling changed (it is restored now): "
                         + "; ".join(changed))


def shared_once(tmp_path_factory, name: str, make) -> Path:
    """A directory made once for the whole run: with pytest-xdist, every worker gets the one the first
    worker to ask made (under a file lock), rather than each making its own."""
    from filelock import FileLock  # a dependency of torch

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    out, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)
            make(out)
            done.touch()
    return out


@pytest.fixture(scope="session")
def sample_data(tmp_path_factory):
    """A small prepared sample corpus (3000 training pairs), shared by the runtime tests."""
    from attncomp.cli.main import run

    def make(out):
        assert run(["data", "sample", "--out", str(out), "--pairs", "3000", "--held-out", "200"]) == 0

    return shared_once(tmp_path_factory, "sample", make)


@pytest.fixture(scope="session")
def straight_tiny(sample_data, tmp_path_factory):
    """specs/examples/tiny.attn, 12 updates on one worker with a checkpoint every 4 (tests/train/test_runner.py's
    SHORT), never interrupted: the run that stopped, resumed and restarted runs equal bit for bit; read-only.
    Shared by test_runner.py and test_distributed.py, which each trained it: under xdist every worker runs torch
    on OMP_NUM_THREADS=1 (above), so a run trained under the other worker has the same bits (with the count left
    to the first training a worker launched, one worker's runs took two threads and the other's one, 1.2e-7 apart)."""
    from attncomp.cli.main import run

    def make(out):
        assert run(["train", str(ROOT / "specs/examples/tiny.attn"), "--data", str(sample_data), "--out", str(out),
                    "--procs", "1", "--set", "train.steps=12", "--set", "train.checkpoint.every=4",
                    "--set", "train.batch=tokens(600)"]) == 0

    return shared_once(tmp_path_factory, "straight-tiny", make)


@pytest.fixture(scope="session")
def trained_tiny(sample_data, tmp_path_factory):
    """specs/examples/tiny.attn trained 300 steps on the sample corpus (checkpoint directory); read-only."""
    from attncomp.cli.main import run

    def make(out):
        start = time.monotonic()
        code = run(["train", str(ROOT / "specs/examples/tiny.attn"), "--data", str(sample_data), "--out", str(out),
                    "--procs", "1", "--set", "train.steps=300", "--set", "train.checkpoint.every=150"])
        assert code == 0
        (out.parent / "trained-tiny.seconds").write_text(f"{time.monotonic() - start:.1f}")  # the run alone

    return shared_once(tmp_path_factory, "trained-tiny", make)
