"""`train.precision = float8`: bf16 autocast with the matrix products of the linear layers in float8, through
torchao's float8 training (`torchao.float8.convert_to_float8_training`, tensorwise dynamic scaling, as
torchtitan uses it).

torchao is the `float8` extra (`pip install 'attncomp[float8]'`), imported only here and only when a run asks for
float8. Float8 matrix products need a CUDA GPU of compute capability 8.9 or more (Ada, Hopper and later);
anywhere else a run is refused, unless ATTNCOMP_FLOAT8_EMULATE=1 asks torchao to emulate them
(`Float8LinearConfig(emulate=True)`: the same casts to float8 and scales, the products in the input's
precision). Emulation is a testing aid, so that the runner's float8 path runs on a CPU; it is slower, never faster.

Which layers convert (torchtitan's `filter_fqns` idea, decided by what the module is rather than by a name): an
`nn.Linear` whose in and out features are both multiples of 16 (what the float8 kernels need); not the output
projection (its weight is what the model's protocol answers to `output_projection()`, read by the fused loss,
or shared with the embedding); not a linear layer inside `nn.MultiheadAttention`, whose forward reads its
`out_proj` weight itself instead of calling the layer. A converted layer keeps its parameters' names, so a
checkpoint of a float8 run loads where float8 is off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from dataclasses import dataclass

import torch
from torch import nn

from attncomp.errors import UsageError
from attncomp.optional import require

EMULATE = "ATTNCOMP_FLOAT8_EMULATE"  # "1": torchao emulates the float8 products (a testing aid, see above)


def emulated() -> bool:
    return os.environ.get(EMULATE) == "1"


@contextlib.contextmanager
def _quiet_import():
    """torchao's import warns about its own CUDA extensions it cannot load on a CPU build, and torch about an enum
    torchao registers; the float8 training path uses neither, so a run's log does not show them."""
    loggers = [logging.getLogger(name) for name in ("torchao", "torch.utils._pytree")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def torchao_float8():
    """torchao.float8, or one line saying how to install it (a UsageError: exit 2)."""
    with _quiet_import():
        return require("torchao.float8", "train.precision = float8", extra="float8")


def check_device(device: str) -> None:
    """Refuse float8 where its matrix products do not run (one line, exit 2), unless emulation is asked for."""
    if emulated():
        return
    if device != "cuda":
        raise UsageError(f"train.precision = float8 needs a CUDA GPU of compute capability 8.9 or more; this run is "
                         f"on the CPU (set {EMULATE}=1 to emulate float8, a testing aid: slower, not faster)")
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < (8, 9):
        raise UsageError(f"train.precision = float8 needs a CUDA GPU of compute capability 8.9 or more; "
                         f"{torch.cuda.get_device_name()} is {major}.{minor} (set {EMULATE}=1 to emulate float8, "
                         "a testing aid: slower, not faster)")


@dataclass(frozen=True)
class Conversion:
    converted: tuple[str, ...]  # the converted layers' names
    skipped: tuple[tuple[str, str], ...]  # (name, why) of each linear layer left as it was
    in_projections: int = 0  # nn.MultiheadAttention's fused q, k, v projections: parameters, not linear layers

    def summary(self) -> str:
        """The run log's line: how many linear layers converted, and which were skipped and why."""
        total = len(self.converted) + len(self.skipped)
        line = f"float8{' (emulated)' if emulated() else ''}: {len(self.converted)} of {total} linear layers converted"
        if self.skipped:
            reasons: dict[str, dict[str, int]] = {}  # why -> {name, with each layer index as *: how many}
            for name, why in self.skipped:
                shape = re.sub(r"\.\d+(?=\.|$)", ".*", name)
                counts = reasons.setdefault(why, {})
                counts[shape] = counts.get(shape, 0) + 1
            line += "; skipped: " + "; ".join(
                ", ".join(shape if n == 1 else f"{shape} (x{n})" for shape, n in shapes.items()) + f" ({why})"
                for why, shapes in reasons.items())
        if self.in_projections:
            line += (f"; {self.in_projections} nn.MultiheadAttention in-projection(s) not converted "
                     "(a parameter, not a linear layer)")
        return line


def skip_reason(module: nn.Linear, name: str, output_weight: torch.Tensor | None, inside_mha: set[str]) -> str:
    """Why this linear layer stays as it is ("" to convert it)."""
    if output_weight is not None and module.weight is output_weight:
        return "the output projection"
    if name in inside_mha:
        return "read by nn.MultiheadAttention, not called"
    if module.in_features % 16 or module.out_features % 16:
        return "features not multiples of 16"
    return ""


def convert(model: nn.Module) -> Conversion:
    """Swap the model's convertible linear layers for torchao's Float8Linear, in place (before DDP, FSDP and
    torch.compile wrap it); the parameters keep their names."""
    float8 = torchao_float8()
    projection = getattr(model, "output_projection", None)
    output_weight = projection()[0] if projection is not None else None
    attentions = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.MultiheadAttention)]
    inside_mha = {f"{name}.{child}" if name else child for name, mha in attentions for child, _ in mha.named_children()}
    converted, skipped = [], []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            why = skip_reason(module, name, output_weight, inside_mha)
            if why:
                skipped.append((name, why))
            else:
                converted.append(name)
    chosen = set(converted)
    float8.convert_to_float8_training(model, module_filter_fn=lambda _, fqn: fqn in chosen,
                                      config=float8.Float8LinearConfig(emulate=emulated()))
    return Conversion(tuple(converted), tuple(skipped), len(attentions))
