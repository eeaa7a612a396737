"""Small versions of specs, random batches, and comparisons shared by the compiler's tests."""

from __future__ import annotations

import math

import torch

from attncomp import ir
from attncomp.ir import nodes
from attncomp.lower import lower
from attncomp.vocab import BOS, PAD
from attncomp.passes import optimise


def _layers(stack: nodes.Stack) -> int:
    """Fewer layers, but a layer of every kind, a parameter set's layers and a key/value group (share, share_kv)."""
    share = stack.share
    group = share.size if isinstance(share, nodes.ShareGroups) else share.period + 1 \
        if isinstance(share, nodes.ShareCycle) else 0
    layers = min(stack.layers, max([2, 2 * group, stack.share_kv + 1] + [k.start + 1 for k in stack.layer]))
    return stack.layers if isinstance(share, nodes.ShareGroups) and layers % share.size else layers


def _differential(stack: nodes.Stack) -> bool:
    return isinstance(getattr(stack.attention, "normalizer", None), nodes.Differential)


def shrink_stack(stack: nodes.Stack, factor: int) -> dict:
    shrunk = {
        "d_model": max(8, stack.d_model // factor), "d_k": max(2, stack.d_k // factor),
        "d_v": max(2, stack.d_v // factor), "d_ff": max(8, stack.d_ff // factor),
        "layers": _layers(stack),
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
            d_k, halves = stack.d_k, _differential(stack)  # a differential attention rotates each half of d_k
            width = lambda d: d // 2 if halves else d  # noqa: E731
            while (halves and d_k % 2) or abs(model.positions.fraction * width(d_k) - model.positions.dims(
                    width(d_k))) > 1e-9 or model.positions.dims(width(d_k)) % 2 or not model.positions.dims(width(d_k)):
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


def first_cache(model, src, tgt, both: bool):
    """The decoding cache before the first target token: of the encoded source where the model has an
    encoder (`both`), else of the target."""
    return model.init_cache(src, model.encode(src)) if both else model.init_cache(tgt)


def assert_decode_steps(model, cache, tokens, expected, bound, each=None):
    """decode_step fed `tokens` one position at a time from `cache`: each step's logits are within `bound`
    (the largest absolute difference) of expected[:, t]; `each(t, cache)`, if given, checks the cache after
    step t. Returns the last cache."""
    for t in range(tokens.shape[1]):
        step, cache = model.decode_step(tokens[:, t : t + 1], cache)
        assert (step - expected[:, t]).abs().max() < bound, t
        if each is not None:
            each(t, cache)
    return cache


def assert_generated_equals_compiled(generated, compiled, spec: nodes.Spec, src, tgt, steps: int = 4) -> None:
    """A generated module and the compiled model it was rendered from, with the same weights: the same
    forward (to 1e-9), and the same logits for `steps` greedy decode steps from BOS."""
    both = spec.model.encoder is not None
    with torch.no_grad():
        outs = [m(src, tgt) if both else m(tgt) for m in (generated, compiled)]
        assert (outs[0] - outs[1]).abs().max() < 1e-9
        caches = [first_cache(m, src, tgt, both) for m in (generated, compiled)]
        tokens = torch.full((src.shape[0], 1), BOS)
        for _ in range(steps):
            (a, caches[0]), (b, caches[1]) = (generated.decode_step(tokens, caches[0]),
                                              compiled.decode_step(tokens, caches[1]))
            assert (a - b).abs().max() < 1e-9
            tokens = a.argmax(-1, keepdim=True).clamp(min=5)


def assert_fused_explicit_decoding_generated(spec: nodes.Spec, tmp_path, name: str, move: bool = False):
    """The spec compiled fused (DEFAULT_PASSES) and explicit (no passes) and the fused model rendered as a generated
    module, one state dict, in float64 (`move`: the weights first moved off their start, so a gain from 0, ReZero's,
    hides nothing): on one batch of tokens fused == explicit to 1e-12, generated == explicit to 1e-9, and each cached
    decode step of the fused model is the forward's logits at its position to 1e-12. Returns the fused model."""
    import attncomp
    from attncomp.compiler import DEFAULT_PASSES
    from tests.codegen.test_generated import rendered_module  # (that module imports this one)

    torch.manual_seed(0)
    fused = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    if move:
        with torch.no_grad():
            for p in fused.parameters():
                p.add_(0.1 * torch.randn_like(p))
    explicit = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    explicit.load_state_dict(fused.state_dict())
    generated = rendered_module(spec, tmp_path, name, model=fused).Model().double().eval()
    generated.load_state_dict(fused.state_dict())
    tokens = torch.randint(5, min(spec.model.src_vocab, spec.model.tgt_vocab), (2, 7),
                           generator=torch.Generator().manual_seed(1))
    args = (tokens,) if spec.model.encoder is None else (tokens, tokens)
    with torch.no_grad():
        expected = explicit(*args)
        assert (fused(*args) - expected).abs().max() < 1e-12
        assert (generated(*args) - expected).abs().max() < 1e-9
        cache = fused.init_cache(tokens) if len(args) == 1 else fused.init_cache(tokens, fused.encode(tokens))
        assert_decode_steps(fused, cache, tokens, expected, 1e-12)
    return fused
