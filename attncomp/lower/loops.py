"""The loops over a stack's layers. A stack's graph calls one of these where it runs its layers, so
each layer kind is lowered, optimised and compiled once; codegen prints them as `for` loops.

With `share` (nodes.Stack.parameter_sets) `layers` holds one module per parameter set and `share[i]` is
the set layer i runs: layer i is `layers[share[i]]`; without it, layer i is `layers[i]`.

`layers.checkpoint` (set by the runner's `--checkpoint-layers`) recomputes each layer's activations
in the backward pass instead of keeping them (torch.utils.checkpoint, non-reentrant).
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from attncomp.lower import ops


def per_layer(layers, share: tuple[int, ...] | None) -> list:
    """The stack's layers in order, one per layer (a parameter set's module once per layer that uses it)."""
    return list(layers) if share is None else [layers[s] for s in share]


def each_layer(layers: nn.ModuleList, x: Tensor, *inputs, unet: Tensor | None = None,
               x_weights: Tensor | None = None, x0_weights: Tensor | None = None,
               value_residual: bool = False, share: tuple[int, ...] | None = None,
               share_kv: int | None = None, depth_lambda: bool = False) -> Tensor:
    """x through every layer: x = layer(x, *inputs); with connections across layers (U-net skips, the re-injected
    input), each layer's input joined first (ops.joined); with value residuals, each layer reads the first
    layer's values and hands them on, x, first_v = layer(x, *inputs, first_v); with `share_kv = N`, layer i with
    i % N == 0 hands on its keys and values, x, k, v = layer(x, *inputs), and the next N - 1 read them,
    x = layer(x, *inputs, k, v)."""
    recompute = getattr(layers, "checkpoint", False) and layers.training
    joins = unet is not None or x_weights is not None
    x0, outputs, first_v, stack, kv = x, [], None, per_layer(layers, share), ()
    for i, layer in enumerate(stack):
        if joins:
            x = ops.joined(i, len(stack), x, x0, outputs, unet, x_weights, x0_weights)
        reads = share_kv is not None and i % share_kv != 0
        own = (*inputs, ops.lambda_init(i)) if depth_lambda else inputs
        args = (x, *own, first_v) if value_residual else (x, *own, *kv) if reads else (x, *own)
        x = checkpoint(layer, *args, use_reentrant=False) if recompute else layer(*args)
        if value_residual:
            x, first_v = x
        elif share_kv is not None and not reads:
            x, *kv = x
        outputs.append(x)
    return x


def each_layer_step(layers: nn.ModuleList, x: Tensor, caches: tuple, *inputs, unet: Tensor | None = None,
                    x_weights: Tensor | None = None, x0_weights: Tensor | None = None,
                    value_residual: bool = False, share: tuple[int, ...] | None = None,
                    share_kv: int | None = None, depth_lambda: bool = False) -> tuple[Tensor, tuple]:
    """One decoding step through every layer, each with its own cache: (x, the layers' new caches); the
    connections across layers join the new position's inputs as in `each_layer` and the first layer's values
    of the new position go to the layers after (none of them needs more cache). With `share_kv`, a layer that
    reads keys and values steps with those its computing layer's new cache holds (its own cache holds none); with
    `depth_lambda`, each layer reads its depth's lambda_init after the inputs, as in `each_layer`."""
    joins = unet is not None or x_weights is not None
    x0, outputs, new, first_v, stack, kv = x, [], [], None, per_layer(layers, share), ()
    for i, (layer, cache) in enumerate(zip(stack, caches)):
        if joins:
            x = ops.joined(i, len(stack), x, x0, outputs, unet, x_weights, x0_weights)
        own = (*inputs, ops.lambda_init(i)) if depth_lambda else inputs
        if value_residual:
            x, cache, first_v = layer.step(x, cache, *own, first_v)
        elif share_kv is not None and i % share_kv != 0:
            x, cache = layer.step(x, cache, *own, *kv)
        else:
            x, cache = layer.step(x, cache, *own)
            kv = cache.self_attn
        outputs.append(x)
        new.append(cache)
    return x, tuple(new)


def each_layer_cache(layers: nn.ModuleList, *inputs, share: tuple[int, ...] | None = None) -> tuple:
    """Every layer's cache before the first decoding step (one per layer, shared parameters or not)."""
    return tuple(layer.init_cache(*inputs) for layer in per_layer(layers, share))


LOOPS = (each_layer, each_layer_step, each_layer_cache)
