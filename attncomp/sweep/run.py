"""Train and score every row of a sweep, resumably, one after another or several at once.

Each row is a training Job (attncomp.train.job) with `resume`, so a row stopped mid-way continues from
its newest checkpoint, trained by `attncomp.train.run`: in this process (rows one after another), or
with --parallel in a child process per row (multiprocessing spawn), whose output goes to the row's log
and whose crash fails that row alone. Each finished row is scored on the validation split
(attncomp.sweep.evaluate) and the table is rewritten at once.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from torch.distributed.elastic.multiprocessing.api import SignalException

from attncomp import checkpoint as ckpt
from attncomp import ir, train
from attncomp.data.dataset import PreparedData
from attncomp.errors import AttncompError, TrainingError, UsageError, printable, printable_lines
from attncomp.ir import nodes
from attncomp.loading import load_checkpoint
from attncomp.lower.size import refuse_if_too_large
from attncomp.sweep.evaluate import evaluate
from attncomp.sweep.state import Options, SweepState, check_row_name
from attncomp.sweep.table import hyperparameters, paper_figures, write_tables
from attncomp.train.config import check_tokenizer, check_vocab

TrainFn = Callable[[train.Job, Path | None], int]  # (the row's job, log file or None) -> exit code
EXIT_INTERNAL = 70  # a row's training raised something other than an AttncompError (a bug)


@dataclass
class Planned:
    name: str
    path: str
    spec: nodes.Spec


def row_overrides(options: Options) -> list[str]:
    return [*options.overrides, *([f"train.steps={options.steps}"] if options.steps is not None else [])]


def plan(paths: list[str], options: Options) -> list[Planned]:
    """Every spec resolved with the sweep's options and checked against the data, before anything trains."""
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
        check_tokenizer(data, spec)  # refused here, once, before any row trains
        planned[name] = Planned(name, path, spec)
    return list(planned.values())


def row_job(row: Planned, options: Options, run_dir: Path) -> train.Job:
    """The row's training: one GPU, or one CPU worker; resumed from its newest checkpoint if it has one."""
    return train.Job(spec=row.path, overrides=tuple(row_overrides(options)),
                     data=train.DataOptions(path=options.data),
                     checkpointing=train.CheckpointOptions(out=str(run_dir), resume=True, time_limit=options.minutes))


def train_in_process(job: train.Job, log: Path | None = None) -> int:
    """`attncomp.train.run(job)` in this process; its messages go to the terminal, an error's line too."""
    try:
        train.run(job)
        return 0
    except AttncompError as err:
        print(printable_lines(err.format()), file=sys.stderr)
        return err.exit_code
    except SignalException as stop:  # the launcher turns SIGINT/SIGTERM into this; the sweep stops cleanly
        return 128 + int(stop.sigval)


def _train_in_child(job_json: str, log: str, threads: int) -> None:
    """A child process's entry: the job trained with `threads` CPU threads, all output to `log`."""
    sink = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(sink, 1)
    os.dup2(sink, 2)  # the training workers inherit both
    os.environ["OMP_NUM_THREADS"] = str(threads)
    code = EXIT_INTERNAL
    try:
        code = train_in_process(train.Job.model_validate_json(job_json))
    except KeyboardInterrupt:
        code = 130
    except Exception:  # a bug: the traceback stays in the row's log
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    sys.exit(code)


class ChildTrainer:
    """Trains rows in child processes (multiprocessing spawn) with `threads` CPU threads each, output to log
    files; a crash there fails that row only. `terminate()` ends those still running (the sweep was stopped)."""

    def __init__(self, threads: int):
        self.threads = threads
        self.children: set = set()
        self.context = multiprocessing.get_context("spawn")

    def __call__(self, job: train.Job, log: Path | None) -> int:
        assert log is not None
        log.parent.mkdir(parents=True, exist_ok=True)
        child = self.context.Process(target=_train_in_child, args=(job.model_dump_json(), str(log), self.threads),
                                     name=f"attncomp sweep row {log.parent.name}")
        child.start()
        self.children.add(child)
        try:
            child.join()
            return child.exitcode if child.exitcode is not None else EXIT_INTERNAL
        finally:
            self.children.discard(child)

    def terminate(self) -> None:
        for child in list(self.children):
            child.terminate()  # SIGTERM: the runner saves at its next sync point; its last checkpoint stays


def row_trainer(parallel: int) -> TrainFn:
    """Rows in this process one after another, or each in a child process with its share of the CPU threads."""
    return train_in_process if parallel == 1 else ChildTrainer(max(1, (os.cpu_count() or 1) // parallel))


def _failed(name: str, code: int, log: Path | None) -> TrainingError:
    if code == 130:
        raise KeyboardInterrupt
    where = f"; its log: {log}" if log else ""
    return TrainingError(f"training row {name} failed (exit code {code}){where}; finished rows are kept: "
                         "run the same sweep again to resume")


def _train_all(todo: list[Planned], state: SweepState, train_row: TrainFn,
               parallel: int) -> Iterator[tuple[str, float]]:
    """Train the rows, yielding (name, seconds) as each finishes; the first failure stops the sweep."""
    jobs = {r.name: row_job(r, state.options, state.run_dir(r.name)) for r in todo}
    logs = {r.name: (state.run_dir(r.name) / "train.log" if parallel > 1 else None) for r in todo}

    def timed(job: train.Job, log: Path | None) -> tuple[int, float]:
        started = time.monotonic()
        return train_row(job, log), time.monotonic() - started

    if parallel == 1:
        for r in todo:
            code, seconds = timed(jobs[r.name], None)
            if code:
                raise _failed(r.name, code, None)
            yield r.name, seconds
        return
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        pending = {pool.submit(timed, jobs[r.name], logs[r.name]): r.name for r in todo}
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
            getattr(train_row, "terminate", lambda: None)()
            raise


def score_row(state: SweepState, row: Planned, seconds: float | None) -> dict:
    path = state.run_dir(row.name) / ckpt.AVERAGE
    if not path.exists():
        raise TrainingError(f"row {row.name} finished training without {path}; run the sweep again to resume")
    model, found = load_checkpoint(path, device="cpu")
    measured = evaluate(model, PreparedData(state.options.data), state.options.bleu_sentences)
    params = sum(p.numel() for p in model.parameters())
    return {**hyperparameters(row.spec), "params_m": round(params / 1e6, 3), "steps": found.header.step,
            "train_minutes": None if seconds is None else round(seconds / 60, 2), **measured,
            **paper_figures(row.path), "spec_hash": ir.spec_hash(row.spec)}


def run_sweep(state: SweepState, rows: list[Planned], train_row: TrainFn | None = None, parallel: int = 1,
              say: Callable[[str], None] = print) -> SweepState:
    """Train and score every row not finished yet; the state and the table are saved after each. Rows train
    with `train_row` (default: row_trainer(parallel))."""
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
    for name, seconds in _train_all(untrained, state, train_row or row_trainer(parallel), parallel):
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
