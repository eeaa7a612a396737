"""Encoder and decoder stacks, and the entry points built from them, as fx graphs.

Entry points (all share one set of parameters):

    encoder-decoder   forward(src, tgt_in) -> logits (B, T, V)     encode(src) -> memory (B, S, d)
                      init_cache(src, memory) -> cache              decode_step(tokens, cache) -> (logits, cache)
    decoder-only      forward(tokens) -> logits                     init_cache(tokens), decode_step(tokens, cache)
    encoder-only      forward(src) -> logits (one distribution per position)   encode(src)

and for training: hidden(...) -> the states before the output projection (after the head
transform, if any; the arguments of forward), and hidden_dense(src, tgt_in), the same without a
source padding mask, for batches that have no padding, so every attention can use the flash kernel.

Key/value caches are (B, kv_heads, T, d), keys already rotated where positions are rotary.
A cache is a flat tuple: for an encoder-decoder, (source mask, then per decoder layer: self-attention
keys, values, cross-attention keys, values); for a decoder-only model, per layer: keys, values.
Cross-attention keys and values are projected once, in init_cache. decode_step takes the newest
token (B, 1) and returns the logits of the next (B, V).

Padding is on the right. A decoder query at a real position i sees keys 0..i, all real, so decoder
self-attention needs only the causal mask; source padding is masked wherever the source is a key.
"""

from __future__ import annotations

import operator
from functools import partial
from typing import Callable

import torch
from torch import fx

from attncomp.ir import nodes
from attncomp.lower import ops
from attncomp.lower.layers import (
    Builder, Node, attend, attention, embed, feed_forward, head, merge_heads, project_kv, project_out,
    repeat_kv, rope_table, split_heads, sublayer,
)
from attncomp.lower.params import embedding_names
from attncomp.lower.positions import ScoreBias, score_bias


def self_attention_mask(b: Builder, stack: nodes.Stack, tokens: Node, pad_mask: Node | None,
                        causal: bool) -> tuple[Node | None, Node | None]:
    """(mask, fully-masked rows) for self-attention over `tokens`."""
    length = lambda: b.method("size", tokens, 1)  # noqa: E731 - emitted only where a mask needs it
    device = lambda: b.call(getattr, tokens, "device")  # noqa: E731
    if isinstance(stack.attention, nodes.Local):
        band = b.call(ops.band_mask, length(), stack.attention.window, causal, device())
        if pad_mask is None:
            return band, None
        mask = b.call(torch.logical_or, band, pad_mask)
        return mask, b.call(ops.fully_masked_rows, mask)
    if causal:
        return b.call(ops.causal_mask, length(), device()), None
    if pad_mask is None:
        return None, None
    return pad_mask, b.call(ops.fully_masked_rows, pad_mask)


def _self_attn(b, model: nodes.Model, prefix: str, stack: nodes.Stack, h: Node, mask, rows,
               bias: ScoreBias | None = None, rope: Node | None = None) -> Node:
    k, v = project_kv(b, prefix, h, stack, rope)
    return attention(b, prefix, h, k, v, mask, rows, stack.attention.kind, stack, model.dropout.attention, bias,
                     rope)


def _stack_bias(b: Builder, model: nodes.Model, stack: nodes.Stack, x: Node, tokens: Node) -> ScoreBias | None:
    """ALiBi or relative positions over a whole sequence (queries = keys)."""
    if not isinstance(model.positions, (nodes.ALiBi, nodes.Relative)):
        return None
    length = b.method("size", tokens, 1)
    return score_bias(b, model, stack, x, length, length)


def _ffn(b, model: nodes.Model, prefix: str, stack: nodes.Stack, x: Node) -> Node:
    p = model.dropout.residual
    body = lambda h: feed_forward(b, f"{prefix}.ffn", h, stack, model.dropout.activation)  # noqa: E731
    return sublayer(b, x, f"{prefix}.ffn_norm", stack.norm, p, body)


