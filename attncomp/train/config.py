"""What each worker of a run is told (RunConfig, made from the Job by attncomp.train.run_job), and what
is made straight from it: the vocabulary and validation checks, and the optimiser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from attncomp.data.dataset import PreparedData
from attncomp.data.objective import objective_of
from attncomp.errors import DataError, UsageError
from attncomp.ir import nodes
from attncomp.ir.family import Described, ModelFacts, facts_of
from attncomp.vocab import DEFAULT, Specials


@dataclass
class RunConfig:
    factory: Callable  # factory(device) -> a model answering attncomp.protocol; picklable
    spec_text: str  # "" for a model factory's run
    spec_hash: str  # sha256 of the spec text (a model factory's run: of its recipe text)
    data: str
    out: str
    device: str = "cpu"  # "cuda" or "cpu"
    max_tokens_per_worker: int = 4096
    resume: bool = False
    compile: bool = False  # torch.compile each layer (regional compilation, attncomp.train.step.compiled)
    checkpoint_layers: bool = False  # recompute each layer's activations in the backward pass
    profile: bool = False
    log_every: int = 10
    log_interval: float = 60.0  # seconds between progress lines without a terminal (train.monitor)
    stop_at: int | None = None  # save and stop after this update (resume later with --resume)
    time_limit: float | None = None  # minutes: then save, average and finish as if the steps were done
    fused_loss: bool = True  # the output projection and the loss in chunks, without full logits
    fsdp: bool = False  # shard parameters, gradients and optimiser state across workers (FSDP2)
    timeout: float = 600.0  # seconds a collective may wait for a peer before the run stops
    init: str | None = None  # --init: a new run from these weights (a checkpoint, sharded one or safetensors export)
    # the model's facts with its recipe (None: the compiled model's spec, `described(model.spec)`)
    described: Described | None = None
    factory_name: str = ""  # a model factory's run: its name (module:function), stored in every checkpoint
    recipe_text: str = ""  # ... and its recipe's canonical text


def check_vocab(data: PreparedData, arch: nodes.ModelSpec | ModelFacts) -> None:
    """The data's vocabulary sizes must be those of the spec's model block (or of a factory's model)."""
    have = (data.vocab["src_size"], data.vocab["tgt_size"])
    arch = facts_of(arch)
    one_stack = arch.family.stacks == ("decoder",)  # a decoder-only model reads both sides with one vocabulary
    need = (arch.tgt_vocab, arch.tgt_vocab) if one_stack else (arch.src_vocab, arch.tgt_vocab)
    if one_stack and not data.vocab["shared"]:
        raise DataError(f"a decoder-only model reads source and target with one vocabulary, but {data.path} "
                        "has separate ones; prepare it without --separate-vocab")
    if have != need:
        try:
            roles = _declared(data.tokenizer("tgt").specials, arch.mask)
        except DataError:  # a damaged tokenizer: refused in its own words when training reads it
            roles = ""
        shown = f"shared({have[0]}{roles})" if data.vocab["shared"] else \
            f"separate(src = {have[0]}, tgt = {have[1]}{roles})"
        raise DataError(f"{data.path} has a vocabulary of {have[0]}{'' if have[0] == have[1] else ' + ' + str(have[1])}"
                        f" tokens but the spec's model expects {need[0]}"
                        f"{'' if need[0] == need[1] else ' + ' + str(need[1])}; prepare the data with that size, "
                        f'or train with --set "model.vocab={shown}"')


def check_tokenizer(data: PreparedData, spec) -> None:
    """The data's tokenizer must declare the spec's special ids (attncomp.vocab.agree), and the vocabulary the
    ids the objective needs (a <mask>, a <sep>): refused before a run directory is written or a worker starts."""
    objective_of(spec.model, data.monolingual).batcher_collate(spec, lambda: data.tokenizer("tgt"), data.path)


def _declared(specials: Specials, mask: int | None) -> str:
    """The arguments of a vocabulary that declares these special ids: the roles away from their defaults
    (the data's tokenizer's ids, which train then accepts: attncomp.vocab.agree), and its mask where it has one
    (BERT's), else the spec's own."""
    unset = {**DEFAULT.tokenizer_roles(), "start": specials.bos}
    ids = [(k, v) for k, v in specials.tokenizer_roles().items() if v != unset[k]]
    if specials.mask is not None:  # the tokenizer's <mask> (a vocabulary's unset mask is its sep's id)
        mask = None if specials.mask == specials.sep else specials.mask
    ids += [("mask", mask)] if mask is not None else []
    return "".join(f", {k} = {'none' if v is None else v}" for k, v in ids)


def check_validation(spec_train, data: PreparedData) -> None:
    """train.validation needs a valid split."""
    if spec_train.validation is not None and not data.has_split("valid"):
        raise UsageError(f"train.validation needs a valid split, but {data.path} has none (prepare it with --valid)")


def make_optimizer(spec_optimizer, params, cuda: bool) -> torch.optim.Optimizer:
    kind = torch.optim.AdamW if spec_optimizer.kind == "adamw" else torch.optim.Adam
    return kind(params, lr=1.0, betas=(spec_optimizer.beta1, spec_optimizer.beta2), eps=spec_optimizer.eps,
                weight_decay=spec_optimizer.weight_decay, fused=cuda or None)
