"""What the runtime asks of a model: the protocol through which training, evaluation and decoding see it (issue 41).

A compiled spec (attncomp.lower.program.CompiledModel) answers it, and so does the standalone module that
`attncomp build` writes for a spec (generated/); a hand-written nn.Module that answers it trains with
`attncomp.train.run` through a model factory (docs/training.md). The runtime never reads a spec's model block
and never imports the compiler: what kind of model it is, it asks the IR's family table by `family`.

    family                 "encoder-decoder", "decoder-only" or "encoder-only": a row of attncomp.ir.family's
                           table (the batch's tensors, the objective, how decoding reads a source)
    loss_inputs            the batch's tensors, by name, that `hidden` reads (("src", "tgt_in"), ("tokens",),
                           and "segments" last for a model with segment embeddings: None where a batch has none;
                           "prefix" last for a prefix LM, `mask = prefix`: each row's prefix length (B,))
    d_model                the width the schedule's warm-up reads (noam: d_model^-0.5)
    hidden(*inputs)        the states before the output projection, (B, T, d)
    hidden_dense(*inputs)  optional: the same without a source padding mask (a batch without padding)
    output_projection()    (weight (V, d), bias (V,) or None): logits = hidden @ weight.T + bias
    logit_scale            the logit transform after the projection: logits * scale, then soft-capped,
    logit_softcap          cap * tanh(logits / cap) (attncomp.logits), where the cap is not None
    aux_loss(batch)        optional: the auxiliary losses recorded during the forward passes since the last
                           call, weighted, per target token (a mixture of experts' load balancing), or None;
                           aux_loss(None) forgets what was recorded and returns None
    encode, init_cache, decode_step   decoding, as the family's entry points (attncomp.ir.family)

Optional too: `checkpoint_layers(on)` and `layer_lists()` (what --checkpoint-layers and --compile act on), and,
for a model a factory makes (attncomp.train.factory.describe; a compiled model's spec says them), `src_vocab`,
`segments`, `max_positions` and `specials`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from attncomp.errors import UsageError

REQUIRED = ("family", "loss_inputs", "d_model", "hidden", "output_projection", "logit_scale", "logit_softcap")


@runtime_checkable
class TrainableModel(Protocol):
    family: str
    loss_inputs: tuple[str, ...]
    d_model: int
    logit_scale: float
    logit_softcap: float | None

    def hidden(self, *inputs: Any) -> Tensor: ...

    def output_projection(self) -> tuple[Tensor, Tensor | None]: ...


def check(model: Any, origin: str) -> None:
    """One clear line unless `model` answers the protocol (made by `origin`, a model factory)."""
    missing = [name for name in REQUIRED if not hasattr(model, name)]
    if missing:
        raise UsageError(f"{origin} made a {type(model).__name__}, which does not answer the runtime's model protocol "
                         f"(attncomp.protocol): it lacks {', '.join(missing)}")
