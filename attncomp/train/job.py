"""A training job: everything `attncomp.train.run` is told, as plain data (no callables), so a job can be
written as JSON, read back, sent to another process or stored beside the run.

The command line (`attncomp train`) only parses its options into a Job; a sweep makes one per row.
Each field is the option of the same name (`--max-tokens-per-gpu` is `data.max_tokens_per_worker`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from attncomp.errors import UsageError


class _Plain(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataOptions(_Plain):
    path: str  # a directory made by `attncomp data`
    max_tokens_per_worker: int | None = Field(None, ge=1)  # padded tokens per micro-batch (None: 32768 GPU, 4096 CPU)


class Parallelism(_Plain):
    gpus: int | None = Field(None, ge=1)  # GPU workers on this machine (NCCL)
    procs: int | None = Field(None, ge=1)  # or CPU workers (gloo); neither: one GPU if there is one, else one CPU
    fsdp: bool = False  # shard parameters, gradients and optimiser state (FSDP2) instead of DDP
    nnodes: int = 1  # machines; with more than one, rdzv_endpoint (HOST:PORT of any one of them)
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None  # the same on every machine of one run
    max_restarts: int = 0  # restarts of the worker group after a failure, from the last checkpoint
    timeout: float = 600.0  # seconds a collective waits for a frozen or lost worker


class CheckpointOptions(_Plain):
    out: str | None = None  # the run directory (None: runs/<model name>)
    resume: bool = False  # continue from the newest checkpoint in `out` (rules: attncomp.train.run_state)
    init: str | None = None  # a new run from these weights (checkpoint, sharded checkpoint or safetensors export)
    stop_at: int | None = Field(None, ge=1)  # save and stop after this update; continue with resume
    time_limit: float | None = Field(None, gt=0)  # minutes: then save, average and finish


class Logging(_Plain):
    log_every: int = Field(10, ge=1)  # TensorBoard scalars (and the host's read of the loss) every N updates
    log_interval: float = Field(60.0, gt=0)  # seconds between progress lines without a terminal
    profile: bool = False  # torch.profiler traces in OUT/profile


class Execution(_Plain):
    compile: bool = False  # torch.compile each layer kind once (regional compilation)
    checkpoint_layers: bool = False  # recompute each layer's activations in the backward pass
    fused_loss: bool = True  # the output projection and the loss in chunks, without the full logits


class Job(_Plain):
    """One training run: the spec (a file, with `key=value` overrides), its data, where and how it runs.
    Instead of a spec, `model` may name a model factory (`module:function` or `FILE.py:function`:
    attncomp.train.factory) with its `recipe`, a file of a spec's train and decode blocks (the overrides then
    apply to it; None: the defaults)."""

    spec: str | None = None
    model: str | None = None
    recipe: str | None = None
    overrides: tuple[str, ...] = ()
    data: DataOptions
    parallelism: Parallelism = Parallelism()
    checkpointing: CheckpointOptions = CheckpointOptions()
    logging: Logging = Logging()
    execution: Execution = Execution()
    force: bool = False  # train even when the float32 parameters exceed the size limit


def devices(parallelism: Parallelism, cuda_devices: int) -> tuple[str, int]:
    """("cuda" or "cpu", workers on this machine) for a machine with `cuda_devices` GPUs."""
    if parallelism.gpus is not None and parallelism.procs is not None:
        raise UsageError("give --gpus or --procs, not both")
    if parallelism.gpus is not None:
        if parallelism.gpus > cuda_devices:
            raise UsageError(f"asked for {parallelism.gpus} GPU(s); this machine has {cuda_devices}" +
                             ("" if cuda_devices else " (use --procs N for CPU workers)"))
        return "cuda", parallelism.gpus
    if parallelism.procs is not None:
        return "cpu", parallelism.procs
    return ("cuda", 1) if cuda_devices else ("cpu", 1)
