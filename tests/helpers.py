"""Small versions of specs, random batches, and comparisons shared by the compiler's tests."""

from __future__ import annotations

import math

import torch

from attncomp import ir
from attncomp.ir import nodes
from attncomp.lower import lower
from attncomp.vocab import PAD
from attncomp.passes import optimise


def shrink_stack(stack: nodes.Stack, factor: int) -> dict:
    shrunk = {
        "d_model": max(8, stack.d_model // factor), "d_k": max(2, stack.d_k // factor),
        "d_v": max(2, stack.d_v // factor), "d_ff": max(8, stack.d_ff // factor),
        "layers": min(stack.layers, max([2] + [k.start + 1 for k in stack.layer])),  # a layer of every kind
        "heads": min(stack.heads, 4) if stack.heads * max(2, stack.d_k // factor)
        > 64 else stack.heads,
    }
    if stack.kv_heads is not None:
        shrunk["kv_heads"] = math.gcd(stack.kv_heads, shrunk["heads"])  # still a divisor of heads
    return shrunk


def small(spec: nodes.Spec, factor: int = 16, vocab: int = 61, dropout: float = 0.0) -> nodes.Spec:
    """The same architecture, narrow and shallow enough for float64 checks on a CPU."""
    model = spec.model
    update: dict = {"dropout": nodes.Dropout(residual=dropout, embedding=dropout, attention=dropout,
                                             activation=dropout)}
    widths = set()
    for name in ("encoder", "decoder"):
        stack = getattr(model, name)
        if stack is not None:
            update[name] = stack.model_copy(update=shrink_stack(stack, factor))
            widths.add(update[name].d_model)
    if len(widths) > 1:  # keep tie = all legal
        w = min(widths)
        for name in ("encoder", "decoder"):
            if name in update:
                update[name] = update[name].model_copy(update={"d_model": w})
    if model.d_embed is not None:  # still narrower than the narrowest stack
        update["d_embed"] = max(4, min(model.d_embed // factor, min(widths) // 2))
    update["vocab"] = nodes.Shared(size=vocab) if isinstance(model.vocab, nodes.Shared) else \
        nodes.Separate(src=vocab, tgt=vocab + 3)
    if isinstance(model.positions, nodes.Learned):
        update["positions"] = nodes.Learned(max_len=64)
    for name in ("encoder", "decoder"):
        stack = update.get(name)
        if stack is not None and isinstance(stack.attention, nodes.Local):
            update[name] = stack.model_copy(update={"attention": stack.attention.model_copy(update={"window": 2})})
        if stack is not None and isinstance(model.positions, nodes.Rope):  # a partial rotation of a pair or more
            d_k = stack.d_k
            while abs(model.positions.fraction * d_k - model.positions.dims(d_k)) > 1e-9 or \
                    model.positions.dims(d_k) % 2 or not model.positions.dims(d_k):
                d_k += 1
            update[name] = update[name].model_copy(update={"d_k": d_k})
    return ir.verify(spec.model_copy(update={"model": model.model_copy(update=update)}))


def pair(spec: nodes.Spec, dtype=torch.float64):
    """(unfused, fused) models with identical weights."""
    plain = lower(spec).to(dtype)
    fused = optimise(lower(spec).to(dtype))
    fused.load_state_dict(plain.state_dict())
    return plain, fused


def batch(spec: nodes.Spec, b: int = 3, s: int = 9, t: int = 7, seed: int = 0):
    """Random source and target tokens, right-padded to different lengths."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(5, spec.model.src_vocab, (b, s), generator=g)
    tgt = torch.randint(5, spec.model.tgt_vocab, (b, t), generator=g)
    for i in range(1, b):
        src[i, s - 2 * i:] = PAD
        tgt[i, t - i:] = PAD
    return src, tgt


def run_forward(model, spec: nodes.Spec, src, tgt):
    m = spec.model
    if m.encoder is not None and m.decoder is not None:
        return model(src, tgt)
    return model(tgt if m.decoder is not None else src)


def real_positions(spec: nodes.Spec, src, tgt):
    """Positions whose outputs mean something (queries at padding are ignored by the loss)."""
    tokens = tgt if spec.model.decoder is not None else src
    return tokens != PAD
