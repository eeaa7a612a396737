"""The load-balancing loss of a mixture of experts' routers (Switch Transformer, Fedus et al. 2022, eqs. 4-6;
transformers' `load_balancing_loss_func`, which Mixtral and Qwen2-MoE add times `router_aux_loss_coef`):

    loss = E * sum_e f_e * P_e

over the tokens of every layer's router together: f_e is the share of the (token, slot) choices of the top_k
that pick expert e, P_e the mean router probability of e. Balanced routing gives top_k; it grows as the
router favours some experts. The spec's `moe(aux_loss = c)` is c.

A compiled model's mixtures of experts record their routers' logits during forward (`Routers`), grouped by
(stack, experts, top_k, aux_loss), and the model answers c * loss per target token through its protocol
(attncomp.protocol's `aux_loss`), which the training step adds to the training loss, leaving the NLL (and so
the perplexity) alone."""

from __future__ import annotations

import re
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from attncomp.ir import nodes
from attncomp.vocab import IGNORE


def load_balancing_loss(logits: Sequence[torch.Tensor], experts: int, top_k: int,
                        mask: torch.Tensor | None = None) -> torch.Tensor:
    """E * sum_e f_e P_e over the (tokens, experts) router logits of every layer; `mask` (the tokens' shape,
    True where real) leaves padding out, as transformers' attention_mask does. In at least float32."""
    dtype = torch.promote_types(logits[0].dtype, torch.float32)
    counts = logits[0].new_zeros(experts, dtype=dtype)
    probs = logits[0].new_zeros(experts, dtype=dtype)
    rows = logits[0].new_zeros((), dtype=dtype)
    weight = None if mask is None else mask.reshape(-1, 1).to(dtype)
    for layer in logits:
        p = F.softmax(layer.to(dtype), dim=-1)
        chosen = F.one_hot(torch.topk(p, top_k, dim=-1).indices, experts).to(dtype).sum(1)  # (tokens, E)
        if weight is not None:
            p, chosen = p * weight, chosen * weight
        counts, probs = counts + chosen.sum(0), probs + p.sum(0)
        rows = rows + (p.shape[0] if weight is None else weight.sum())
    return experts * torch.sum((counts / rows) * (probs / rows))


class Routers:
    """The routers of a compiled model's mixtures of experts with `aux_loss` > 0, each hooked so that a forward
    records its logits. Empty (`bool(routers)` false) where no mixture has an aux_loss."""

    def __init__(self, model: nn.Module):
        arch = model.spec.model
        self.specials = arch.specials
        self.groups: dict[tuple, list[torch.Tensor]] = {}
        for name in ("encoder", "decoder"):
            stack = getattr(arch, name)
            if stack is None:
                continue
            for i, (_, layer) in enumerate(stack.layer_plan()):
                moe = layer.ffn
                if not isinstance(moe, nodes.MoE) or moe.aux_loss == 0:
                    continue
                key = (name, moe.experts, moe.top_k, moe.aux_loss)
                recorded = self.groups.setdefault(key, [])
                for member, child in model.get_submodule(f"{name}.layers.{i}").named_children():
                    if re.fullmatch(r"ffn(_\d+)?", member):
                        child.router.register_forward_hook(
                            lambda module, inputs, output, into=recorded: into.append(output))

    def __bool__(self) -> bool:
        return bool(self.groups)

    def clear(self) -> None:
        for recorded in self.groups.values():
            recorded.clear()

    def _mask(self, stack: str, batch: dict) -> torch.Tensor | None:
        if stack == "decoder":
            return batch["tgt_out"] != IGNORE
        return None if self.specials.pad is None else batch["src"] != self.specials.pad

    def loss(self, batch: dict | None) -> torch.Tensor | None:
        """The weighted loss of what was recorded since the last call (None without groups, or with `batch`
        None: what was recorded is forgotten)."""
        if not self.groups or batch is None:
            self.clear()
            return None
        total = 0.0
        for (stack, experts, top_k, coefficient), recorded in self.groups.items():
            if recorded:
                total = total + coefficient * load_balancing_loss(recorded, experts, top_k, self._mask(stack, batch))
        self.clear()
        return total
