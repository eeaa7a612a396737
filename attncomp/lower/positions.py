"""Positions that act on the attention scores: ALiBi and relative position representations.

Both add a float bias to the scaled scores, before the bool mask (causal, padding, band) hides
keys; that is the one spelling, which fuse_attention turns into SDPA's float `attn_mask`,
`ops.additive_mask(bias, hidden)` (the bias with -inf where hidden):

    s = torch.mul(torch.matmul(q, torch.transpose(k, -2, -1)), 1/sqrt(d_k))
    s = torch.add(s, bias)
    s = torch.masked_fill(s, hidden, -inf)                 # where a mask hides keys

(The explicit graph keeps the masked_fill rather than adding -inf: masked_fill passes no gradient
to hidden scores, so a query that sees no key, whose softmax is NaN before the row fix sets it to
0, sends no NaN back; an added -inf would.)

- ALiBi (Press et al. 2022): bias = -m_h |i - j|, (h, Tq, Tk), made once per stack and entry point;
  in a decoder the causal mask leaves -m_h (i - j) for j <= i.
- Relative (Shaw et al. 2018, tensor2tensor's dot_product_attention_relative): per layer,
  bias = q_i . a^K_ij / sqrt(d_k), (B, h, Tq, Tk), a^K_ij = relative_k[clip(j - i, -k, k) + k]; with
  `values = true` the output adds sum_j w_ij a^V_ij, which SDPA cannot take (the attention stays explicit).

Only self-attention gets a bias: source and target positions do not line up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attncomp.ir import nodes
from attncomp.lower import ops
from attncomp.lower.layers import Builder, Node


@dataclass
class ScoreBias:
    """The positional terms of one stack's self-attentions in one entry point."""

    b: Builder
    positions: nodes.ALiBi | nodes.Relative
    d_k: int
    shared: Node | None = None  # ALiBi's bias, the same for every layer
    index: Node | None = None  # relative: (Tq, Tk) indices into the tables

    def logits(self, prefix: str, q: Node) -> Node:
        """The float bias on the scores of attention `prefix` with queries q (B, h, Tq, d_k)."""
        if self.shared is not None:
            return self.shared
        table = self.b.module(f"{prefix}.relative_k", self.index)  # (Tq, Tk, d_k)
        term = self.b.call(torch.einsum, "bhqd,qkd->bhqk", q, table)
        return self.b.call(torch.mul, term, 1.0 / math.sqrt(self.d_k))

    def values(self, prefix: str, weights: Node, out: Node) -> Node:
        """out + sum_j w_ij a^V_ij where the spec asks for the value term, else out."""
        if not (isinstance(self.positions, nodes.Relative) and self.positions.values):
            return out
        table = self.b.module(f"{prefix}.relative_v", self.index)  # (Tq, Tk, d_v)
        return self.b.add(out, self.b.call(torch.einsum, "bhqk,qkd->bhqd", weights, table))


def score_bias(b: Builder, model: nodes.Model, stack: nodes.Stack, like: Node, q_len: Node,
               k_len: Node) -> ScoreBias | None:
    """The self-attention bias of a stack whose queries are the last q_len of k_len positions; None for
    positions added to the embeddings. `like` gives device and dtype."""
    pos = model.positions
    if not isinstance(pos, (nodes.ALiBi, nodes.Relative)):
        return None
    device = b.call(getattr, like, "device")
    if isinstance(pos, nodes.ALiBi):
        bias = b.call(ops.alibi_bias, stack.heads, q_len, k_len, device, b.call(getattr, like, "dtype"))
        return ScoreBias(b, pos, stack.d_k, shared=bias)
    index = b.call(ops.relative_positions, q_len, k_len, pos.max_distance, device)
    return ScoreBias(b, pos, stack.d_k, index=index)


def adds_embeddings(model: nodes.Model) -> bool:
    """Whether the positions are added to the embeddings (sinusoidal, learned) rather than the scores."""
    return isinstance(model.positions, (nodes.Sinusoidal, nodes.Learned))
