"""`attncomp train`, `attncomp average` and `attncomp consolidate`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attncomp import checkpoint as ckpt
from attncomp import files, train
from attncomp.cli.args import output_dir, output_file, positive_float, positive_float_at_most, positive_int
from attncomp.cli.spec_commands import add_overrides
from attncomp.errors import UsageError, printable
from attncomp.train import CheckpointOptions, DataOptions, Execution, Job, Logging, Parallelism

MAX_TIMEOUT = 7 * 24 * 3600  # seconds: a week; a collective's timeout is a timedelta, which 1e300 overflows


def _job(args: argparse.Namespace) -> Job:
    """The command's options as a Job (attncomp.train.job): everything else is the library's."""
    if args.node_rank is not None:
        raise UsageError("--node-rank is not used: the c10d rendezvous assigns each machine's rank (see "
                         "docs/training.md); give every machine the same --nnodes, --rdzv-endpoint and --rdzv-id")
    if (args.spec is None) == (args.model is None):
        raise UsageError("give a spec, or --model module:function (a model factory) with --recipe FILE, not both"
                         if args.spec is not None else "give a spec, or --model module:function with --recipe FILE")
    if args.recipe is not None and args.model is None:
        raise UsageError("--recipe goes with --model (a model factory); a spec has its own train block")
    return Job(
        spec=args.spec, model=args.model, recipe=args.recipe, overrides=tuple(args.overrides), force=args.force,
        data=DataOptions(path=str(args.data), max_tokens_per_worker=args.max_tokens_per_gpu),
        parallelism=Parallelism(gpus=args.gpus, procs=args.procs, fsdp=args.fsdp, nnodes=args.nnodes,
                                rdzv_endpoint=args.rdzv_endpoint, rdzv_id=args.rdzv_id,
                                max_restarts=args.max_restarts, timeout=args.timeout),
        checkpointing=CheckpointOptions(out=args.out, resume=args.resume, init=args.init, stop_at=args.stop_at,
                                        time_limit=args.time_limit),
        logging=Logging(log_every=args.log_every, log_interval=args.log_interval, profile=args.profile),
        execution=Execution(compile=args.compile, checkpoint_layers=args.checkpoint_layers,
                            fused_loss=not args.plain_loss),
    )


def _train(args: argparse.Namespace) -> int:
    train.run(_job(args))
    return 0


def _average(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.checkpoints]
    if args.last < 1:
        raise UsageError(f"--last must be at least 1, not {args.last}")
    warn = None
    if len(paths) == 1 and paths[0].is_dir() and not ckpt.is_checkpoint_dir(paths[0]):
        warn = _warn  # in a run directory, an unreadable checkpoint is skipped and named
        paths = ckpt.last_readable(paths[0], args.last, warn=warn)
        if not paths:
            raise UsageError(f"{args.checkpoints[0]} has no readable checkpoints")
    averaged = ckpt.average(paths, warn=warn)
    _write(ckpt.save, averaged, Path(args.output))
    print(f"averaged {len(averaged.header.averaged)} checkpoint(s) into {printable(args.output)}", file=sys.stderr)
    return 0


def _consolidate(args: argparse.Namespace) -> int:
    source = Path(args.source)
    try:
        is_dir = source.is_dir()
    except (OSError, ValueError) as err:  # a name too long, a NUL byte
        raise UsageError(f"cannot read {files.shown_path(source)}: {getattr(err, 'strerror', None) or err}") from None
    if is_dir and not ckpt.is_checkpoint_dir(source):  # a run directory: its newest checkpoint
        found = ckpt.latest_readable(source, warn=_warn)
        if found is None:
            raise UsageError(f"{source} has no readable checkpoints")
        source = found.path
    whole = ckpt.read(source)
    _write(ckpt.save, whole, Path(args.output))
    print(f"wrote {printable(str(source))} as one file {printable(args.output)} (step {whole.header.step}, {whole.header.kind})",
          file=sys.stderr)
    return 0


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _write(save, checkpoint, path: Path) -> None:
    """Save, or one clear line when the output cannot be written there."""
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: {path.parent} is not a directory")
    if path.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    try:
        save(checkpoint, path)
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror or err}") from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a spec on prepared data, on CPU workers, GPUs or several machines")
    p.add_argument("spec", metavar="SPEC", nargs="?")
    p.add_argument("--model", metavar="MODULE:FUNCTION",
                   help="train the nn.Module this function makes instead of a spec's (module:function or "
                        "FILE.py:function; docs/training.md, \"Any model\")")
    p.add_argument("--recipe", metavar="FILE", help="with --model: a file of a spec's train and decode blocks")
    p.add_argument("--data", required=True, metavar="DIR", help="a directory made by `attncomp data`")
    p.add_argument("--out", type=output_dir, metavar="DIR", help="run directory (default runs/<model name>)")
    p.add_argument("--gpus", type=positive_int, help="GPU workers on this machine (NCCL)")
    p.add_argument("--procs", type=positive_int,
                   help="CPU workers on this machine (gloo), for testing distributed runs")
    p.add_argument("--max-tokens-per-gpu", type=positive_int, metavar="N",
                   help="padded tokens per micro-batch per worker (default 32768 on GPU, 4096 on CPU); "
                        "gradient accumulation makes up the spec's tokens per update")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    p.add_argument("--init", metavar="CHECKPOINT",
                   help="start a new run (step 0, fresh optimiser and schedule) from the weights of a checkpoint, "
                        "sharded checkpoint or safetensors export; with --resume, the run's own newest checkpoint "
                        "wins once it has one")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile each layer of the optimised model (compiled once per layer kind)")
    p.add_argument("--checkpoint-layers", action="store_true",
                   help="recompute each layer's activations in the backward pass instead of keeping them "
                        "(less memory, about one more forward pass of time)")
    p.add_argument("--force", action="store_true",
                   help="train even when the float32 parameters exceed the limit (4 GiB; see docs/compiler.md)")
    p.add_argument("--fsdp", action="store_true",
                   help="shard parameters, gradients and optimiser state across workers (FSDP2) instead of DDP")
    p.add_argument("--profile", action="store_true", help="write torch.profiler traces to OUT/profile")
    p.add_argument("--plain-loss", action="store_true",
                   help="materialise the logits for the loss (default: projection and loss fused in chunks)")
    p.add_argument("--log-every", type=positive_int, default=10, metavar="N",
                   help="TensorBoard scalars every N steps (default 10); the host reads the loss only then")
    p.add_argument("--log-interval", type=positive_float, default=60.0, metavar="SECONDS",
                   help="without a terminal (a cluster log): one progress line at most this often, at the "
                        "first multiple of --log-every after it (default 60)")
    p.add_argument("--time-limit", type=positive_float, metavar="MINUTES",
                   help="train for at most this long, then save, average and finish")
    p.add_argument("--stop-at", type=positive_int, metavar="STEP",
                   help="save and stop after update STEP (a job with a time limit); continue with --resume")
    p.add_argument("--nnodes", type=int, default=1, help="number of machines (the same on all)")
    p.add_argument("--node-rank", type=int, help=argparse.SUPPRESS)  # refused: the rendezvous assigns ranks
    p.add_argument("--rdzv-endpoint", metavar="HOST:PORT",
                   help="the c10d rendezvous: HOST:PORT of any one machine of the run, the same on all")
    p.add_argument("--rdzv-id", help="a run id shared by all machines")
    p.add_argument("--timeout", type=positive_float_at_most(MAX_TIMEOUT, "seconds"), default=600.0, metavar="SECONDS",
                   help="how long a collective waits for a frozen or lost worker before the run stops "
                        "(default 600; must exceed the time to save a checkpoint)")
    p.add_argument("--max-restarts", type=int, default=0, metavar="N",
                   help="restart the workers up to N times after a failure, from the last checkpoint")
    add_overrides(p)
    p.set_defaults(handler=_train)

    p = sub.add_parser("average", help="average checkpoints (files, or the last K of a run directory)")
    p.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT")
    p.add_argument("-o", "--output", type=output_file, required=True, metavar="FILE")
    p.add_argument("--last", type=positive_int, default=5, metavar="K",
                   help="with a run directory: the last K readable checkpoints (default 5)")
    p.set_defaults(handler=_average)

    p = sub.add_parser("consolidate", help="write a checkpoint (a sharded --fsdp one, or a run's newest) as one file")
    p.add_argument("source", metavar="RUN_OR_CHECKPOINT")
    p.add_argument("-o", "--output", required=True, metavar="FILE")
    p.set_defaults(handler=_consolidate)
