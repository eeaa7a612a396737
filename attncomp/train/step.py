"""TrainStep: a model and its loss as one module — what DDP wraps and --compile compiles.

It sees the model through its protocol (attncomp.protocol), never its spec: it runs the model's `hidden` entry point (or `hidden_dense` for a micro-batch without source
padding, so every attention can use the flash kernel) and the fused projection + cross-entropy of
attncomp.train.loss, which never materialises the logits; `fused_loss=False` uses the plain one.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from attncomp.train.loss import linear_cross_entropy, logit_map, token_losses


class TrainStep(nn.Module):
    """`through_forward` (FSDP): call the model's own forward, whose hooks gather sharded parameters;
    it returns logits, so the plain loss is used."""

    def __init__(self, model: nn.Module, smoothing: float, fused_loss: bool = True, chunk: int = 8192,
                 through_forward: bool = False, max_tokens: int | None = None):
        super().__init__()
        self.model = model
        self.smoothing, self.fused_loss, self.chunk = smoothing, fused_loss, chunk
        # with a bound on a micro-batch's tokens, the loss runs in a fixed number of chunks (see `compiled`)
        self.pieces = None if max_tokens is None else max(1, -(-max_tokens // chunk))
        # the `hidden` entry point's inputs by name (attncomp.data.batching's keys are the family's input names)
        self.inputs = tuple(model.loss_inputs)
        self.dense = hasattr(model, "hidden_dense")  # a mask-free graph for batches without source padding
        self.through_forward = through_forward

    def _inputs(self, batch: dict[str, torch.Tensor]) -> tuple:
        """The entry point's arguments; a model with segment embeddings also reads the batch's `segments`
        (None, segment 0 everywhere, where the batch has none)."""
        return tuple(batch.get(name) if name == "segments" else batch[name] for name in self.inputs)

    def forward(self, batch: dict[str, torch.Tensor], dense: bool = False) -> torch.Tensor:
        """[smoothed loss, NLL, target tokens] summed over the batch; where the model records auxiliary losses
        (a mixture of experts' load balancing: its protocol's `aux_loss`), the smoothed loss adds them per
        target token."""
        aux_loss = getattr(self.model, "aux_loss", None)
        if aux_loss is None:
            return self._losses(batch, dense)
        aux_loss(None)  # forget what earlier passes recorded (decoding, another step)
        losses = self._losses(batch, dense)
        balance = aux_loss(batch)
        if balance is None:
            return losses
        return torch.stack((losses[0] + balance * losses[2], losses[1], losses[2]))

    def _losses(self, batch: dict[str, torch.Tensor], dense: bool) -> torch.Tensor:
        m = self.model
        if self.through_forward:
            return token_losses(m(*self._inputs(batch)), batch["tgt_out"], self.smoothing)
        hidden = (m.hidden_dense if dense and self.dense else m.hidden)(*self._inputs(batch))
        (weight, bias), target = m.output_projection(), batch["tgt_out"]
        scale, softcap = m.logit_scale, m.logit_softcap  # the model's logit transform applies to the loss's logits
        if self.fused_loss:
            hidden, weight = with_bias(hidden, weight, bias)
            return linear_cross_entropy(hidden.flatten(0, 1), weight, target.flatten(), self.smoothing, self.chunk,
                                        self.pieces, scale, softcap)
        return token_losses(logit_map(F.linear(hidden, weight, bias), scale, softcap), target, self.smoothing)


def with_bias(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> tuple:
    """h W^T + b as [h, 1] [W, b]^T, so the fused loss (which has no bias) trains the bias too."""
    if bias is None:
        return hidden, weight
    ones = hidden.new_ones(hidden.shape[:-1] + (1,))
    return torch.cat((hidden, ones), -1), torch.cat((weight, bias.unsqueeze(-1).to(weight.dtype)), -1)


def compiled(step: nn.Module, backend: str | Callable = "inductor", regional: bool = True) -> Callable[..., torch.Tensor]:
    """torch.compile for batches whose shapes change from update to update (the runner's): sentences and
    lengths are dynamic from the first call, so a new shape reuses the compiled graphs instead of
    compiling again.

    `regional` (the runner's --compile): each layer is compiled, not the whole step — the layers of a
    stack share one body, so it is compiled once per layer kind and reused by every layer (dynamo
    caches by code), and the first update waits for a few small graphs rather than one of the whole
    model; embeddings, positions and the fused loss stay eager. Otherwise the whole step (`step`, a
    TrainStep or the DDP around it) is one compiled graph: give the TrainStep a `max_tokens`, so that the
    fused loss's chunk loop does not depend on the shape either.

    Inductor's mix-order reduction (layer norm's backward) decides by the size of the batch, which adds
    a guard on it and another graph for small batches; its non-strict mode fuses whatever the size."""
    import torch._inductor.config as inductor

    options = None
    if backend == "inductor" and hasattr(inductor.triton, "mix_order_reduction_non_strict_mode"):
        options = {"triton.mix_order_reduction_non_strict_mode": True}
    if not regional:
        return torch.compile(step, dynamic=True, backend=backend, options=options)
    model = getattr(step, "module", step).model  # DDP(TrainStep) or TrainStep
    for layers in model.layer_lists() if hasattr(model, "layer_lists") else ():
        for layer in layers:
            layer.compile(dynamic=True, backend=backend, options=options)
    return step
