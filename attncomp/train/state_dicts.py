"""A run's training state in and out of checkpoints: model and optimiser state dicts (whole, or under
FSDP each worker's shards for DCP) and the RNG states of every worker. The checkpoint's fields are
attncomp.checkpoint's business; this module only produces and consumes the tensors.
"""

from __future__ import annotations

import random

import torch
import torch.distributed as dist

from attncomp import checkpoint as ckpt
from attncomp.errors import TrainingError


def rng_states(device: torch.device, cuda: bool, world: int) -> list[dict]:
    """Every worker's RNG states, gathered (a collective with several workers)."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "cuda": torch.cuda.get_rng_state(device) if cuda else None}
    if not dist.is_initialized():
        return [state]
    gathered: list = [None] * world
    dist.all_gather_object(gathered, state)
    return gathered


def set_rng_state(state: dict, device: torch.device, cuda: bool) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if cuda and state["cuda"] is not None:
        torch.cuda.set_rng_state(state["cuda"], device)


def for_checkpoint(model: torch.nn.Module, optimizer: torch.optim.Optimizer, fsdp: bool) -> dict[str, dict]:
    """{"model", "optimizer"}: whole and on the CPU (a single-file checkpoint), or under FSDP this worker's
    shards for DCP (a collective)."""
    if not fsdp:
        return {"model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                "optimizer": optimizer.state_dict()}
    return by_name(model, optimizer)


def by_name(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, dict]:
    """The model and optimiser state dicts keyed by parameter name (sharded under FSDP, whole otherwise);
    the optimiser's state is created if no update was made yet, so DCP can load into it."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    return {"model": get_model_state_dict(model), "optimizer": get_optimizer_state_dict(model, optimizer)}


def load(model: torch.nn.Module, optimizer: torch.optim.Optimizer, fsdp: bool, found: ckpt.Checkpoint) -> None:
    """Model and optimiser state from a checkpoint; a sharded one reshards to this run's workers, and a
    single file written with or without FSDP loads into either."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions, set_model_state_dict, set_optimizer_state_dict,
    )

    if found.header.sharded:
        states = by_name(model, optimizer)
        ckpt.sharded.load_into(found.path, states)
        set_model_state_dict(model, states["model"])
        set_optimizer_state_dict(model, optimizer, states["optimizer"])
        return
    whole = ckpt.load(found.path)  # the weights, checked
    by_index = all(isinstance(p, int) for g in whole.optimizer["param_groups"] for p in g["params"])
    if not fsdp and by_index:  # written by a DDP or single-worker run
        model.load_state_dict(whole.model)
        optimizer.load_state_dict(whole.optimizer)
        return
    if by_index:
        raise TrainingError(f"{found.path} was written without --fsdp; resume it without --fsdp")
    options = StateDictOptions(full_state_dict=True)  # a consolidated or version-1 FSDP checkpoint
    set_model_state_dict(model, whole.model, options=options)
    set_optimizer_state_dict(model, optimizer, whole.optimizer, options=options)


def load_initial(model: torch.nn.Module, path: str) -> None:
    """`--init`: the weights at `path` into `model` (checked by attncomp.train.warm_start.check_initial before the
    workers started)."""
    model.load_state_dict(ckpt.read_trained(path, gathered=False).model)
