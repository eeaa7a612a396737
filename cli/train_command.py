"""`attncomp train` and `attncomp average`."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from attncomp import ir
from attncomp.cli.args import output_dir, output_file, positive_float, positive_int
from attncomp.cli.spec_commands import add_overrides
from attncomp.errors import UsageError


def _devices(args: argparse.Namespace) -> tuple[str, int]:
    import torch

    if args.gpus is not None and args.procs is not None:
        raise UsageError("give --gpus or --procs, not both")
    if args.gpus is not None:
        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if args.gpus < 1 or args.gpus > have:
            raise UsageError(f"asked for {args.gpus} GPU(s); this machine has {have}" +
                             ("" if have else " (use --procs N for CPU workers)"))
        return "cuda", args.gpus
    if args.procs is not None:
        if args.procs < 1:
            raise UsageError("--procs must be at least 1")
        return "cpu", args.procs
    return ("cuda", 1) if torch.cuda.is_available() else ("cpu", 1)


def _train(args: argparse.Namespace) -> int:
    from attncomp.compiler import model_factory
    from attncomp.data.dataset import PreparedData
    from attncomp.train import checkpoint as ckpt
    from attncomp.train.launch import Nodes, launch
    from attncomp.train.runner import RunConfig, check_vocab, worker

    spec = ir.load(args.spec, args.overrides)
    device, nproc = _devices(args)
    if args.fsdp and nproc * args.nnodes < 2:
        raise UsageError("--fsdp shards the model across workers: it needs at least 2 (--gpus N or --procs N)")
    check_vocab(PreparedData(args.data), spec.model)  # fail here, before any worker starts
    out = Path(args.out or Path("runs") / spec.model.name)
    if ckpt.listed(out) and not args.resume:
        raise UsageError(f"{out} already has checkpoints; continue with --resume, or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    text = ir.to_text(spec)
    (out / "spec.attn").write_text(text)
    per_worker = args.max_tokens_per_gpu or (32768 if device == "cuda" else 4096)
    cfg = RunConfig(factory=functools.partial(model_factory, spec), spec_text=text, spec_hash=ir.spec_hash(spec),
                    data=str(args.data), out=str(out), device=device, max_tokens_per_worker=per_worker,
                    resume=args.resume, compile=args.compile, profile=args.profile, log_every=args.log_every,
                    log_interval=args.log_interval,
                    stop_at=args.stop_at, time_limit=args.time_limit, fused_loss=not args.plain_loss,
                    fsdp=args.fsdp)
    (out / "run.json").write_text(json.dumps({"spec": args.spec, "set": args.overrides, "data": str(args.data),
                                              "device": device, "workers_per_node": nproc, "nnodes": args.nnodes,
                                              "max_tokens_per_worker": per_worker}, indent=2) + "\n")
    print(f"training {spec.model.name} on {nproc * args.nnodes} {'GPU' if device == 'cuda' else 'CPU'} worker(s) "
          f"-> {out}", file=sys.stderr)
    launch(worker, (cfg,), nproc, out, Nodes(args.nnodes, args.node_rank, args.rdzv_endpoint, args.rdzv_id))
    average = out / ckpt.AVERAGE
    print(f"done: {average if average.exists() else out}", file=sys.stderr)
    return 0


def _average(args: argparse.Namespace) -> int:
    from attncomp.train import checkpoint as ckpt

    paths = [Path(p) for p in args.checkpoints]
    if len(paths) == 1 and paths[0].is_dir():
        found = [p for _, p in ckpt.listed(paths[0])]
        if not found:
            raise UsageError(f"{paths[0]} has no checkpoints")
        paths = found[-args.last:]
    averaged = ckpt.average(paths)
    ckpt.save(averaged, Path(args.output))
    print(f"averaged {len(paths)} checkpoint(s) into {args.output}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a spec on prepared data, on CPU workers, GPUs or several machines")
    p.add_argument("spec", metavar="SPEC")
    p.add_argument("--data", required=True, metavar="DIR", help="a directory made by `attncomp data`")
    p.add_argument("--out", type=output_dir, metavar="DIR", help="run directory (default runs/<model name>)")
    p.add_argument("--gpus", type=positive_int, help="GPU workers on this machine (NCCL)")
    p.add_argument("--procs", type=positive_int,
                   help="CPU workers on this machine (gloo), for testing distributed runs")
    p.add_argument("--max-tokens-per-gpu", type=positive_int, metavar="N",
                   help="padded tokens per micro-batch per worker (default 32768 on GPU, 4096 on CPU); "
                        "gradient accumulation makes up the spec's tokens per update")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    p.add_argument("--compile", action="store_true", help="torch.compile the optimised model")
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
    p.add_argument("--nnodes", type=int, default=1, help="torchrun: number of machines")
    p.add_argument("--node-rank", type=int, default=0, help="torchrun: this machine's rank")
    p.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="torchrun: rendezvous address (machine 0)")
    p.add_argument("--rdzv-id", help="torchrun: a run id shared by all machines")
    add_overrides(p)
    p.set_defaults(handler=_train)

    p = sub.add_parser("average", help="average checkpoints (files, or the last K of a run directory)")
    p.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT")
    p.add_argument("-o", "--output", type=output_file, required=True, metavar="FILE")
    p.add_argument("--last", type=positive_int, default=5, metavar="K",
                   help="with a run directory: how many (default 5)")
    p.set_defaults(handler=_average)
