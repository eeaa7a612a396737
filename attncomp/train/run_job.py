"""`attncomp.train.run(job)`: check a job, prepare its run directory and train it on its workers.

Everything that can be refused is refused here, before any worker starts, with one line each (an
AttncompError): the spec, its size, the devices, the multi-machine options, the data's vocabulary (its
sizes, its tokenizer's special ids) and splits, a run directory that already has checkpoints without
`resume`, `init` weights that do not fit.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from attncomp import checkpoint as ckpt
from attncomp import files, ir
from attncomp.data.dataset import PreparedData
from attncomp.errors import UsageError, printable
from attncomp.ir.family import Described, described
from attncomp.train import float8
from attncomp.train.cluster import RUN_RECORD, read_run_record
from attncomp.train.config import RunConfig, check_tokenizer, check_validation, check_vocab
from attncomp.train.factory import ModelFactory, describe
from attncomp.train.job import Job, devices
from attncomp.train.launch import Nodes, Stopped, check_nodes, launch
from attncomp.train.run_state import initial_weights
from attncomp.train.schedule import warmup_outlasts_run
from attncomp.train.warm_start import check_initial
from attncomp.train.worker import worker

DEFAULT_TOKENS = {"cuda": 32768, "cpu": 4096}  # padded tokens per micro-batch per worker


@dataclass
class Subject:
    """What a job trains, as the workers receive it: made by the spec adapter (`spec_job`) or from a model
    factory (`factory_job`)."""

    described: Described  # the model's facts with its recipe
    factory: Callable  # factory(device) -> the model; picklable
    spec_text: str  # "" for a factory's run
    spec_hash: str
    written: dict[str, str]  # files written into the run directory: {"spec.attn": text} or {"recipe.attn": text}
    model: Callable[[], torch.nn.Module]  # the model on the host, to check --init weights against (meta: shapes)
    factory_name: str = ""
    recipe_text: str = ""
    record: dict = field(default_factory=dict)  # run.json's keys for what is trained


def spec_job(job: Job) -> Subject:
    """The spec adapter: compile the job's spec (the only place of a run that imports the compiler)."""
    from attncomp.compiler import model_factory  # lazily: training a factory's model never imports the compiler
    from attncomp.lower.size import refuse_if_too_large
    from attncomp.train.warm_start import meta_model

    spec = ir.load(job.spec, list(job.overrides))
    if not job.force:  # as build and compile do, before any data is read or worker starts
        refuse_if_too_large(spec, printable(job.spec))
    text = ir.to_text(spec)
    return Subject(described(spec), functools.partial(model_factory, spec), text, ir.spec_hash(spec),
                   {"spec.attn": text}, functools.partial(meta_model, spec),
                   record={"spec": job.spec, "set": list(job.overrides)})


def factory_job(job: Job) -> Subject:
    """A model factory's job: its recipe read, its model made once here (refused in one line if it cannot be)."""
    if job.spec is not None:
        raise UsageError("give a spec or --model (a model factory), not both")
    recipe = ir.load_recipe(job.recipe, list(job.overrides)) if job.recipe is not None else \
        ir.load_recipe("train { }\n", list(job.overrides))
    factory = ModelFactory(job.model, recipe.train.seed)
    model = factory()
    facts = describe(model, job.model)
    text = ir.recipe_text(recipe)
    return Subject(Described(facts, recipe.train, recipe.decode), factory, "",
                   hashlib.sha256(text.encode("utf-8")).hexdigest(), {"recipe.attn": text}, lambda: model,
                   factory_name=job.model, recipe_text=text,
                   record={"model": job.model, "recipe": job.recipe, "set": list(job.overrides)})


