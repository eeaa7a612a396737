"""The generic runner: one training loop for every compiled spec, on one worker or many.

A worker builds the model from a picklable factory (the runtime never parses a spec), wraps it in
DDP when there are several workers, and trains with the spec's loss, optimiser, schedule,
precision and tokens per update. The pieces, one job each: attncomp.train.config (what a run is
told), .batches (its data), .update (one update), .evaluation, .run_state (step, position and the
checkpoints: save and resume); this module is the loop.
"""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path

import torch

from attncomp.ir.family import described
from attncomp.train import cluster, float8
from attncomp.train.batches import RunData
from attncomp.train.config import RunConfig, check_vocab, make_optimizer
from attncomp.train.evaluation import evaluate
from attncomp.train.monitor import Monitor
from attncomp.train.run_state import RunState
from attncomp.train.schedule import learning_rate
from attncomp.train.state_dicts import load_initial
from attncomp.train.step import TrainStep, compiled
from attncomp.train.update import Health, Updater
from attncomp.train.validation import Validator

__all__ = ["Health", "RunConfig", "Trainer", "check_vocab", "make_optimizer"]


class Trainer:
    def __init__(self, cfg: RunConfig, rank: int, world: int, local_rank: int, stop: cluster.StopFlag | None = None):
        self.cfg, self.rank, self.world, self.local_rank = cfg, rank, world, local_rank
        self.stop = stop or cluster.StopFlag()
        self.cuda = cfg.device == "cuda"
        self.device = torch.device(f"cuda:{local_rank}") if self.cuda else torch.device("cpu")
        if self.cuda:
            torch.cuda.set_device(self.device)
        self.model = cfg.factory(self.device)
        if cfg.checkpoint_layers:  # optional in the model's protocol (attncomp.protocol)
            self.model.checkpoint_layers(True)
        # the model's facts and recipe: the job's (a factory's run), or the compiled model's spec
        self.spec = cfg.described if cfg.described is not None else described(self.model.spec)
        if cfg.init is not None:  # before any wrapping; a checkpoint restored on --resume replaces these weights
            load_initial(self.model, cfg.init)
        self.recipe = self.spec.train
        # float8: the linear layers swapped for torchao's before DDP, FSDP and torch.compile wrap them
        conversion = float8.convert(self.model) if self.recipe.precision == "float8" else None
        torch.manual_seed(self.recipe.seed * 1000 + rank)  # dropout: a stream per worker
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if self.cuda and \
            self.recipe.precision in ("bf16", "float8") else contextlib.nullcontext()
        self.data = RunData(cfg.data, self.spec, world, cfg.max_tokens_per_worker, self.device, autocast)
        self.train_step = TrainStep(self.model, self.recipe.loss.label_smoothing, fused_loss=cfg.fused_loss,
                                    through_forward=cfg.fsdp,
                                    max_tokens=cfg.max_tokens_per_worker if cfg.compile else None)
        self.ddp = self.train_step
        if cfg.fsdp:
            from torch.distributed.fsdp import fully_shard

            fully_shard(self.model)  # before the optimiser: it must see the sharded parameters
        elif world > 1:
            ids = [self.device.index] if self.cuda else None
            self.ddp = torch.nn.parallel.DistributedDataParallel(self.train_step, device_ids=ids)
        self.optimizer = make_optimizer(self.recipe.optimizer, self.model.parameters(), self.cuda)
        lr = learning_rate(self.recipe.schedule, self.model.d_model, self.recipe.steps)  # the model's protocol
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda i: lr(i + 1))
        self.net = compiled(self.ddp) if cfg.compile else self.ddp  # dynamic shapes: no compile per shape
        self.updater = Updater(self.model, self.ddp, self.net, self.optimizer, self.scheduler, self.data, rank,
                               world, cfg.fsdp, self.recipe.clip_norm)
        self.monitor = Monitor(Path(cfg.out), self.recipe.steps, enabled=rank == 0, cuda=self.cuda,
                               interval=cfg.log_interval)
        if conversion is not None:
            self.monitor.note(conversion.summary())
        self.state = RunState(cfg, rank, world, self.model, self.optimizer, self.scheduler, self.data, self.monitor,
                              self.spec)
        replica = functools.partial(cfg.factory, self.device) if cfg.fsdp else None
        self.validator = Validator(self.recipe.validation, self.model, self.data, rank, replica)

    def evaluate(self) -> dict[str, float]:
        metrics = evaluate(self.model, self.train_step, self.data, self.cfg.max_tokens_per_worker, self.rank,
                           self.world)
        metrics.update(self.validator.bleu())
        return {**metrics, **self.validator.judge(self.state.step, metrics)}

    def check_health(self) -> None:
        self.updater.check_health(self.state.step, self.state.out)

    def _clock(self, sync_point: bool) -> tuple[bool, bool, bool]:
        """(a checkpoint is due, the time limit is reached, a stop signal came); rank 0's clock decides for
        everyone, and a signal on any rank stops all. Read at sync points only (the agreement is a host sync),
        so time-based saves and stops land on a multiple of log_every."""
        every = self.recipe.checkpoint.every
        by_steps = every.kind != "time" and self.state.step % every.steps == 0
        if not sync_point:
            return by_steps, False, False
        now, mine = time.monotonic(), self.rank == 0
        due, time_up, stop = cluster.agree([
            mine and (by_steps if every.kind != "time" else now - self.state.last_save >= every.minutes * 60),
            mine and self.cfg.time_limit is not None and now - self.started >= self.cfg.time_limit * 60,
            self.stop.signal is not None,
        ], self.device)
        return bool(due), bool(time_up), bool(stop)

    # --- the loop -----------------------------------------------------------------------------

    def run(self) -> dict | None:
        """Train; returns {"stopped": SIGNAL, "step": N, "checkpoint": PATH} when a signal stopped it."""
        state = self.state
        if self.rank == 0:
            state.remove_stale()
        if self.cfg.resume:
            state.restore()
        if state.step == 0 and self.cfg.init is not None:
            self.monitor.note(f"initialised the weights from {self.cfg.init}; step 0, a fresh optimiser and schedule")
        self.validator.restore(state.metrics)
        if self.validator.exhausted:
            self.monitor.note(f"nothing to train: {self.validator.stop_message(state.step)}")
            return self.finish({})
        if state.step >= self.recipe.steps:
            self.monitor.note(f"already trained for {state.step} steps")
            return self.finish({})
        metrics: dict = {}
        self.started = time.monotonic()
        profiler = self.monitor.profiler(self.cfg.profile)
        with profiler:
            for update in self.data.batcher.updates(*state.position):
                state.position = (update.epoch, update.index + 1)
                stats, lr = self.updater.run(update, state.step + 1)
                state.step += 1
                sync_point = state.step % self.cfg.log_every == 0  # the host reads device values only here
                if sync_point:
                    self.check_health()
                self.monitor.update(state.step, stats, lr, self.cfg.log_every)
                profiler.step()
                stopping = state.step == self.cfg.stop_at
                due, time_up, signalled = self._clock(sync_point)
                if due or state.step == self.recipe.steps or stopping or time_up or signalled:
                    self.check_health()
                    metrics = self.evaluate()
                    saved = state.save(metrics, best=self.validator.improved)
                    self.monitor.evaluation(state.step, metrics, saved)
                if signalled:
                    name = self.stop.signal or "a signal to another worker"
                    self.monitor.note(f"{name}: saved {saved.name} at step {state.step}; continue with --resume")
                    self.monitor.close()
                    return {"stopped": name, "step": state.step, "checkpoint": str(saved)}
                if stopping:
                    self.monitor.note(f"stopped at step {state.step} as asked; continue with --resume")
                    return self.monitor.close()
                if time_up:
                    self.monitor.note(f"time limit of {self.cfg.time_limit:g} minutes reached at step {state.step}")
                    break
                if self.validator.exhausted:
                    self.monitor.note(self.validator.stop_message(state.step))
                    break
                if state.step >= self.recipe.steps:
                    break
        self.finish(metrics)

    def finish(self, metrics: dict) -> None:
        self.state.average()
        self.monitor.close()
