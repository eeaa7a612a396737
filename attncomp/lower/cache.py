"""The decoding cache, typed: what decode_step reads and returns, by name.

    DecodingCache(padding_mask, layers, position)
                                            padding_mask: the source's (B, 1, 1, S) bool, True = padding
                                            (None for a decoder-only model); layers: one LayerCache each;
                                            position: (B,) int64, the position of the next token (the
                                            number of tokens decoded so far; the rows of a batch decode in
                                            lockstep, so every row holds the same number)
    LayerCache(self_attn, cross_attn)       KV of the layer's self-attention (None in a layer that attends
                                            with an earlier layer's keys and values, `share_kv`: only the
                                            layers that compute them are cached), and of its cross-attention
                                            (None without an encoder)
    KV(k, v)                                keys and values (B, kv_heads, T, d); self-attention keys are
                                            stored rotated where positions are rotary. T is the position for
                                            a layer that attends to every key before the query; a layer with
                                            a sliding window (`local(window = W)`) keeps only the last
                                            min(position, W) keys and values (a query sees W keys before it).
                                            Multi-head latent attention (`latent(...)`) keeps its compressed
                                            cache here: k the normalised latent c^KV (B, 1, T, kv_rank), v the
                                            rotated key shared by every head, k^R (B, 1, T, rope_dims)

They are named tuples, so torch.utils._pytree (torch.export, torch.compile) and beam search see their
tensors without knowing the layout; flattened, their leaves are in the order of the fields: the source
mask, then per layer the self-attention k, v and the cross-attention k, v, then the position.

The position is a field of its own rather than a layer's cache length, since a windowed layer's cache
stops growing at its window (and every layer of a stack may be windowed). It has a batch dimension, as
every other tensor of the cache, so that beam search reorders the cache by indexing every tensor's rows
and torch.export gives every tensor the same dynamic batch dimension; decode_step reads row 0's.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from torch import Tensor


KV = NamedTuple("KV", [("k", Tensor), ("v", Tensor)])
LayerCache = NamedTuple("LayerCache", [("self_attn", KV), ("cross_attn", Optional[KV])])
DecodingCache = NamedTuple("DecodingCache", [("padding_mask", Optional[Tensor]), ("layers", tuple),
                                             ("position", Tensor)])

CACHE_TYPES = (KV, LayerCache, DecodingCache)
