"""bench/variant.attn written by hand in plain PyTorch with FlexAttention: the peer of issue 45 item 4.

A decoder-only language model written from the papers' equations, importing nothing of attncomp's lowering
(it reads a spec's sizes only, through `Config.from_spec`), so that it is an independent reference:

- sandwich norms (Gemma 2): x + Norm'(Sublayer(Norm(x))) around attention and the feed-forward net, RMSNorm
  (Zhang & Sennrich 2019) x / sqrt(mean(x^2) + eps) * g; a final norm; the output tied to the embedding;
- per-head q/k norm (Qwen3, Gemma 3): an RMSNorm over each head's d_k of the queries and keys, before the rotary
  positions (RoFormer, Su et al. 2021, in the GPT-NeoX/Llama layout: dim i pairs with dim i + d_k / 2);
- attention through torch.nn.attention.flex_attention: the soft cap (Gemma 2) as its score_mod, s -> c tanh(s / c)
  after the scale 1/sqrt(d_k); a causal sliding window as its block mask (query i sees key j where
  0 <= i - j <= window: the window's keys and itself, as attncomp's `local(window)`), made once per length;
- sinks (gpt-oss): a learned logit z_h per head that joins every softmax's denominator and holds no value,
  w_ij = exp(s_ij) / (sum_k exp(s_ik) + exp(z_h)). FlexAttention's output o = sum_j softmax(s)_ij v_j and its
  log-sum-exp L = log sum_k exp(s_ik) give it: o * exp(L) / (exp(L) + exp(z_h)) = o * exp(L - logaddexp(L, z_h)).

`load_attncomp` copies a compiled attncomp model's state dict onto it (names mapped, q, k, v concatenated into the
one projection this model has).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
import torch.nn.attention.flex_attention as flex

try:  # PyTorch >= 2.9 asks for the log-sum-exp this way; return_lse is deprecated there
    from torch.nn.attention.flex_attention import AuxRequest
except ImportError:  # pragma: no cover - older PyTorch
    AuxRequest = None


@dataclass(frozen=True)
class Config:
    d_model: int = 512
    heads: int = 8
    layers: int = 6
    d_ff: int = 2048
    vocab: int = 32000
    window: int = 128
    softcap: float = 50.0
    eps: float = 1e-6
    rope_base: float = 10000.0
    max_len: int = 1024

    @classmethod
    def from_spec(cls, spec, max_len: int = 1024) -> "Config":
        """The sizes of a spec of bench/variant.attn's architecture (its widths may be overridden)."""
        m, stack = spec.model, spec.model.decoder
        attention = stack.attention
        return cls(stack.d_model, stack.heads, stack.layers, stack.d_ff, m.tgt_vocab, attention.window,
                   attention.softcap, m.norm_eps, m.positions.base, max_len)


def rope_table(length: int, dims: int, base: float, device=None) -> torch.Tensor:
    """(2, T, dims): cos and sin of position * base^(-2i/dims), each half repeated; in float64."""
    inv_freq = base ** -(torch.arange(0, dims, 2, dtype=torch.float64, device=device) / dims)
    angles = torch.outer(torch.arange(length, dtype=torch.float64, device=device), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return torch.stack((angles.cos(), angles.sin()))


def apply_rope(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """x (B, h, T, d) rotated: x cos + (-x2, x1) sin for the halves x1, x2 of d."""
    cos, sin = table[0, : x.shape[2]].to(x.dtype), table[1, : x.shape[2]].to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def sliding_window_mask(length: int, window: int, device) -> flex.BlockMask:
    """The causal sliding window as FlexAttention's block mask: query i sees key j when 0 <= i - j <= window."""
    def visible(b, h, i, j):
        return (i >= j) & (i - j <= window)

    return flex.create_block_mask(visible, None, None, length, length, device=device)


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.heads, self.d_k, self.cap = c.heads, c.d_model // c.heads, c.softcap
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model, bias=False)
        self.out = nn.Linear(c.d_model, c.d_model, bias=False)
        self.q_norm, self.k_norm = nn.RMSNorm(self.d_k, eps=c.eps), nn.RMSNorm(self.d_k, eps=c.eps)
        self.sinks = nn.Parameter(torch.zeros(c.heads))

    def forward(self, x: torch.Tensor, rope: torch.Tensor, mask: flex.BlockMask) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.d_k).permute(2, 0, 3, 1, 4)  # each (B, h, T, d_k)
        q, k = apply_rope(self.q_norm(q), rope), apply_rope(self.k_norm(k), rope)
        cap = self.cap

        def softcap(score, b, h, i, j):
            return torch.tanh(score / cap) * cap

        if AuxRequest is not None:
            o, aux = flex.flex_attention(q, k, v, score_mod=softcap, block_mask=mask, scale=self.d_k ** -0.5,
                                         return_aux=AuxRequest(lse=True))
            lse = aux.lse
        else:  # pragma: no cover
            o, lse = flex.flex_attention(q, k, v, score_mod=softcap, block_mask=mask, scale=self.d_k ** -0.5,
                                         return_lse=True)
        sink = self.sinks.to(lse.dtype).view(1, -1, 1)
        o = o * torch.exp(lse - torch.logaddexp(lse, sink)).unsqueeze(-1).to(o.dtype)  # the sink's share out
        return self.out(o.transpose(1, 2).reshape(b, t, d))


