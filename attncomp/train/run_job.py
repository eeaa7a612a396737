"""`attncomp.train.run(job)`: check a job, prepare its run directory and train it on its workers.

Everything that can be refused is refused here, before any worker starts, with one line each (an
AttncompError): the spec, its size, the devices, the multi-machine options, the data's vocabulary (its
sizes, its tokenizer's special ids) and splits, a run directory that already has checkpoints without
`resume`, `init` weights that do not fit.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import torch

from attncomp import checkpoint as ckpt
from attncomp import files, ir
from attncomp.compiler import model_factory
from attncomp.data.dataset import PreparedData
from attncomp.errors import UsageError, printable
from attncomp.lower.size import refuse_if_too_large
from attncomp.train.cluster import RUN_RECORD, read_run_record
from attncomp.train.config import RunConfig, check_tokenizer, check_validation, check_vocab
from attncomp.train.job import Job, devices
from attncomp.train.launch import Nodes, Stopped, check_nodes, launch
from attncomp.train.run_state import initial_weights
from attncomp.train.warm_start import check_initial
from attncomp.train.worker import worker

DEFAULT_TOKENS = {"cuda": 32768, "cpu": 4096}  # padded tokens per micro-batch per worker


def run(job: Job) -> Path:
    """Train `job`; returns the averaged checkpoint (or the run directory when there is none). A run stopped
    by a signal raises Stopped (exit code 75 after saving, 130 without), a failed one its AttncompError."""
    spec = ir.load(job.spec, list(job.overrides))
    if not job.force:  # as build and compile do, before any data is read or worker starts
        refuse_if_too_large(spec, printable(job.spec))
    par = job.parallelism
    nodes = Nodes(par.nnodes, par.rdzv_endpoint, par.rdzv_id, par.max_restarts, par.timeout)
    check_nodes(nodes)
    device, nproc = devices(par, torch.cuda.device_count() if torch.cuda.is_available() else 0)
    if par.fsdp and nproc * par.nnodes < 2:
        raise UsageError("--fsdp shards the model across workers: it needs at least 2 (--gpus N or --procs N)")
    data = PreparedData(job.data.path)
    check_vocab(data, spec.model)
    check_tokenizer(data, spec)
    check_validation(spec.train, data)
    out = Path(job.checkpointing.out or Path("runs") / spec.model.name)
    init = initial_weights(out, job.checkpointing.resume, job.checkpointing.init)
    if init is not None:
        check_initial(spec, data, init)
    out.mkdir(parents=True, exist_ok=True)
    text = ir.to_text(spec)
    files.write_atomically(out / "spec.attn", text)
    cfg = _run_config(job, spec, text, device, out, init)
    _write_run_record(out, job, device, nproc, cfg.max_tokens_per_worker)
    print(f"training {spec.model.name} on {nproc * par.nnodes} {'GPU' if device == 'cuda' else 'CPU'} worker(s) "
          f"-> {out}", file=sys.stderr)
    results, received = launch(worker, (cfg,), nproc, out, nodes)
    stopped = next((r for r in results if isinstance(r, dict) and "stopped" in r), None)
    if stopped is not None:
        raise Stopped(f"{received or stopped['stopped']}: saved {stopped['checkpoint']} at step {stopped['step']}; "
                      "continue with --resume")
    average = out / ckpt.AVERAGE
    done = average if average.exists() else out
    print(f"done: {done}", file=sys.stderr)
    return done


def _run_config(job: Job, spec: ir.Spec, text: str, device: str, out: Path, init: str | None) -> RunConfig:
    c, log, ex = job.checkpointing, job.logging, job.execution
    return RunConfig(factory=functools.partial(model_factory, spec), spec_text=text, spec_hash=ir.spec_hash(spec),
                     data=job.data.path, out=str(out), device=device,
                     max_tokens_per_worker=job.data.max_tokens_per_worker or DEFAULT_TOKENS[device],
                     resume=c.resume, compile=ex.compile, checkpoint_layers=ex.checkpoint_layers,
                     profile=log.profile, log_every=log.log_every, log_interval=log.log_interval,
                     stop_at=c.stop_at, time_limit=c.time_limit, fused_loss=ex.fused_loss,
                     fsdp=job.parallelism.fsdp, timeout=job.parallelism.timeout, init=init)


def _write_run_record(out: Path, job: Job, device: str, nproc: int, per_worker: int) -> None:
    """run.json: the job's options; a resumed run keeps the record of earlier extensions."""
    par = job.parallelism
    record = {"spec": job.spec, "set": list(job.overrides), "data": job.data.path, "device": device,
              "workers_per_node": nproc, "nnodes": par.nnodes, "max_tokens_per_worker": per_worker,
              "time_limit": job.checkpointing.time_limit, "timeout": par.timeout,
              "max_restarts": par.max_restarts, "init": job.checkpointing.init}
    earlier = read_run_record(out).get("extended")
    if earlier:
        record["extended"] = earlier
    files.write_atomically(out / RUN_RECORD, json.dumps(record, indent=2) + "\n")