def encoder(b: Builder, model: nodes.Model, src: Node, pad_mask: Node | None) -> Node:
    """Source tokens -> memory (B, S, d_model)."""
    enc = model.encoder
    x = embed(b, model, embedding_names(model)["src"], "encoder", src)
    rope = rope_table(b, model, enc, x, src)
    mask, rows = self_attention_mask(b, enc, src, pad_mask, causal=False)
    bias = _stack_bias(b, model, enc, x, src)
    for i in range(enc.layers):
        prefix = f"encoder.layers.{i}"
        body = lambda h: _self_attn(b, model, f"{prefix}.self_attn", enc, h, mask, rows, bias, rope)  # noqa: E731
        x = sublayer(b, x, f"{prefix}.self_attn_norm", enc.norm, model.dropout.residual, body)
        x = _ffn(b, model, prefix, enc, x)
    return b.module("encoder.norm", x) if enc.final_norm else x


def _cross_attn(b, model, prefix: str, dec: nodes.Stack, x: Node, k: Node, v: Node, mask, rows) -> Node:
    p = model.dropout.residual
    body = lambda h: attention(b, f"{prefix}.cross_attn", h, k, v, mask, rows,  # noqa: E731
                               dec.cross_attention.kind, dec, model.dropout.attention)
    return sublayer(b, x, f"{prefix}.cross_attn_norm", dec.norm, p, body)


def decoder(b: Builder, model: nodes.Model, tokens: Node, memory: Node | None, src_mask: Node | None) -> Node:
    """Target tokens (and memory) -> hidden states (B, T, d_model), causally masked."""
    dec = model.decoder
    x = embed(b, model, embedding_names(model)["tgt"], "decoder", tokens)
    rope = rope_table(b, model, dec, x, tokens)
    mask, _ = self_attention_mask(b, dec, tokens, None, causal=True)
    bias = _stack_bias(b, model, dec, x, tokens)
    rows = b.call(ops.fully_masked_rows, src_mask) if src_mask is not None else None
    for i in range(dec.layers):
        prefix = f"decoder.layers.{i}"
        body = lambda h: _self_attn(b, model, f"{prefix}.self_attn", dec, h, mask, None, bias, rope)  # noqa: E731
        x = sublayer(b, x, f"{prefix}.self_attn_norm", dec.norm, model.dropout.residual, body)
        if memory is not None:
            k, v = project_kv(b, f"{prefix}.cross_attn", memory, dec)
            x = _cross_attn(b, model, prefix, dec, x, k, v, src_mask, rows)
        x = _ffn(b, model, prefix, dec, x)
    return b.module("decoder.norm", x) if dec.final_norm else x


def logits(b: Builder, model: nodes.Model, hidden: Node) -> Node:
    """Logits from the states after the head transform (see `head`)."""
    target = embedding_names(model)["output"]
    return project_out(b, target, target == "output", hidden, model.bias.output)


# --- entry points -----------------------------------------------------------------------------


def forward_graph(model: nodes.Model, project: bool = True, padded: bool = True) -> fx.Graph:
    """forward (logits); with project=False the hidden states before the output projection (for a
    loss that fuses it); with padded=False no source padding mask (for batches without padding)."""
    b = Builder()
    pad = (lambda src: b.call(ops.padding_mask, src, ops.PAD)) if padded else (lambda src: None)  # noqa: E731
    if model.encoder is not None and model.decoder is not None:
        src, tgt = b.input("src"), b.input("tgt_in")
        src_mask = pad(src)
        memory = encoder(b, model, src, src_mask)
        hidden = decoder(b, model, tgt, memory, src_mask)
    elif model.decoder is not None:
        hidden = decoder(b, model, b.input("tokens"), None, None)
    else:
        src = b.input("src")
        hidden = encoder(b, model, src, pad(src))
    hidden = head(b, model, hidden)
    b.output(logits(b, model, hidden) if project else hidden)
    return b.graph


def encode_graph(model: nodes.Model) -> fx.Graph:
    b = Builder()
    src = b.input("src")
    b.output(encoder(b, model, src, b.call(ops.padding_mask, src, ops.PAD)))
    return b.graph


def init_cache_graph(model: nodes.Model) -> fx.Graph:
    """Empty self-attention caches, and cross-attention keys and values projected from memory."""
    b = Builder()
    dec = model.decoder
    if model.encoder is not None:
        src, memory = b.input("src"), b.input("memory")
        cache: list[Node] = [b.call(ops.padding_mask, src, ops.PAD)]
        like, batch = memory, b.method("size", memory, 0)
    else:
        tokens = b.input("tokens")  # the prompt; only its batch size matters here
        cache, batch = [], b.method("size", tokens, 0)
        like = b.param(f"{embedding_names(model)['tgt']}.weight")  # zeros of the model's dtype and device
    for i in range(dec.layers):
        cache.append(b.method("new_zeros", like, (batch, dec.key_value_heads, 0, dec.d_k)))
        cache.append(b.method("new_zeros", like, (batch, dec.key_value_heads, 0, dec.d_v)))
        if model.encoder is not None:
            cache.extend(project_kv(b, f"decoder.layers.{i}.cross_attn", memory, dec))
    b.output(tuple(cache))
    return b.graph