class Layer(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.attn = Attention(c)
        self.attn_in, self.attn_out = nn.RMSNorm(c.d_model, c.eps), nn.RMSNorm(c.d_model, c.eps)
        self.fc1, self.fc2 = nn.Linear(c.d_model, c.d_ff, bias=False), nn.Linear(c.d_ff, c.d_model, bias=False)
        self.ffn_in, self.ffn_out = nn.RMSNorm(c.d_model, c.eps), nn.RMSNorm(c.d_model, c.eps)

    def forward(self, x: torch.Tensor, rope: torch.Tensor, mask: flex.BlockMask) -> torch.Tensor:
        x = x + self.attn_out(self.attn(self.attn_in(x), rope, mask))
        return x + self.ffn_out(self.fc2(F.gelu(self.fc1(self.ffn_in(x)))))


class VariantLM(nn.Module):
    """tokens (B, T) -> logits (B, T, vocab)."""

    def __init__(self, c: Config):
        super().__init__()
        self.config = c
        self.embed = nn.Embedding(c.vocab, c.d_model)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.layers))
        self.norm = nn.RMSNorm(c.d_model, c.eps)
        # float64, sliced and cast where used (never .float() this model: the table would lose its precision)
        self.register_buffer("rope", rope_table(c.max_len, c.d_model // c.heads, c.rope_base), persistent=False)

    def block_mask(self, length: int) -> flex.BlockMask:
        """Made once per length, outside the compiled step, and passed to forward."""
        return sliding_window_mask(length, self.config.window, self.embed.weight.device)

    def forward(self, tokens: torch.Tensor, mask: flex.BlockMask | None = None) -> torch.Tensor:
        mask = self.block_mask(tokens.shape[1]) if mask is None else mask
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, self.rope, mask)
        return F.linear(self.norm(x), self.embed.weight)


def load_attncomp(model: VariantLM, state: dict[str, torch.Tensor]) -> VariantLM:
    """Copy an attncomp model's state dict (bench/variant.attn's names) onto `model`; every tensor is used."""
    mine, used = {"embed.weight": state["tgt_embed.weight"], "norm.weight": state["decoder.norm.weight"]}, set()
    names = {"attn.out.weight": "self_attn.o_proj.weight", "attn.q_norm.weight": "self_attn.q_norm.weight",
             "attn.k_norm.weight": "self_attn.k_norm.weight", "attn.sinks": "self_attn.sinks",
             "attn_in.weight": "self_attn_norm.weight", "attn_out.weight": "self_attn_output_norm.weight",
             "fc1.weight": "ffn.fc1.weight", "fc2.weight": "ffn.fc2.weight", "ffn_in.weight": "ffn_norm.weight",
             "ffn_out.weight": "ffn_output_norm.weight"}
    for n in range(len(model.layers)):
        theirs = f"decoder.layers.{n}."
        for name, their in names.items():
            mine[f"layers.{n}.{name}"] = state[theirs + their]
        mine[f"layers.{n}.attn.qkv.weight"] = torch.cat([state[f"{theirs}self_attn.{p}_proj.weight"] for p in "qkv"])
        used |= {theirs + their for their in names.values()} | {f"{theirs}self_attn.{p}_proj.weight" for p in "qkv"}
    left = set(state) - used - {"tgt_embed.weight", "decoder.norm.weight"}
    if left:
        raise ValueError(f"attncomp parameters with no place in the hand-written model: {sorted(left)}")
    model.load_state_dict(mine)
    return model


@contextlib.contextmanager
def cpu_backward():
    """Let FlexAttention's eager mode differentiate on the CPU. PyTorch refuses any CPU input that wants a
    gradient (`_validate_device`: Inductor's CPU kernel has no backward), but the eager mode's backward is its
    unfused math, device-independent; tests/bench/test_variant.py checks its gradients in float64."""
    guard = flex._validate_device
    flex._validate_device = lambda query, key, value: None
    try:
        yield
    finally:
        flex._validate_device = guard
