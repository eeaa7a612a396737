"""The decoding cache, typed: what decode_step reads and returns, by name.

    DecodingCache(padding_mask, layers)     padding_mask: the source's (B, 1, 1, S) bool, True = padding
                                            (None for a decoder-only model); layers: one LayerCache each
    LayerCache(self_attn, cross_attn)       KV of the layer's self-attention, and of its cross-attention
                                            (None without an encoder)
    KV(k, v)                                keys and values (B, kv_heads, T, d); self-attention keys are
                                            stored rotated where positions are rotary

They are named tuples, so torch.utils._pytree (torch.export, torch.compile) and beam search see their
tensors without knowing the layout; flattened, their leaves are in the order of the fields: the source
mask, then per layer the self-attention k, v and the cross-attention k, v.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from torch import Tensor


KV = NamedTuple("KV", [("k", Tensor), ("v", Tensor)])
LayerCache = NamedTuple("LayerCache", [("self_attn", KV), ("cross_attn", Optional[KV])])
DecodingCache = NamedTuple("DecodingCache", [("padding_mask", Optional[Tensor]), ("layers", tuple)])

CACHE_TYPES = (KV, LayerCache, DecodingCache)
