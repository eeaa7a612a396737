"""The loops over a stack's layers. A stack's graph calls one of these where it runs its layers, so
each layer kind is lowered, optimised and compiled once; codegen prints them as `for` loops.

`layers.checkpoint` (set by the runner's `--checkpoint-layers`) recomputes each layer's activations
in the backward pass instead of keeping them (torch.utils.checkpoint, non-reentrant).
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint


def each_layer(layers: nn.ModuleList, x: Tensor, *inputs) -> Tensor:
    """x through every layer: x = layer(x, *inputs)."""
    recompute = getattr(layers, "checkpoint", False) and layers.training
    for layer in layers:
        x = checkpoint(layer, x, *inputs, use_reentrant=False) if recompute else layer(x, *inputs)
    return x


def each_layer_step(layers: nn.ModuleList, x: Tensor, caches: tuple, *inputs) -> tuple[Tensor, tuple]:
    """One decoding step through every layer, each with its own cache: (x, the layers' new caches)."""
    new = []
    for layer, cache in zip(layers, caches):
        x, cache = layer.step(x, cache, *inputs)
        new.append(cache)
    return x, tuple(new)


def each_layer_cache(layers: nn.ModuleList, *inputs) -> tuple:
    """Every layer's cache before the first decoding step."""
    return tuple(layer.init_cache(*inputs) for layer in layers)


LOOPS = (each_layer, each_layer_step, each_layer_cache)
