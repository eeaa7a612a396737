"""`attncomp train --init CHECKPOINT`: a new run (step 0, a fresh optimiser and schedule) that starts from
the weights of a checkpoint file, a sharded checkpoint or a safetensors export.

The spec being trained must build the checkpoint's parameter names and shapes (its other keys, the
recipe, dropout, may differ), and the data must be tokenised by the checkpoint's sentencepiece
models: the embeddings were learned for those token ids. Both are checked before any worker starts.
"""

from __future__ import annotations

import torch

from torch import nn

from attncomp.checkpoint import read_trained
from attncomp.data.dataset import PreparedData
from attncomp.data.tokenizer import same_vocabulary
from attncomp.errors import TrainingError
from attncomp.train.state_dicts import load_initial

SHOWN = 4  # names listed per kind of difference


def _shapes(state: dict[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(t.shape) for name, t in state.items()}


def shape_differences(have: dict[str, tuple[int, ...]], need: dict[str, tuple[int, ...]]) -> list[str]:
    """What keeps weights `have` out of a model with parameters `need`: missing, unexpected, other shapes."""
    def listed(names: list[str]) -> str:
        return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")

    missing = sorted(set(need) - set(have))
    extra = sorted(set(have) - set(need))
    shapes = [f"{n} {list(have[n])} vs {list(need[n])}" for n in sorted(set(have) & set(need)) if have[n] != need[n]]
    parts = []
    if missing:
        parts.append(f"the model has {listed(missing)}, the checkpoint does not")
    if extra:
        parts.append(f"the checkpoint has {listed(extra)}, the model does not")
    if shapes:
        parts.append(f"shapes differ (checkpoint vs model): {listed(shapes)}")
    return parts


def meta_model(spec) -> nn.Module:
    """The spec's model, compiled with shapes only (the spec adapter: the one place here that compiles)."""
    from attncomp.compiler import compile_spec  # lazily: the runtime imports no compiler (issue 41)

    return compile_spec(spec, passes=(), device="meta")


def check_initial(spec, data: PreparedData, path: str, model: nn.Module | None = None) -> None:
    """One clear error unless the weights at `path` fit the model and the data's tokenizers are theirs. `spec`:
    a Spec (its model compiled with shapes only), or the model's facts with `model` (a model factory's run)."""
    found = read_trained(path, gathered=False)  # the weights only: a sharded one's optimiser stays unread
    model = meta_model(spec) if model is None else model
    differences = shape_differences(_shapes(found.model), _shapes(model.state_dict()))
    if differences:
        raise TrainingError(f"--init {path} does not fit the model of {spec.model.name}: {'; '.join(differences)}")
    sides = [side for side in ("src", "tgt")
             if not same_vocabulary(bytes(found.header.tokenizers[side].numpy()), data.tokenizer(side).model_bytes)]
    if sides:
        raise TrainingError(f"--init {path} was trained with other sentencepiece models than {data.path} "
                            f"({' and '.join(sides)} differ): its embeddings belong to its own token ids, so the data "
                            "must be tokenised with the checkpoint's models")


__all__ = ["check_initial", "load_initial", "shape_differences"]
