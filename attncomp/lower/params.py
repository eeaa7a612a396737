"""The module tree that owns a model's parameters, with canonical, stable state-dict names.

    embed.weight                         tie = all: source = target embedding = output projection
    src_embed.weight, tgt_embed.weight   otherwise, one per side that exists
    output.weight                        the pre-softmax linear, unless tied
    encoder.pos.weight                   learned positions (likewise decoder.pos)
    *.self_attn.relative_k.weight        relative positions: a^K, (2 max_distance + 1, d_k); relative_v: a^V
    encoder.layers.N.self_attn.{q,k,v,o}_proj.weight (.bias per bias.q/k/v/o; additive adds .energy)
    encoder.layers.N.self_attn_norm, .ffn.fc1, .ffn.fc2 (.bias per bias.fc1/fc2), .ffn_norm
    decoder.layers.N.cross_attn.*, .cross_attn_norm             decoder only
    .ffn.gate (.bias per bias.fc1)       a gated feed-forward (swiglu, geglu): fc2(act(gate(x)) * fc1(x))
    encoder.norm, decoder.norm           the final norm of a stack with final_norm (pre-norm by default)
    encoder.embed_norm                   the stack's norm on embeddings + positions (embedding_norm; likewise decoder)
    head.dense, head.norm                the prediction-head transform (head = dense(...))
    output_bias                          the pre-softmax projection's bias (bias.output), tied or not

Norms are nn.LayerNorm (weight, bias) or, with normalization = rmsnorm, nn.RMSNorm (weight only).
With kv_heads < heads, k_proj and v_proj are kv_heads * d_k (d_v) wide.

Passes never add or rename parameters, so one state dict loads into the unfused graph, the fused
graph and the generated module alike.
"""

from __future__ import annotations

import torch
from torch import nn

from attncomp.ir import nodes


def embedding(rows: int, dim: int) -> nn.Embedding:
    """nn.Embedding; on the meta device without its default N(0, 1) fill, which on meta runs a Python
    decomposition that imports torch._dynamo (seconds, once per process) to fill nothing."""
    if torch.get_default_device().type == "meta":
        return nn.Embedding(rows, dim, _weight=torch.empty(rows, dim))
    return nn.Embedding(rows, dim)


def norm(stack: nodes.Stack, eps: float) -> nn.Module:
    """The stack's normalisation: LayerNorm (Ba et al. 2016), or RMSNorm (Zhang & Sennrich 2019)."""
    if stack.normalization == "rmsnorm":
        return nn.RMSNorm(stack.d_model, eps=eps)
    return nn.LayerNorm(stack.d_model, eps=eps)


class Attention(nn.Module):
    def __init__(self, d_q: int, d_kv: int, heads: int, d_k: int, d_v: int, kind: str, bias: nodes.Bias,
                 kv_heads: int | None = None):
        super().__init__()
        kv_heads = heads if kv_heads is None else kv_heads
        self.q_proj = nn.Linear(d_q, heads * d_k, bias=bias.of("q"))
        self.k_proj = nn.Linear(d_kv, kv_heads * d_k, bias=bias.of("k"))
        self.v_proj = nn.Linear(d_kv, kv_heads * d_v, bias=bias.of("v"))
        self.o_proj = nn.Linear(heads * d_v, d_q, bias=bias.of("o"))
        if kind == "additive":
            self.energy = nn.Parameter(torch.empty(heads, d_k))  # v_a of Bahdanau et al., one per head


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, bias: nodes.Bias, gated: bool = False):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff, bias=bias.of("fc1"))  # gated: the "up" projection W_up
        self.fc2 = nn.Linear(d_ff, d_model, bias=bias.of("fc2"))
        if gated:
            self.gate = nn.Linear(d_model, d_ff, bias=bias.of("fc1"))  # W_gate, whose activation gates fc1


class Layer(nn.Module):
    def __init__(self, stack: nodes.Stack, d_memory: int | None, bias: nodes.Bias, eps: float):
        super().__init__()
        d = stack.d_model
        self.self_attn = Attention(d, d, stack.heads, stack.d_k, stack.d_v, stack.attention.kind, bias,
                                   stack.key_value_heads)
        self.self_attn_norm = norm(stack, eps)
        if d_memory is not None:
            kind = stack.cross_attention.kind  # type: ignore[attr-defined]
            self.cross_attn = Attention(d, d_memory, stack.heads, stack.d_k, stack.d_v, kind, bias,
                                        stack.key_value_heads)
            self.cross_attn_norm = norm(stack, eps)
        self.ffn = FeedForward(d, stack.d_ff, bias, stack.gated)
        self.ffn_norm = norm(stack, eps)


