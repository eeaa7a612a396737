"""The loops over a stack's layers. A stack's graph calls one of these where it runs its layers, so
each layer kind is lowered, optimised and compiled once; codegen prints them as `for` loops.

`layers.checkpoint` (set by the runner's `--checkpoint-layers`) recomputes each layer's activations
in the backward pass instead of keeping them (torch.utils.checkpoint, non-reentrant).
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from attncomp.lower import ops


def each_layer(layers: nn.ModuleList, x: Tensor, *inputs, unet: Tensor | None = None,
               x_weights: Tensor | None = None, x0_weights: Tensor | None = None) -> Tensor:
    """x through every layer: x = layer(x, *inputs); with connections across layers (U-net skips, the re-injected
    input), each layer's input joined first (ops.joined)."""
    recompute = getattr(layers, "checkpoint", False) and layers.training
    joins = unet is not None or x_weights is not None
    x0, outputs = x, []
    for i, layer in enumerate(layers):
        if joins:
            x = ops.joined(i, len(layers), x, x0, outputs, unet, x_weights, x0_weights)
        x = checkpoint(layer, x, *inputs, use_reentrant=False) if recompute else layer(x, *inputs)
        outputs.append(x)
    return x


def each_layer_step(layers: nn.ModuleList, x: Tensor, caches: tuple, *inputs, unet: Tensor | None = None,
                    x_weights: Tensor | None = None, x0_weights: Tensor | None = None) -> tuple[Tensor, tuple]:
    """One decoding step through every layer, each with its own cache: (x, the layers' new caches); the
    connections across layers join the new position's inputs as in `each_layer` (they need no cache)."""
    joins = unet is not None or x_weights is not None
    x0, outputs, new = x, [], []
    for i, (layer, cache) in enumerate(zip(layers, caches)):
        if joins:
            x = ops.joined(i, len(layers), x, x0, outputs, unet, x_weights, x0_weights)
        x, cache = layer.step(x, cache, *inputs)
        outputs.append(x)
        new.append(cache)
    return x, tuple(new)


def each_layer_cache(layers: nn.ModuleList, *inputs) -> tuple:
    """Every layer's cache before the first decoding step."""
    return tuple(layer.init_cache(*inputs) for layer in layers)


LOOPS = (each_layer, each_layer_step, each_layer_cache)
