"""What a run shows: a progress bar and TensorBoard scalars on rank 0, a line per evaluation, and
torch.profiler traces (for torch-tb-profiler) with --profile.

Without a terminal (a cluster's log file) there is no bar; instead one line at the first sync point
and then at most every `interval` seconds (`--log-interval`, default 60), at a sync point (every
`--log-every` updates, when the host reads the loss anyway):

    step 1,200/100,000 | loss 4.1234 | lr 3.20e-04 | 12,345 tok/s | 0:10:00 elapsed | ETA 13:20:00

A warning marks a run whose validation loss stays finite but rises far above its best value: more
than DIVERGENCE_FACTOR (1.5) times the best and more than DIVERGENCE_MARGIN (1 nat) above it, as
`constant(lr = 1)` does (4.4 -> 235). The run goes on (a non-finite loss stops it; see
Trainer.check_health); the best is that of this process, so it starts afresh on --resume.

TensorBoard scalars (`tensorboard --logdir RUN/tb`):
    train/loss        label-smoothed loss per target token      train/ppl       exp(NLL per token)
    train/lr          learning rate                              train/grad_norm gradient norm before clipping
    train/tokens_per_s  target tokens per second                 gpu/memory_gb   peak GPU memory
    valid/loss, valid/ppl   at each evaluation (every checkpoint)
    valid/bleu        BLEU of the first validation sentences, with train.validation { bleu = N }
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from attncomp.errors import printable
from attncomp.progress import clock, is_terminal

PROFILE_SCHEDULE = {"wait": 2, "warmup": 2, "active": 4, "repeat": 1}


class _NoProfiler(contextlib.nullcontext):
    def step(self) -> None:
        pass


DIVERGENCE_FACTOR = 1.5  # validation loss above this times its best ...
DIVERGENCE_MARGIN = 1.0  # ... and this many nats above it: warn that the run may be diverging


def far_above(loss: float, best: float) -> bool:
    """Whether a validation loss is far above the best one (see the module docstring)."""
    return loss > best * DIVERGENCE_FACTOR and loss > best + DIVERGENCE_MARGIN


class Monitor:
    def __init__(self, out: Path, total_steps: int, enabled: bool, cuda: bool, interval: float = 60.0,
                 stream=None):
        self.out, self.enabled, self.cuda = out, enabled, cuda
        self.total_steps, self.interval = total_steps, interval
        self.stream = stream or sys.stderr
        self.window: torch.Tensor | float = 0.0  # loss, nll, tokens since the last log (on the device)
        self.started = self.run_started = time.monotonic()
        self.first_step: int | None = None  # the step this process started from (resumed runs)
        self.last_line: float | None = None  # when the last progress line was written (no terminal)
        self.best: tuple[float, int, str] | None = None  # validation loss, its step, its checkpoint
        self.tty = is_terminal(self.stream)
        self.bar = self.writer = None
        self.last = {}
        self.unread: tuple[torch.Tensor, float] | None = None  # the last step's stats and lr, when not read yet
        if enabled:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(out / "tb"))
            self.bar = tqdm(total=total_steps, desc="train", unit="step", file=self.stream, dynamic_ncols=True,
                            disable=not self.tty)

    def note(self, message: str) -> None:
        if self.enabled:  # one line each: a path with a newline or an escape sequence in it is escaped
            tqdm.write(printable(message), file=self.stream)
            self.stream.flush()

    def update(self, step: int, stats: torch.Tensor, lr: float, log_every: int) -> None:
        if not self.enabled:
            return
        if self.first_step is None:
            self.first_step, self.run_started = step - 1, time.monotonic()
        self.window = stats[:3] + self.window  # on the device: read once per log_every steps
        self.unread = (stats, lr)
        if self.bar is not None:
            if self.bar.n == 0 and step > 1:
                self.bar.update(step - 1)  # resumed
            self.bar.update(1)
        if step % log_every:
            return
        self._read(step)
        self._progress_line(step)

    def _read(self, step: int) -> None:
        """The window's loss, perplexity and tokens/s and the last step's gradient norm and lr, read from the
        device into `last` and TensorBoard; the window starts again."""
        stats, lr = self.unread
        self.unread = None
        elapsed = max(time.monotonic() - self.started, 1e-9)
        w_loss, w_nll, w_tokens, grad_norm = torch.cat([self.window, stats[3:]]).tolist()
        per_token = max(w_tokens, 1.0)
        self.last = {"train/loss": w_loss / per_token, "train/ppl": math.exp(min(w_nll / per_token, 50.0)),
                     "train/lr": lr, "train/grad_norm": grad_norm, "train/tokens_per_s": w_tokens / elapsed}
        if self.cuda:
            self.last["gpu/memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
        for key, value in self.last.items():
            self.writer.add_scalar(key, value, step)
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{self.last['train/loss']:.3f}", tok_s=f"{self.last['train/tokens_per_s']:,.0f}")
        self.window, self.started = 0.0, time.monotonic()

    def _progress_line(self, step: int) -> None:
        """Without a terminal: step, loss, lr, tokens/s, elapsed time and ETA, at most every interval s."""
        now = time.monotonic()
        if self.tty or (self.last_line is not None and now - self.last_line < self.interval):
            return
        self.last_line = now
        elapsed = now - self.run_started
        rate = (step - self.first_step) / max(elapsed, 1e-9)  # updates per second in this process
        eta = (self.total_steps - step) / rate if rate > 0 else 0.0
        self.note(f"step {step:,}/{self.total_steps:,} | loss {self.last['train/loss']:.4f} | "
                  f"lr {self.last['train/lr']:.2e} | {self.last['train/tokens_per_s']:,.0f} tok/s | "
                  f"{clock(elapsed)} elapsed | ETA {clock(eta)}")

    def evaluation(self, step: int, metrics: dict, saved: Path) -> None:
        if not self.enabled:
            return
        if self.unread is not None:  # steps since the last read (a run shorter than --log-every): the line shows them
            self._read(step)
        parts = [f"step {step}"]
        if metrics:
            parts.append(f"valid loss {metrics['loss']:.4f} ppl {metrics['ppl']:.2f}")
            self.writer.add_scalar("valid/loss", metrics["loss"], step)
            self.writer.add_scalar("valid/ppl", metrics["ppl"], step)
        if "bleu" in metrics:  # train.validation.bleu
            parts.append(f"bleu {metrics['bleu']:.2f}")
            self.writer.add_scalar("valid/bleu", metrics["bleu"], step)
        if self.last:
            parts.append(f"train loss {self.last['train/loss']:.4f}")
            parts.append(f"{self.last['train/tokens_per_s']:,.0f} tok/s")
        parts.append(f"saved {saved.name}" + (" and checkpoint_best.pt" if metrics.get("best_step") == step else ""))
        self.note(" | ".join(parts))
        if metrics:
            self._watch_divergence(step, metrics["loss"], saved)
        self.writer.flush()

    def _watch_divergence(self, step: int, loss: float, saved: Path) -> None:
        """Warn when a finite validation loss is far above the best one seen so far."""
        if not math.isfinite(loss):
            return
        if self.best is not None and far_above(loss, self.best[0]):
            best, at, name = self.best
            self.note(f"warning: validation loss {loss:.4g} at step {step} is far above its best, {best:.4g} at "
                      f"step {at} ({name}): training may be diverging (a learning rate too high?)")
        if self.best is None or loss < self.best[0]:
            self.best = (loss, step, saved.name)

    def profiler(self, enabled: bool):
        """torch.profiler over a few steps, traces written for torch-tb-profiler (RUN/profile)."""
        if not (enabled and self.enabled):
            return _NoProfiler()
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        return profile(activities=activities, schedule=schedule(**PROFILE_SCHEDULE), record_shapes=True,
                       on_trace_ready=tensorboard_trace_handler(str(self.out / "profile")), profile_memory=True)

    def close(self) -> None:
        if self.enabled:
            self.bar.close()
            self.writer.close()