def decode_step_graph(model: nodes.Model) -> fx.Graph:
    """One token per sentence through the decoder, reading and extending the key/value cache."""
    b = Builder()
    dec = model.decoder
    tokens, cache = b.input("tokens"), b.input("cache")
    item = lambda i: b.call(operator.getitem, cache, i)  # noqa: E731
    has_memory = model.encoder is not None
    per_layer = 4 if has_memory else 2
    first = 1 if has_memory else 0
    start = b.method("size", item(first), 2)  # tokens decoded so far
    x = embed(b, model, embedding_names(model)["tgt"], "decoder", tokens, start)
    rope = rope_table(b, model, dec, x, tokens, start)  # the new token at its position, the cache length
    src_mask = item(0) if has_memory else None
    rows = b.call(ops.fully_masked_rows, src_mask) if has_memory else None
    new_cache: list[Node] = [src_mask] if has_memory else []
    for i in range(dec.layers):
        prefix, base = f"decoder.layers.{i}", first + i * per_layer
        body = lambda h: _cached_self_attn(b, model, prefix, dec, h, item(base), item(base + 1), new_cache,  # noqa
                                           rope)
        x = sublayer(b, x, f"{prefix}.self_attn_norm", dec.norm, model.dropout.residual, body)
        if has_memory:
            k, v = item(base + 2), item(base + 3)
            new_cache += [k, v]
            x = _cross_attn(b, model, prefix, dec, x, k, v, src_mask, rows)
        x = _ffn(b, model, prefix, dec, x)
    if dec.final_norm:
        x = b.module("decoder.norm", x)
    last = b.call(torch.select, x, 1, -1)  # (B, d): the newest position
    b.output((logits(b, model, head(b, model, last)), tuple(new_cache)))
    return b.graph


def _cached_self_attn(b, model, prefix: str, dec: nodes.Stack, h: Node, past_k: Node, past_v: Node,
                      new_cache: list, rope: Node | None = None) -> Node:
    attn = f"{prefix}.self_attn"
    k_new, v_new = project_kv(b, attn, h, dec, rope)
    k = b.call(torch.cat, (past_k, k_new), 2)
    v = b.call(torch.cat, (past_v, v_new), 2)
    new_cache += [k, v]
    if isinstance(dec.attention, nodes.Local):  # only the last window + 1 keys are visible
        keep = (slice(None), slice(None), slice(-(dec.attention.window + 1), None))
        k, v = b.call(operator.getitem, k, keep), b.call(operator.getitem, v, keep)
    q = split_heads(b, b.module(f"{attn}.q_proj", h), dec.heads, dec.d_k)
    if rope is not None:
        q = b.call(ops.rotate, q, rope)
    k, v = repeat_kv(b, k, dec), repeat_kv(b, v, dec)
    bias = None  # positions on the scores: the new queries, the last of k's positions
    if isinstance(model.positions, (nodes.ALiBi, nodes.Relative)):
        bias = score_bias(b, model, dec, h, b.method("size", h, 1), b.method("size", k, 2))
    out = attend(b, attn, q, k, v, None, None, dec.attention.kind, dec.d_k, model.dropout.attention, bias)
    return b.module(f"{attn}.o_proj", merge_heads(b, out))


def entry_makers(model: nodes.Model) -> dict[str, Callable[[], fx.Graph]]:
    """How to lower every entry point the model has, by name (`hidden*` serve training, see attncomp.train.step)."""
    makers = {"forward": partial(forward_graph, model), "hidden": partial(forward_graph, model, project=False)}
    if model.encoder is not None:
        makers["hidden_dense"] = partial(forward_graph, model, project=False, padded=False)
        makers["encode"] = partial(encode_graph, model)
    if model.decoder is not None:
        makers["init_cache"] = partial(init_cache_graph, model)
        makers["decode_step"] = partial(decode_step_graph, model)
    return makers
