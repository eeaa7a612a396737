"""A model factory: a job names an importable function that makes the model, instead of a spec.

    attncomp train --model mymodels:make --recipe recipe.attn --data data/sample
    attncomp train --model generated/examples/tiny.py:Model --recipe recipe.attn --data data/sample

The name is `module:function` (the module imported as `python -m` would, the working directory first on the
path) or `FILE.py:function` (the file loaded by its path). Every worker process calls the function, with no
arguments, after seeding torch with the recipe's seed (so `--procs`, `--gpus` and restarts work), and moves
the model to its device; `attncomp.train.run` calls it once first on the host, where a name that does not
resolve, a module that does not import, a function that raises or returns something other than an
`nn.Module` answering the model protocol (attncomp.protocol) is refused in one line (a UsageError, exit 2).

What the runtime needs beyond the protocol (`describe`) the model may answer with attributes of its own:
`src_vocab` (default: the output projection's rows), `segments` (0), `max_positions` (a learned position
table's rows; None: any length) and `specials` (an attncomp.vocab.Specials; default attncomp's own ids).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from attncomp import checkpoint as ckpt
from attncomp import ir, protocol
from attncomp.errors import UsageError, printable
from attncomp.ir.family import FAMILIES, Described, ModelFacts, named
from attncomp.vocab import DEFAULT, Specials

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _gist(err: BaseException) -> str:
    text = (str(err).strip().splitlines() or [""])[0][:200]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _module(where: str, shown: str):
    """The module a factory name points at: a file by its path, or a module by its dotted name."""
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise UsageError(f"--model {shown}: no file {printable(where)}")
        name = "attncomp_factory_" + re.sub(r"\W", "_", str(path.resolve()))
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as err:  # a syntax error, an import that fails, code that raises or exits
            del sys.modules[name]
            raise UsageError(f"--model {shown}: loading {printable(where)} raised {_gist(err)}") from None
        return module
    if not _NAME.fullmatch(where):
        raise UsageError(f"--model {shown}: {printable(where)} is neither a module name nor a .py file")
    if os.getcwd() not in sys.path:  # as `python -m` imports: the working directory first
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as err:
        if where == err.name or where.startswith(f"{err.name}."):  # the module itself (or its package) is not there
            raise UsageError(f"--model {shown}: cannot import {where} ({_gist(err)})") from None
        raise UsageError(f"--model {shown}: importing {where} raised {_gist(err)}") from None
    except (Exception, SystemExit) as err:
        raise UsageError(f"--model {shown}: importing {where} raised {_gist(err)}") from None


def resolve(name: str) -> Callable[[], nn.Module]:
    """The function a factory name (`module:function`, `FILE.py:function`) names; one UsageError line if none."""
    shown = printable(name)
    where, colon, function = name.rpartition(":")
    if not colon or not where or not function:
        raise UsageError(f"--model {shown}: name the factory as module:function or FILE.py:function")
    if not function.isidentifier():
        raise UsageError(f"--model {shown}: {printable(function)} is not a Python name")
    module = _module(where, shown)
    found = getattr(module, function, None)
    if found is None:
        raise UsageError(f"--model {shown}: {printable(where)} has no {function}")
    if not callable(found):
        raise UsageError(f"--model {shown}: {function} is a {type(found).__name__}, not a function")
    return found


def make(name: str) -> nn.Module:
    """Call the factory named `name`: its model, checked against the runtime's protocol (one line otherwise)."""
    function, shown = resolve(name), printable(name)
    try:
        model = function()
    except (Exception, SystemExit) as err:  # the user's code: whatever it raises is one line, never a traceback
        raise UsageError(f"the model factory {shown} raised {_gist(err)}") from None
    if not isinstance(model, nn.Module):
        raise UsageError(f"the model factory {shown} returned a {type(model).__name__}, not a torch.nn.Module")
    protocol.check(model, f"the model factory {shown}")
    if model.family not in {f.name for f in FAMILIES}:
        raise UsageError(f"the model factory {shown} made a model of family {printable(str(model.family))}; "
                         f"the runtime knows {', '.join(f.name for f in FAMILIES)}")
    return model


@dataclass(frozen=True)
class ModelFactory:
    """What a worker calls to make its model (picklable: the factory's name and the recipe's seed)."""

    name: str
    seed: int

    def __call__(self, device: torch.device | str | None = None) -> nn.Module:
        torch.manual_seed(self.seed)  # the same initial weights in every worker and after every restart
        model = make(self.name)
        return model if device is None else model.to(device)


def describe(model: nn.Module, name: str) -> ModelFacts:
    """The facts the runtime reads of a factory's model (attncomp.ir.family.ModelFacts), from its protocol and
    its optional attributes (this module's docstring)."""
    weight, _ = model.output_projection()
    specials = getattr(model, "specials", DEFAULT)
    if not isinstance(specials, Specials):
        raise UsageError(f"the model factory {printable(name)} made a model whose `specials` is a "
                         f"{type(specials).__name__}, not an attncomp.vocab.Specials")
    rows = int(weight.shape[0])
    return ModelFacts(name=printable(name), family=named(model.family), src_vocab=int(getattr(model, "src_vocab", rows)),
                      tgt_vocab=rows, specials=specials, segments=int(getattr(model, "segments", 0)),
                      max_positions=getattr(model, "max_positions", None),
                      prefix="prefix" in model.loss_inputs)  # a prefix LM's hidden reads the rows' prefix lengths


def load_trained(path: str | Path, factory: str, device: torch.device | str = "cpu") -> tuple[nn.Module, Described]:
    """The model of a model factory's checkpoint, its trained weights loaded, with its facts and recipe: what
    decoding (attncomp.decode.translate.Translator, `described=`) reads. The caller names the factory, which
    must be the one the checkpoint records: a checkpoint never chooses what code is imported. A spec's
    checkpoint is refused (attncomp.load reads those)."""
    found = ckpt.read_trained(path)
    shown = printable(str(path))
    if not found.header.factory:
        raise UsageError(f"{shown} was trained from a spec, not a model factory: attncomp.load reads it")
    if found.header.factory != factory:
        raise UsageError(f"{shown} was trained from the model factory {printable(found.header.factory)}, "
                         f"not {printable(factory)}")
    recipe = ir.load_recipe(found.header.recipe)
    model = ModelFactory(factory, recipe.train.seed)()
    model.load_state_dict(found.model)
    facts = describe(model, factory)
    return model.to(device).eval(), Described(facts, recipe.train, recipe.decode)
