"""The generic runner: one training loop for every compiled spec, on one worker or many.

A worker builds the model from a picklable factory (the runtime never parses a spec), wraps it in
DDP when there are several workers, and trains with the spec's loss, optimiser, schedule,
precision and tokens per update. Every update is the same whatever the number of workers (see
attncomp.data.batching); each micro-batch's summed loss is divided by the update's target tokens.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist

from attncomp import __version__
from attncomp import checkpoint as ckpt
from attncomp.data.batching import Batcher, lm_batch, translation_batch
from attncomp.data.dataset import PreparedData
from attncomp.errors import DataError, TrainingError
from attncomp.train import cluster, states
from attncomp.train.monitor import Monitor
from attncomp.train.schedule import learning_rate
from attncomp.train.step import TrainStep, compiled

FAULT_NAN = "ATTNCOMP_FAULT_NAN_AT_STEP"  # tests: make the loss of this update NaN


class Health:
    """The first update whose loss or gradient norm was not finite, noted on the device without a host sync."""

    def __init__(self, device: torch.device):
        self.step = torch.zeros((), dtype=torch.long, device=device)  # 0: none yet
        self.stats = torch.zeros(4, device=device)

    def note(self, step: int, stats: torch.Tensor) -> None:
        first = (self.step == 0) & ~(torch.isfinite(stats[0]) & torch.isfinite(stats[3]))  # loss, gradient norm
        self.step = torch.where(first, step, self.step)
        self.stats = torch.where(first, stats, self.stats)

    def first_bad(self) -> tuple[int, list[float]] | None:
        step = int(self.step)
        return (step, self.stats.tolist()) if step else None


@dataclass
class RunConfig:
    factory: Callable  # factory(device) -> CompiledModel; picklable (functools.partial)
    spec_text: str
    spec_hash: str
    data: str
    out: str
    device: str = "cpu"  # "cuda" or "cpu"
    max_tokens_per_worker: int = 4096
    resume: bool = False
    compile: bool = False
    profile: bool = False
    log_every: int = 10
    log_interval: float = 60.0  # seconds between progress lines without a terminal (train.monitor)
    stop_at: int | None = None  # save and stop after this update (resume later with --resume)
    time_limit: float | None = None  # minutes: then save, average and finish as if the steps were done
    fused_loss: bool = True  # the output projection and the loss in chunks, without full logits
    fsdp: bool = False  # shard parameters, gradients and optimiser state across workers (FSDP2)
    timeout: float = 600.0  # seconds a collective may wait for a peer before the run stops
    # resume_check(stored spec text, checkpoint name) -> the allowed changes ("key: old -> new"), or raises
    resume_check: Callable[[str, str], list[str]] | None = None


def check_vocab(data: PreparedData, m) -> None:
    """The data's vocabulary sizes must be the model's (`m`: the spec's model)."""
    have = (data.vocab["src_size"], data.vocab["tgt_size"])
    need = (m.tgt_vocab, m.tgt_vocab) if m.encoder is None else (m.src_vocab, m.tgt_vocab)
    if m.encoder is None and not data.vocab["shared"]:
        raise DataError(f"a decoder-only model reads source and target with one vocabulary, but {data.path} "
                        "has separate ones; prepare it without --separate-vocab")
    if have != need:
        shown = f"shared({have[0]})" if data.vocab["shared"] else f"separate(src = {have[0]}, tgt = {have[1]})"
        raise DataError(f"{data.path} has a vocabulary of {have[0]}{'' if have[0] == have[1] else ' + ' + str(have[1])}"
                        f" tokens but the spec's model expects {need[0]}"
                        f"{'' if need[0] == need[1] else ' + ' + str(need[1])}; prepare the data with that size, "
                        f'or train with --set "model.vocab={shown}"')


def make_optimizer(spec_optimizer, params, cuda: bool) -> torch.optim.Optimizer:
    kind = torch.optim.AdamW if spec_optimizer.kind == "adamw" else torch.optim.Adam
    return kind(params, lr=1.0, betas=(spec_optimizer.beta1, spec_optimizer.beta2), eps=spec_optimizer.eps,
                weight_decay=spec_optimizer.weight_decay, fused=cuda or None)


def _all_reduce(t: torch.Tensor) -> torch.Tensor:
    if dist.is_initialized():
        dist.all_reduce(t)
    return t


class Trainer:
    def __init__(self, cfg: RunConfig, rank: int, world: int, local_rank: int, stop: cluster.StopFlag | None = None):
        self.cfg, self.rank, self.world, self.local_rank = cfg, rank, world, local_rank
        self.stop = stop or cluster.StopFlag()
        self.cuda = cfg.device == "cuda"
        self.device = torch.device(f"cuda:{local_rank}") if self.cuda else torch.device("cpu")
        if self.cuda:
            torch.cuda.set_device(self.device)
        self.out = Path(cfg.out)
        self.model = cfg.factory(self.device)
        self.spec = self.model.spec
        self.recipe = self.spec.train
        if self.spec.model.decoder is None:
            raise TrainingError("encoder-only models have no training objective in attncomp yet; "
                                "add a decoder or train an encoder-decoder")
        self.lm = self.spec.model.encoder is None
        torch.manual_seed(self.recipe.seed * 1000 + rank)  # dropout: a stream per worker
        self._setup_data()
        self.step, self.position = 0, (0, 0)
        self.health = Health(self.device)
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
        lr = learning_rate(self.recipe.schedule, self.spec.model.d_model, self.recipe.steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda i: lr(i + 1))
        self.net = compiled(self.ddp) if cfg.compile else self.ddp  # dynamic shapes: no compile per shape
        self.autocast = torch.autocast("cuda", dtype=torch.bfloat16) if self.cuda and \
            self.recipe.precision == "bf16" else contextlib.nullcontext()
        self.monitor = Monitor(self.out, self.recipe.steps, enabled=rank == 0, cuda=self.cuda,
                               interval=cfg.log_interval)
        self.last_save = time.monotonic()

    # --- data ---------------------------------------------------------------------------------

    def _setup_data(self) -> None:
        self.data = PreparedData(self.cfg.data)
        check_vocab(self.data, self.spec.model)
        self.train_split = self.data.split("train")
        self.valid_split = self.data.split("valid") if self.data.has_split("valid") else None
        src, tgt = self.train_split.src.lengths, self.train_split.tgt.lengths
        loss_lengths = src + tgt if self.lm else tgt
        keep = self._fits(self.train_split)
        self.batcher = Batcher(src, loss_lengths, self.recipe.batch.count, self.recipe.seed, self.world,
                               self.cfg.max_tokens_per_worker, keep)
        self.collate = lm_batch if self.lm else translation_batch

    def _fits(self, split) -> np.ndarray:
        """Sentences the model's learned position table can hold."""
        positions = self.spec.model.positions
        src, tgt = split.src.lengths, split.tgt.lengths
        if positions.kind != "learned":
            return np.ones(len(src), dtype=bool)
        longest = positions.max_len
        return (src + tgt <= longest) if self.lm else (src <= longest) & (tgt <= longest)

    def _losses(self, net, split, indices: np.ndarray) -> torch.Tensor:
        """[loss, NLL, tokens] of a micro-batch; one without source padding runs the mask-free graph."""
        batch = {k: (v.pin_memory() if self.cuda else v).to(self.device, non_blocking=True)  # pinned: no wait
                 for k, v in self.collate(split, indices).items()}
        lengths = split.src.lengths[indices]
        dense = not self.lm and bool((lengths == lengths[0]).all())
        with self.autocast:
            return net(batch, dense)

    # --- one update ---------------------------------------------------------------------------

    def train_update(self, update) -> tuple[torch.Tensor, float]:
        parts = update.mine(self.rank, self.world)
        scale = self.world / update.target_tokens  # DDP averages over workers; this undoes it
        totals = torch.zeros(3, device=self.device)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if self.cfg.fsdp:
                self.model.set_requires_gradient_sync(last)
            sync = contextlib.nullcontext() if last or self.world == 1 or self.cfg.fsdp else self.ddp.no_sync()
            weight = 1.0 if len(part) else 0.0  # an empty share still joins DDP's gradient reduction
            part = part if len(part) else update.parts[0][:1]
            with sync:
                losses = self._losses(self.net, self.train_split, part)
                (losses[0] * (scale * weight)).backward()
            totals += losses.detach().float() * weight
        if os.environ.get(FAULT_NAN) == str(self.step + 1):
            totals[0] = math.nan
        clip = self.recipe.clip_norm or math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        if hasattr(grad_norm, "full_tensor"):  # FSDP: a DTensor over the shards
            grad_norm = grad_norm.full_tensor()
        _all_reduce(totals)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        stats = torch.cat([totals, grad_norm.detach().reshape(1).to(totals)])
        self.health.note(self.step, stats)
        return stats, lr

    def check_health(self) -> None:
        """Stop if an update since the last check was not finite (a host sync: every log_every updates and
        before every save, so no checkpoint ever holds a bad update)."""
        bad = self.health.first_bad()
        if bad is not None:
            step, (loss, _, tokens, grad_norm) = bad
            found = ckpt.listed(self.out)
            last = f"The last good checkpoint is {found[-1][1]}." if found else "No checkpoint was written yet."
            raise TrainingError(f"the loss became {loss / max(1.0, tokens):.4g} (gradient norm {grad_norm:.4g}) "
                                f"at step {step}; stopped at step {self.step} without saving. {last}")

    # --- evaluation and checkpoints -----------------------------------------------------------

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Validation loss and perplexity; every worker runs the same number of batches (FSDP's
        forward is collective), a short share padded with zero-weighted ones."""
        if self.valid_split is None:
            return {}
        self.model.eval()
        lengths = self.valid_split.src.lengths + self.valid_split.tgt.lengths
        per_batch = max(1, self.cfg.max_tokens_per_worker // max(1, int(lengths.max(initial=1))))
        shares = np.array_split(np.flatnonzero(self._fits(self.valid_split)), self.world)
        rounds = max(math.ceil(len(share) / per_batch) for share in shares)
        mine, totals = shares[self.rank], torch.zeros(3, device=self.device)
        for i in range(rounds):
            indices = mine[i * per_batch : (i + 1) * per_batch]
            weight = 1.0 if len(indices) else 0.0
            losses = self._losses(self.train_step, self.valid_split, indices if len(indices) else shares[0][:1])
            totals += losses.float() * weight
        self.model.train()
        loss, nll, tokens = _all_reduce(totals).tolist()
        tokens = max(tokens, 1.0)
        return {"loss": loss / tokens, "ppl": math.exp(min(nll / tokens, 50.0))}

    def _clock(self, sync_point: bool) -> tuple[bool, bool, bool]:
        """(a checkpoint is due, the time limit is reached, a stop signal came); rank 0's clock decides for
        everyone, and a signal on any rank stops all. Read at sync points only (the agreement is a host sync),
        so time-based saves and stops land on a multiple of log_every."""
        every = self.recipe.checkpoint.every
        by_steps = every.kind != "time" and self.step % every.steps == 0
        if not sync_point:
            return by_steps, False, False
        now, mine = time.monotonic(), self.rank == 0
        due, time_up, stop = cluster.agree([
            mine and (by_steps if every.kind != "time" else now - self.last_save >= every.minutes * 60),
            mine and self.cfg.time_limit is not None and now - self.started >= self.cfg.time_limit * 60,
            self.stop.signal is not None,
        ], self.device)
        return bool(due), bool(time_up), bool(stop)

    def _header(self, metrics: dict) -> ckpt.Header:
        return ckpt.Header(attncomp=__version__, kind="train", spec=self.cfg.spec_text, spec_hash=self.cfg.spec_hash,
                           tokenizers=self._tokenizers(), data=json.dumps(self.data.manifest), step=self.step,
                           position=tuple(self.position), metrics=metrics, sharded=self.cfg.fsdp)

    def save(self, metrics: dict) -> Path:
        """A checkpoint: one file written by rank 0, or under FSDP a directory of DCP shards, one per worker."""
        rng = states.rng_states(self.device, self.cuda, self.world)
        tensors = states.for_checkpoint(self.model, self.optimizer, self.cfg.fsdp)
        path = ckpt.checkpoint_path(self.out, self.step, sharded_dir=self.cfg.fsdp)
        saved = ckpt.Checkpoint(self._header(metrics), model=tensors["model"], optimizer=tensors["optimizer"],
                                scheduler=self.scheduler.state_dict(), rng=rng)
        if self.cfg.fsdp:
            ckpt.sharded.save(saved, tensors, path, self.rank, ckpt.write_file)
        elif self.rank == 0:
            ckpt.save(saved, path)
        if self.rank == 0:
            ckpt.prune(self.out, self.recipe.checkpoint.keep)
        if dist.is_initialized():
            dist.barrier()
        self.last_save = time.monotonic()
        return path

    def _tokenizers(self) -> dict[str, torch.Tensor]:
        def blob(side: str) -> torch.Tensor:
            return torch.frombuffer(bytearray(self.data.tokenizer(side).model_bytes), dtype=torch.uint8)

        return {"src": blob("src"), "tgt": blob("tgt")}

    def _remove_stale(self) -> None:
        for path in ckpt.remove_stale(self.out):
            self.monitor.note(f"removed {path}, left behind by a save that was interrupted")

    def _check_spec(self, path: Path, header: ckpt.Header) -> None:
        """The same spec, or one that only changes how long the run goes (recorded in the log and run.json)."""
        if header.spec_hash == self.cfg.spec_hash:
            return
        if self.cfg.resume_check is None:
            raise TrainingError(f"{path} was trained with another spec; resume with the same spec and --set options")
        changes = self.cfg.resume_check(header.spec, str(path))
        self.monitor.note(f"extending the run from step {header.step}: {'; '.join(changes)}")
        if self.rank == 0:
            cluster.record_extension(self.out, path, header.step, changes)

    def restore(self) -> None:
        found = cluster.agree_on_checkpoint(self.out, self.rank, self.world, self.monitor.note)
        if found is None:
            self.monitor.note(f"no checkpoint in {self.out}; starting from step 0")
            return
        path, header = found.path, found.header
        if header.kind != "train":
            raise TrainingError(f"{path} is an averaged checkpoint; training resumes from a train checkpoint")
        self._check_spec(path, header)
        states.load(self.model, self.optimizer, self.cfg.fsdp, found)
        self.scheduler.load_state_dict(found.scheduler)
        self.step, self.position = header.step, tuple(header.position)
        if len(found.rng) == self.world:
            states.set_rng_state(found.rng[self.rank], self.device, self.cuda)
        else:
            self.monitor.note(f"{path} was written by {len(found.rng)} workers, this run has {self.world}: "
                              "dropout continues from fresh random streams")
        self.monitor.note(f"resumed from {path} at step {self.step}")

    # --- the loop -----------------------------------------------------------------------------

    def run(self) -> dict | None:
        """Train; returns {"stopped": SIGNAL, "step": N, "checkpoint": PATH} when a signal stopped it."""
        if self.rank == 0:
            self._remove_stale()
        if self.cfg.resume:
            self.restore()
        if self.step >= self.recipe.steps:
            self.monitor.note(f"already trained for {self.step} steps")
            return self.finish({})
        metrics: dict = {}
        self.started = time.monotonic()
        profiler = self.monitor.profiler(self.cfg.profile)
        with profiler:
            for update in self.batcher.updates(*self.position):
                self.position = (update.epoch, update.index + 1)
                stats, lr = self.train_update(update)
                cluster.maybe_fault(self.step, self.local_rank)
                sync_point = self.step % self.cfg.log_every == 0  # the host reads device values only here
                if sync_point:
                    self.check_health()
                self.monitor.update(self.step, stats, lr, self.cfg.log_every)
                profiler.step()
                stopping = self.step == self.cfg.stop_at
                due, time_up, signalled = self._clock(sync_point)
                if due or self.step == self.recipe.steps or stopping or time_up or signalled:
                    self.check_health()
                    metrics = self.evaluate()
                    saved = self.save(metrics)
                    self.monitor.evaluation(self.step, metrics, saved)
                if signalled:
                    name = self.stop.signal or "a signal to another worker"
                    self.monitor.note(f"{name}: saved {saved.name} at step {self.step}; continue with --resume")
                    self.monitor.close()
                    return {"stopped": name, "step": self.step, "checkpoint": str(saved)}
                if stopping:
                    self.monitor.note(f"stopped at step {self.step} as asked; continue with --resume")
                    return self.monitor.close()
                if time_up:
                    self.monitor.note(f"time limit of {self.cfg.time_limit:g} minutes reached at step {self.step}")
                    break
                if self.step >= self.recipe.steps:
                    break
        self.finish(metrics)

    def finish(self, metrics: dict) -> None:
        if self.rank == 0:
            last = ckpt.last_readable(self.out, self.recipe.checkpoint.average_last, warn=self.monitor.note)
            if last:
                ckpt.save(ckpt.average(last, warn=self.monitor.note), self.out / ckpt.AVERAGE)
                self.monitor.note(f"averaged {len(last)} checkpoint(s) into {self.out / ckpt.AVERAGE}")
        self.monitor.close()
