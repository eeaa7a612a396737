"""The state of a run between updates — step, position in the data, model, optimiser, schedule, RNG —
and its save and resume: atomic checkpoints (sharded under FSDP), the resume rules, the final average.

The resume rules: a run resumes from the newest readable checkpoint of its directory (all ranks agree
on it); the spec must be the one it was trained with, except for keys that only say how long the run
goes, how it checkpoints or how it is decoded (RUN_LENGTH), and each such change is recorded in
run.json's `extended`; `init` weights count only until the run has a checkpoint of its own."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
import torch.distributed as dist

from attncomp import __version__, ir
from attncomp import checkpoint as ckpt
from attncomp.errors import TrainingError, UsageError, printable
from attncomp.ir.family import Described
from attncomp.train import cluster, state_dicts
from attncomp.train.batches import RunData
from attncomp.train.config import RunConfig
from attncomp.train.monitor import Monitor


# keys a resumed run may change
RUN_LENGTH = ("train.steps", "train.checkpoint.", "train.validation.patience", "decode.", "expect.")


def resume_changes(spec: ir.Spec | ir.nodes.Recipe, stored: str, origin: str) -> list[str]:
    """Resuming a checkpoint trained with spec text `stored` under `spec` (a model factory's run: recipe text
    under its recipe): the changed keys, all of which must only say how long the run goes (steps, checkpoint
    cadence) or how it is decoded."""
    if isinstance(spec, ir.nodes.Recipe):
        rows = ir.diff(ir.load_recipe(stored), spec)
    else:
        rows = ir.diff(ir.load_flat(stored, origin), spec)
    refused = [f"{key} ({old} -> {new})" for key, old, new in rows if not key.startswith(RUN_LENGTH)]
    if refused:
        raise UsageError(f"{origin} was trained with another architecture or recipe: {', '.join(refused)}; "
                         "--resume may change only train.steps, train.checkpoint and train.validation.patience "
                         "(and decode, expect); start a new run (another --out) for the rest")
    return [f"{key}: {old} -> {new}" for key, old, new in rows]


def initial_weights(out: Path, resume: bool, init: str | None) -> str | None:
    """The weights a run starts from: `init`, unless it resumes and its directory has a checkpoint (that wins)."""
    if ckpt.listed(out) and not resume:
        raise UsageError(f"{out} already has checkpoints; continue with --resume, or choose another --out")
    return None if resume and ckpt.listed(out) else init


class RunState:
    def __init__(self, cfg: RunConfig, rank: int, world: int, model, optimizer, scheduler, data: RunData,
                 monitor: Monitor, described: Described | None = None):
        self.cfg, self.rank, self.world, self.out = cfg, rank, world, Path(cfg.out)
        self.model, self.optimizer, self.scheduler, self.data, self.monitor = model, optimizer, scheduler, data, monitor
        self.recipe = (described or model.spec).train
        self.step, self.position = 0, (0, 0)
        self.metrics: dict = {}  # those of the checkpoint resumed from
        self.last_save = time.monotonic()

    def _header(self, metrics: dict) -> ckpt.Header:
        return ckpt.Header(attncomp=__version__, kind="train", spec=self.cfg.spec_text, spec_hash=self.cfg.spec_hash,
                           tokenizers=self._tokenizers(), data=json.dumps(self.data.data.manifest), step=self.step,
                           position=tuple(self.position), metrics=metrics, sharded=self.cfg.fsdp,
                           factory=self.cfg.factory_name, recipe=self.cfg.recipe_text)

    def save(self, metrics: dict, best: bool = False) -> Path:
        """A checkpoint: one file written by rank 0, or under FSDP a directory of DCP shards, one per worker;
        with `best`, also the run's checkpoint_best.pt (one file, written atomically)."""
        rng = state_dicts.rng_states(self.data.device, self.data.cuda, self.world)
        tensors = state_dicts.for_checkpoint(self.model, self.optimizer, self.cfg.fsdp)
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
        if best and self.rank == 0:  # a sharded checkpoint is gathered: its shards are all written now
            ckpt.save(ckpt.read(path) if self.cfg.fsdp else saved, self.out / ckpt.BEST)
        self.last_save = time.monotonic()
        return path

    def _tokenizers(self) -> dict[str, torch.Tensor]:
        def blob(side: str) -> torch.Tensor:
            return torch.frombuffer(bytearray(self.data.data.tokenizer(side).model_bytes), dtype=torch.uint8)

        return {"src": blob("src"), "tgt": blob("tgt")}

    def remove_stale(self) -> None:
        for path in ckpt.remove_stale(self.out):
            self.monitor.note(f"removed {path}, left behind by a save that was interrupted")

    def _check_spec(self, path: Path, header: ckpt.Header) -> None:
        """The same spec, or one that only changes how long the run goes (recorded in the log and run.json)."""
        factory = self.cfg.factory_name
        if header.factory != factory:
            def what(name: str) -> str:
                return f"the model factory {printable(name)}" if name else "a spec"

            raise UsageError(f"{path} was trained from {what(header.factory)}, this run from {what(factory)}: "
                             "--resume continues the same model; start a new run (another --out) for another")
        if header.spec_hash == self.cfg.spec_hash:
            return
        if factory:
            changes = resume_changes(ir.load_recipe(self.cfg.recipe_text), header.recipe, str(path))
        else:
            changes = resume_changes(self.model.spec, header.spec, str(path))
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
        state_dicts.load(self.model, self.optimizer, self.cfg.fsdp, found)
        self.scheduler.load_state_dict(found.scheduler)
        self.step, self.position = header.step, tuple(header.position)
        self.metrics = dict(header.metrics)  # train.validation's judgement continues from them
        if len(found.rng) == self.world:
            state_dicts.set_rng_state(found.rng[self.rank], self.data.device, self.data.cuda)
        else:
            self.monitor.note(f"{path} was written by {len(found.rng)} workers, this run has {self.world}: "
                              "dropout continues from fresh random streams")
        self.monitor.note(f"resumed from {path} at step {self.step}")

    def average(self) -> None:
        """Rank 0 averages the last checkpoints (the spec's average_last) into checkpoint_avg.pt."""
        if self.rank == 0:
            last = ckpt.last_readable(self.out, self.recipe.checkpoint.average_last, warn=self.monitor.note)
            if last:
                ckpt.save(ckpt.average(last, warn=self.monitor.note), self.out / ckpt.AVERAGE)
                self.monitor.note(f"averaged {len(last)} checkpoint(s) into {self.out / ckpt.AVERAGE}")
