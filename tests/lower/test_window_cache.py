"""A sliding window's decoding cache is bounded (attncomp.lower.cache): a layer with `local(window = W)`
keeps the last W keys and values, a layer without a window keeps them all, and the position of the next
token is the cache's own field; decode_step equals forward in float64 far past the window, for every kind of
positions, and beam search over the bounded cache returns what the full forward pass per step returns."""

from __future__ import annotations

import pytest
import torch

from attncomp import ir
from attncomp.decode.beam import CachedStepper, FullStepper, beam_search
from attncomp.ir import nodes
from attncomp.vocab import EOS
from tests.helpers import batch, pair

WINDOW = 3
BASE = """model windowed {{
  vocab = shared(61)  d_model = 16  heads = 2  d_ff = 32  bias = false
  dropout {{ residual = 0  attention = 0 }}
  {model}
}}
"""
VARIANTS = {
    # every layer windowed: no layer's cache counts the positions, the rotary angles come from the field
    "rope_all_local": "positions = rope  norm = pre\n"
                      f"decoder {{ layers = 2  attention = local(window = {WINDOW}) }}",
    # windowed layers among global ones (Mistral, Gemma 2), with sinks
    "rope_local_global": "positions = rope  norm = pre  kv_heads = 1\n"
                         f"decoder {{ layers = 3  attention = local(window = {WINDOW}, sinks = true)\n"
                         "            layer full { every = 2  start = 1  attention = scaled_dot } }",
    # ALiBi's bias over the window's keys; learned and sinusoidal positions added to the embeddings
    "alibi": f"positions = alibi\ndecoder {{ layers = 2  attention = local(window = {WINDOW}) }}",
    "learned": f"positions = learned(max_len = 64)\ndecoder {{ layers = 2  attention = local(window = {WINDOW}) }}",
    # T5's buckets: the stack's bias covers its global layer's cache, the windowed layer takes its last columns
    "buckets": "positions = buckets(count = 8, max_distance = 16)\n"
               "encoder { layers = 1 }\n"
               f"decoder {{ layers = 2  attention = local(window = {WINDOW}, softcap = 3)\n"
               "            layer full { start = 1  attention = scaled_dot } }",
}
LENGTH = 16  # more than five windows


def spec_of(name: str) -> nodes.Spec:
    return ir.load_flat(BASE.format(model=VARIANTS[name]), f"{name}.attn")


def _kept(spec: nodes.Spec) -> list[int | None]:
    """Per decoder layer: its window, or None where it keeps every position."""
    return [seen.attention.window if isinstance(seen.attention, nodes.Local) else None
            for _, seen in spec.model.decoder.layer_plan()]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_decode_step_equals_forward_past_the_window_with_a_bounded_cache(name):
    spec = spec_of(name)
    plain, fused = pair(spec)
    both = spec.model.encoder is not None
    src, tgt = batch(spec, b=2, s=5, t=LENGTH)
    tgt[:] = tgt[:1]  # no target padding: every position's logits are compared
    with torch.no_grad():
        full = plain(src, tgt) if both else plain(tgt)
        cache = fused.init_cache(src, fused.encode(src)) if both else fused.init_cache(tgt)
        for t in range(LENGTH):
            step, cache = fused.decode_step(tgt[:, t:t + 1], cache)
            assert (step - full[:, t]).abs().max() < 1e-9, t
            assert cache.position.tolist() == [t + 1, t + 1]
            for layer, window in zip(cache.layers, _kept(spec)):
                length = t + 1 if window is None else min(t + 1, window)
                assert layer.self_attn.k.shape == (2, spec.model.decoder.key_value_heads, length, 8)
                assert layer.self_attn.v.shape[2] == length
    assert any(window is not None for window in _kept(spec))


@pytest.mark.parametrize("name", ["rope_local_global", "buckets"])
def test_beam_search_over_the_bounded_cache_equals_the_full_forward_search(name):
    spec = spec_of(name)
    _, model = pair(spec)
    model.eval()
    src, _ = batch(spec, b=2, s=5)
    src[:, -1] = EOS
    src[src == 0] = 9  # equal lengths (a decoder-only batch has equal prompt lengths)
    with torch.no_grad():
        cached = beam_search(CachedStepper(model, src), 2, [12, 12], beam=3, alpha=0.6, nbest=3)
        full = beam_search(FullStepper(model, src), 2, [12, 12], beam=3, alpha=0.6, nbest=3)
    for a, b in zip(cached, full):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert all(abs(x.score - y.score) < 1e-6 for x, y in zip(a, b))
    assert max(len(h.tokens) for hyps in full for h in hyps) > WINDOW