def run(job: Job) -> Path:
    """Train `job`; returns the averaged checkpoint (or the run directory when there is none). A run stopped
    by a signal raises Stopped (exit code 75 after saving, 130 without), a failed one its AttncompError."""
    if job.model is None and job.recipe is not None:
        raise UsageError("--recipe goes with --model (a model factory); a spec has its own train block")
    if job.model is None and job.spec is None:
        raise UsageError("give a spec, or --model module:function with --recipe")
    subject = factory_job(job) if job.model is not None else spec_job(job)
    name = subject.described.model.name
    par = job.parallelism
    nodes = Nodes(par.nnodes, par.rdzv_endpoint, par.rdzv_id, par.max_restarts, par.timeout)
    check_nodes(nodes)
    device, nproc = devices(par, torch.cuda.device_count() if torch.cuda.is_available() else 0)
    if subject.described.train.precision == "float8":  # torchao and a device that runs float8, before any worker
        float8.torchao_float8()
        float8.check_device(device)
    if par.fsdp and nproc * par.nnodes < 2:
        raise UsageError("--fsdp shards the model across workers: it needs at least 2 (--gpus N or --procs N)")
    data = PreparedData(job.data.path)
    check_vocab(data, subject.described.model)
    check_tokenizer(data, subject.described)
    check_validation(subject.described.train, data)
    out = Path(job.checkpointing.out or Path("runs") / _directory_name(name))
    init = initial_weights(out, job.checkpointing.resume, job.checkpointing.init)
    if init is not None:
        check_initial(subject.described, data, init, subject.model())
    out.mkdir(parents=True, exist_ok=True)
    for file_name, text in subject.written.items():
        files.write_atomically(out / file_name, text)
    cfg = _run_config(job, subject, device, out, init)
    _write_run_record(out, job, subject, device, nproc, cfg.max_tokens_per_worker)
    print(f"training {name} on {nproc * par.nnodes} {'GPU' if device == 'cuda' else 'CPU'} worker(s) "
          f"-> {out}", file=sys.stderr)
    if (warning := warmup_outlasts_run(subject.described.train.schedule, subject.described.train.steps)) is not None:
        print(f"warning: {warning}", file=sys.stderr)
    results, received = launch(worker, (cfg,), nproc, out, nodes)
    stopped = next((r for r in results if isinstance(r, dict) and "stopped" in r), None)
    if stopped is not None:
        raise Stopped(f"{received or stopped['stopped']}: saved {stopped['checkpoint']} at step {stopped['step']}; "
                      "continue with --resume")
    average = out / ckpt.AVERAGE
    done = average if average.exists() else out
    print(f"done: {done}", file=sys.stderr)
    return done


def _directory_name(name: str) -> str:
    """runs/<name>: a spec's model name, or a factory's function name (`module:make` -> make)."""
    return name.rpartition(":")[2] or "model"


def _run_config(job: Job, subject: Subject, device: str, out: Path, init: str | None) -> RunConfig:
    c, log, ex = job.checkpointing, job.logging, job.execution
    return RunConfig(factory=subject.factory, spec_text=subject.spec_text, spec_hash=subject.spec_hash,
                     data=job.data.path, out=str(out), device=device,
                     max_tokens_per_worker=job.data.max_tokens_per_worker or DEFAULT_TOKENS[device],
                     resume=c.resume, compile=ex.compile, checkpoint_layers=ex.checkpoint_layers,
                     profile=log.profile, log_every=log.log_every, log_interval=log.log_interval,
                     stop_at=c.stop_at, time_limit=c.time_limit, fused_loss=ex.fused_loss,
                     fsdp=job.parallelism.fsdp, timeout=job.parallelism.timeout, init=init,
                     described=subject.described, factory_name=subject.factory_name, recipe_text=subject.recipe_text)


def _write_run_record(out: Path, job: Job, subject: Subject, device: str, nproc: int, per_worker: int) -> None:
    """run.json: the job's options; a resumed run keeps the record of earlier extensions."""
    par = job.parallelism
    record = {**subject.record, "data": job.data.path, "device": device,
              "workers_per_node": nproc, "nnodes": par.nnodes, "max_tokens_per_worker": per_worker,
              "time_limit": job.checkpointing.time_limit, "timeout": par.timeout,
              "max_restarts": par.max_restarts, "init": job.checkpointing.init}
    earlier = read_run_record(out).get("extended")
    if earlier:
        record["extended"] = earlier
    files.write_atomically(out / RUN_RECORD, json.dumps(record, indent=2) + "\n")
