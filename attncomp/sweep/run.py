"""Train and score every row of a sweep, resumably, one after another or several at once.

Training goes through `attncomp train` itself (the same command line a person would type, with
--resume, so a row stopped mid-way continues from its newest checkpoint); the caller supplies how to
run it (in this process, or as a child process when rows run in parallel). Each finished row is
scored on the validation split (attncomp.sweep.evaluate) and the table is rewritten at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from attncomp import ir
from attncomp.data.dataset import PreparedData
from attncomp.errors import TrainingError, UsageError, printable
from attncomp.ir import nodes
from attncomp.lower.size import refuse_if_too_large
from attncomp.sweep.state import Options, SweepState, check_row_name
from attncomp.sweep.table import hyperparameters, paper_figures, write_tables

TrainFn = Callable[[list[str], Path | None], int]  # (train argv, log file or None) -> exit code


@dataclass
class Planned:
    name: str
    path: str
    spec: nodes.Spec


def row_overrides(options: Options) -> list[str]:
    return [*options.overrides, *([f"train.steps={options.steps}"] if options.steps is not None else [])]


def plan(paths: list[str], options: Options) -> list[Planned]:
    """Every spec resolved with the sweep's options and checked against the data, before anything trains."""
    from attncomp.train.runner import check_vocab

    if not paths:
        raise UsageError("no specs to sweep")
    data = PreparedData(options.data)
    planned: dict[str, Planned] = {}
    for path in paths:
        name = Path(path).stem
        try:
            check_row_name(name)
        except ValueError as err:
            raise UsageError(f"{printable(path)}: {err}; a sweep names its rows after their files") from None
        if name in planned:
            raise UsageError(f"two specs are both named {name} ({planned[name].path} and {path}); "
                             "a sweep names its rows after their files")
        spec = ir.load(path, row_overrides(options))
        refuse_if_too_large(spec, printable(path), remedy="a sweep trains only specs within it")
        check_vocab(data, spec.model)
        planned[name] = Planned(name, path, spec)
    return list(planned.values())


def train_argv(row: Planned, options: Options, run_dir: Path) -> list[str]:
    argv = ["train", row.path, "--data", options.data, "--out", str(run_dir), "--resume"]  # one GPU, or one CPU worker
    for override in row_overrides(options):
        argv += ["--set", override]
    if options.minutes is not None:
        argv += ["--time-limit", f"{options.minutes:g}"]
    return argv


class ChildTrainer:
    """Runs `attncomp train` as child processes with `threads` CPU threads each, output to log files;
    `terminate()` ends those still running (the sweep was stopped)."""

    def __init__(self, threads: int):
        self.env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        self.children: set[subprocess.Popen] = set()

    def __call__(self, argv: list[str], log: Path | None) -> int:
        assert log is not None
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as sink:
            child = subprocess.Popen([sys.executable, "-m", "attncomp.cli.main", *argv], stdout=sink,
                                     stderr=subprocess.STDOUT, env=self.env)
            self.children.add(child)
            try:
                return child.wait()
            finally:
                self.children.discard(child)

    def terminate(self) -> None:
        for child in list(self.children):
            child.terminate()  # the runner keeps its last complete checkpoint


def _failed(name: str, code: int, log: Path | None) -> TrainingError:
    if code == 130:
        raise KeyboardInterrupt
    where = f"; its log: {log}" if log else ""
    return TrainingError(f"training row {name} failed (exit code {code}){where}; finished rows are kept: "
                         "run the same sweep again to resume")


def _train_all(todo: list[Planned], state: SweepState, train: TrainFn, parallel: int) -> Iterator[tuple[str, float]]:
    """Train the rows, yielding (name, seconds) as each finishes; the first failure stops the sweep."""
    argvs = {r.name: train_argv(r, state.options, state.run_dir(r.name)) for r in todo}
    logs = {r.name: (state.run_dir(r.name) / "train.log" if parallel > 1 else None) for r in todo}

    def timed(argv: list[str], log: Path | None) -> tuple[int, float]:
        started = time.monotonic()
        return train(argv, log), time.monotonic() - started

    if parallel == 1:
        for r in todo:
            code, seconds = timed(argvs[r.name], None)
            if code:
                raise _failed(r.name, code, None)
            yield r.name, seconds
        return
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        pending = {pool.submit(timed, argvs[r.name], logs[r.name]): r.name for r in todo}
        try:
            while pending:
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for future in done:
                    name = pending.pop(future)
                    code, seconds = future.result()
                    if code:
                        raise _failed(name, code, logs[name])
                    yield name, seconds
        except BaseException:  # a failed row, Ctrl-C, SIGTERM: queued rows never start, running ones end
            for future in pending:
                future.cancel()
            getattr(train, "terminate", lambda: None)()
            raise


def score_row(state: SweepState, row: Planned, seconds: float | None) -> dict:
    from attncomp.loading import load_checkpoint
    from attncomp.sweep.evaluate import evaluate
    from attncomp import checkpoint as ckpt

    path = state.run_dir(row.name) / ckpt.AVERAGE
    if not path.exists():
        raise TrainingError(f"row {row.name} finished training without {path}; run the sweep again to resume")
    model, found = load_checkpoint(path, device="cpu")
    measured = evaluate(model, PreparedData(state.options.data), state.options.bleu_sentences)
    params = sum(p.numel() for p in model.parameters())
    return {**hyperparameters(row.spec), "params_m": round(params / 1e6, 3), "steps": found.header.step,
            "train_minutes": None if seconds is None else round(seconds / 60, 2), **measured,
            **paper_figures(row.path), "spec_hash": ir.spec_hash(row.spec)}


def run_sweep(state: SweepState, rows: list[Planned], train: TrainFn, parallel: int = 1,
              say: Callable[[str], None] = print) -> SweepState:
    """Train and score every row not finished yet; the state and the table are saved after each."""
    for r in rows:
        state.add(r.name, r.path, ir.spec_hash(r.spec))
    state.save()
    write_tables(state)
    todo = [r for r in rows if state.rows[r.name].result is None]
    if len(todo) < len(rows):
        say(f"sweep: {len(rows) - len(todo)} of {len(rows)} row(s) already finished in {state.out}")
    by_name = {r.name: r for r in todo}
    untrained = [r for r in todo if not state.rows[r.name].trained]
    for r in todo:
        if state.rows[r.name].trained:  # trained before the sweep stopped, not scored yet
            _finish(state, r, None, say)
    for name, seconds in _train_all(untrained, state, train, parallel):
        state.rows[name].trained = True
        state.save()
        _finish(state, by_name[name], seconds, say)
    return state


def _finish(state: SweepState, row: Planned, seconds: float | None, say: Callable[[str], None]) -> None:
    result = score_row(state, row, seconds)
    state.rows[row.name].result = result
    state.save()
    write_tables(state)
    bleu = f", BLEU {result['bleu']:.2f}" if "bleu" in result else ""
    say(f"sweep: {row.name}: {result['steps']} steps, valid PPL {result['ppl']:.2f}{bleu}")
