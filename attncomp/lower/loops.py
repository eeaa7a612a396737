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
               x_weights: Tensor | None = None, x0_weights: Tensor | None = None,
               value_residual: bool = False) -> Tensor:
    """x through every layer: x = layer(x, *inputs); with connections across layers (U-net skips, the re-injected
    input), each layer's input joined first (ops.joined); with value residuals, each layer reads the first
    layer's values and hands them on, x, first_v = layer(x, *inputs, first_v)."""
    recompute = getattr(layers, "checkpoint", False) and layers.training
    joins = unet is not None or x_weights is not None
    x0, outputs, first_v = x, [], None
    for i, layer in enumerate(layers):
        if joins:
            x = ops.joined(i, len(layers), x, x0, outputs, unet, x_weights, x0_weights)
        args = (x, *inputs, first_v) if value_residual else (x, *inputs)
        x = checkpoint(layer, *args, use_reentrant=False) if recompute else layer(*args)
        if value_residual:
            x, first_v = x
        outputs.append(x)
    return x


def each_layer_step(layers: nn.ModuleList, x: Tensor, caches: tuple, *inputs, unet: Tensor | None = None,
                    x_weights: Tensor | None = None, x0_weights: Tensor | None = None,
                    value_residual: bool = False) -> tuple[Tensor, tuple]:
    """One decoding step through every layer, each with its own cache: (x, the layers' new caches); the
    connections across layers join the new position's inputs as in `each_layer` and the first layer's values
    of the new position go to the layers after (none of them needs more cache)."""
    joins = unet is not None or x_weights is not None
    x0, outputs, new, first_v = x, [], [], None
    for i, (layer, cache) in enumerate(zip(layers, caches)):
        if joins:
            x = ops.joined(i, len(layers), x, x0, outputs, unet, x_weights, x0_weights)
        if value_residual:
            x, cache, first_v = layer.step(x, cache, *inputs, first_v)
        else:
            x, cache = layer.step(x, cache, *inputs)
        outputs.append(x)
        new.append(cache)
    return x, tuple(new)


def each_layer_cache(layers: nn.ModuleList, *inputs) -> tuple:
    """Every layer's cache before the first decoding step."""
    return tuple(layer.init_cache(*inputs) for layer in layers)


LOOPS = (each_layer, each_layer_step, each_layer_cache)
