"""A naive hand-written Transformer (explicit softmax attention), the first peer in the throughput table.

Written the way a tutorial writes it (the Annotated Transformer): separate q, k, v projections,
masked_fill, softmax, dropout, matmul; post-norm; embeddings scaled by sqrt(d_model) plus sinusoids;
output tied to the shared embedding. Same parameters and dropout as the spec.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attncomp.ir import nodes
from attncomp.vocab import PAD


class MultiHeadAttention(nn.Module):
    def __init__(self, d: int, heads: int, d_k: int, d_v: int, p: float):
        super().__init__()
        self.h, self.d_k, self.d_v, self.p = heads, d_k, d_v, p
        self.q, self.k = nn.Linear(d, heads * d_k), nn.Linear(d, heads * d_k)
        self.v, self.o = nn.Linear(d, heads * d_v), nn.Linear(heads * d_v, d)

    def forward(self, x, memory, mask):  # mask: True = hidden, broadcastable to (B, h, Tq, Tk)
        b, tq, tk = x.shape[0], x.shape[1], memory.shape[1]
        q = self.q(x).view(b, tq, self.h, self.d_k).transpose(1, 2)
        k = self.k(memory).view(b, tk, self.h, self.d_k).transpose(1, 2)
        v = self.v(memory).view(b, tk, self.h, self.d_v).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = F.dropout(scores.softmax(dim=-1), self.p, self.training)
        return self.o((weights @ v).transpose(1, 2).reshape(b, tq, self.h * self.d_v))


class Layer(nn.Module):
    def __init__(self, stack: nodes.Stack, p: float, cross: bool):
        super().__init__()
        d = stack.d_model
        self.self_attn = MultiHeadAttention(d, stack.heads, stack.d_k, stack.d_v, 0.0)
        self.cross_attn = MultiHeadAttention(d, stack.heads, stack.d_k, stack.d_v, 0.0) if cross else None
        self.ff1, self.ff2 = nn.Linear(d, stack.d_ff), nn.Linear(stack.d_ff, d)
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(3 if cross else 2))
        self.p = p

    def forward(self, x, mask, memory=None, memory_mask=None):
        drop = lambda y: F.dropout(y, self.p, self.training)  # noqa: E731
        x = self.norms[0](x + drop(self.self_attn(x, x, mask)))
        if self.cross_attn is not None:
            x = self.norms[1](x + drop(self.cross_attn(x, memory, memory_mask)))
        return self.norms[-1](x + drop(self.ff2(F.relu(self.ff1(x)))))


class NaiveTransformer(nn.Module):
    def __init__(self, spec: nodes.Spec):
        super().__init__()
        m = spec.model
        self.spec, self.d, self.p = spec, m.d_model, m.dropout.residual
        self.embed = nn.Embedding(m.tgt_vocab, m.d_model)
        self.encoder = nn.ModuleList(Layer(m.encoder, self.p, False) for _ in range(m.encoder.layers))
        self.decoder = nn.ModuleList(Layer(m.decoder, self.p, True) for _ in range(m.decoder.layers))

    def _embed(self, tokens):
        t = tokens.shape[1]
        pos = torch.arange(t, device=tokens.device, dtype=torch.float32).unsqueeze(1)
        div = torch.exp(torch.arange(0, self.d, 2, device=tokens.device, dtype=torch.float32)
                        * (-math.log(10000.0) / self.d))
        pe = torch.zeros(t, self.d, device=tokens.device)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        return F.dropout(self.embed(tokens) * math.sqrt(self.d) + pe, self.p, self.training)

    def forward(self, src, tgt_in):
        src_mask = (src == PAD)[:, None, None, :]
        t = tgt_in.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=src.device).triu(1)
        memory = self._embed(src)
        for layer in self.encoder:
            memory = layer(memory, src_mask)
        x = self._embed(tgt_in)
        for layer in self.decoder:
            x = layer(x, causal, memory, src_mask)
        return x @ self.embed.weight.T