class Stack(nn.Module):
    def __init__(self, stack: nodes.Stack, positions, d_memory: int | None, bias: nodes.Bias, eps: float,
                 embedding_norm: bool = False):
        super().__init__()
        if isinstance(positions, nodes.Learned):
            self.pos = embedding(positions.max_len, stack.d_model)
        if embedding_norm:
            self.embed_norm = norm(stack, eps)
        self.layers = nn.ModuleList(Layer(stack, d_memory, bias, eps) for _ in range(stack.layers))
        if isinstance(positions, nodes.Relative):
            for layer in self.layers:
                add_relative_tables(layer.self_attn, positions, stack)
        if stack.final_norm:
            self.norm = norm(stack, eps)


class Head(nn.Module):
    """BERT's prediction-head transform: dense, activation, LayerNorm."""

    def __init__(self, d_model: int, head: nodes.DenseHead, eps: float):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model, bias=head.bias)
        self.norm = nn.LayerNorm(d_model, eps=eps)


class Parameters(nn.Module):
    """All parameters of a model; the lowered graphs reach them by their dotted names."""

    def __init__(self, model: nodes.Model):
        super().__init__()
        enc, dec = model.encoder, model.decoder
        if model.tie == "all":
            self.embed = embedding(model.tgt_vocab, model.d_model)
        else:
            if enc is not None:
                self.src_embed = embedding(model.src_vocab, enc.d_model)
            if dec is not None:
                self.tgt_embed = embedding(model.tgt_vocab, dec.d_model)
        if model.tie == "none":
            self.output = nn.Linear(model.d_model, model.tgt_vocab, bias=False)
        if model.bias.output:
            self.output_bias = nn.Parameter(torch.empty(model.tgt_vocab))
        if isinstance(model.head, nodes.DenseHead):
            self.head = Head(model.d_model, model.head, model.norm_eps)
        if enc is not None:
            self.encoder = Stack(enc, model.positions, None, model.bias, model.norm_eps, model.embedding_norm)
        if dec is not None:
            d_memory = enc.d_model if enc is not None else None
            self.decoder = Stack(dec, model.positions, d_memory, model.bias, model.norm_eps, model.embedding_norm)


def add_relative_tables(attention: nn.Module, positions: nodes.Relative, stack: nodes.Stack) -> None:
    """Shaw et al.'s a^K (and a^V) of one self-attention: a vector per clipped distance -k..k, shared by its heads."""
    rows = 2 * positions.max_distance + 1
    attention.relative_k = embedding(rows, stack.d_k)
    if positions.values:
        attention.relative_v = embedding(rows, stack.d_v)


def embedding_names(model: nodes.Model) -> dict[str, str]:
    """Which module embeds the source, embeds the target, and projects to the vocabulary."""
    if model.tie == "all":
        return {"src": "embed", "tgt": "embed", "output": "embed"}
    names = {"src": "src_embed", "tgt": "tgt_embed", "output": "output"}
    if model.tie == "decoder":
        names["output"] = "tgt_embed"
    if model.tie == "encoder":
        names["output"] = "src_embed"
    if model.decoder is None:  # encoder-only: the output reads the encoder
        names["tgt"] = names["src"]
    return names


@torch.no_grad()
def initialise(params: nn.Module, seed: int) -> None:
    """Xavier-uniform projections, N(0, 1/d) embeddings, zero biases; deterministic for a seed."""
    if any(p.is_meta for p in params.parameters()):
        return  # shapes only (FLOP counting, very large models): nothing to fill
    gen = torch.Generator(device="cpu").manual_seed(seed)
    for module in params.modules():
        if isinstance(module, nn.Linear):
            module.weight.copy_(nn.init.xavier_uniform_(torch.empty_like(module.weight, device="cpu"), generator=gen))
            if module.bias is not None:
                module.bias.zero_()
        elif isinstance(module, nn.Embedding):
            std = module.embedding_dim**-0.5
            module.weight.copy_(nn.init.normal_(torch.empty_like(module.weight, device="cpu"), 0.0, std, generator=gen))
        elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            module.reset_parameters()
        if isinstance(module, Parameters) and hasattr(module, "output_bias"):
            module.output_bias.zero_()
        if isinstance(module, Attention) and hasattr(module, "energy"):
            std = module.energy.shape[1] ** -0.5
            module.energy.copy_(nn.init.normal_(torch.empty_like(module.energy, device="cpu"), 0.0, std, generator=gen))
