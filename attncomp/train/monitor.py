"""What a run shows: a progress bar and TensorBoard scalars on rank 0, a line per evaluation, and
torch.profiler traces (for torch-tb-profiler) with --profile.

TensorBoard scalars (`tensorboard --logdir RUN/tb`):
    train/loss        label-smoothed loss per target token      train/ppl       exp(NLL per token)
    train/lr          learning rate                              train/grad_norm gradient norm before clipping
    train/tokens_per_s  target tokens per second                 gpu/memory_gb   peak GPU memory
    valid/loss, valid/ppl   at each evaluation (every checkpoint)
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

PROFILE_SCHEDULE = {"wait": 2, "warmup": 2, "active": 4, "repeat": 1}


class _NoProfiler(contextlib.nullcontext):
    def step(self) -> None:
        pass


class Monitor:
    def __init__(self, out: Path, total_steps: int, enabled: bool, cuda: bool):
        self.out, self.enabled, self.cuda = out, enabled, cuda
        self.window: torch.Tensor | float = 0.0  # loss, nll, tokens since the last log (on the device)
        self.started = time.monotonic()
        self.bar = self.writer = None
        if enabled:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(out / "tb"))
            self.bar = tqdm(total=total_steps, desc="train", unit="step", file=sys.stderr, dynamic_ncols=True,
                            disable=None)
            self.last = {}

    def note(self, message: str) -> None:
        if self.enabled:
            tqdm.write(message, file=sys.stderr)

    def update(self, step: int, stats: torch.Tensor, lr: float, log_every: int) -> None:
        if not self.enabled:
            return
        self.window = stats[:3] + self.window  # on the device: read once per log_every steps
        if self.bar is not None:
            if self.bar.n == 0 and step > 1:
                self.bar.update(step - 1)  # resumed
            self.bar.update(1)
        if step % log_every:
            return
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

    def evaluation(self, step: int, metrics: dict, saved: Path) -> None:
        if not self.enabled:
            return
        parts = [f"step {step}"]
        if metrics:
            parts.append(f"valid loss {metrics['loss']:.4f} ppl {metrics['ppl']:.2f}")
            self.writer.add_scalar("valid/loss", metrics["loss"], step)
            self.writer.add_scalar("valid/ppl", metrics["ppl"], step)
        if self.last:
            parts.append(f"train loss {self.last['train/loss']:.4f}")
            parts.append(f"{self.last['train/tokens_per_s']:,.0f} tok/s")
        parts.append(f"saved {saved.name}")
        self.note(" | ".join(parts))
        self.writer.flush()

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
