"""Lowering each model family's entry points (the families themselves, their entry points and objectives, are data of
the IR: attncomp.ir.family) into the model unit, over the stacks, the embeddings and the output projection that
every family shares. The decoding cache is attncomp.lower.cache's DecodingCache."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import fx

from attncomp.ir import nodes
from attncomp.ir.family import FAMILIES, SEGMENTED, Entry, Family, family_of, prefix_lm
from attncomp.lower import ops
from attncomp.lower.cache import DecodingCache
from attncomp.lower.feed_forward import ACTIVATIONS, activate
from attncomp.lower.stack import decoder, encoder
from attncomp.lower.norms import apply_norm
from attncomp.lower.units import Builder, Param, Unit, embedding, linear

Node = fx.Node
MEMBERS = ("embed", "src_embed", "tgt_embed", "segment_embed", "output", "output_bias", "head", "output_proj",
           "encoder", "decoder")

SHAPES = {"src": ("batch", "src_len"), "tgt_in": ("batch", "tgt_len"), "tokens": ("batch", "tgt_len"),
          "segments": ("batch", "src_len"), "prefix": ("batch",)}


def embedding_names(arch: nodes.ModelSpec) -> dict[str, str]:
    """Which member embeds the source, embeds the target, and projects to the vocabulary."""
    if arch.tie in ("all", "inputs"):
        return {"src": "embed", "tgt": "embed", "output": "embed" if arch.tie == "all" else "output"}
    names = {"src": "src_embed", "tgt": "tgt_embed", "output": "output"}
    if arch.tie == "decoder":
        names["output"] = "tgt_embed"
    if arch.tie == "encoder":
        names["output"] = "src_embed"
    if arch.decoder is None:  # encoder-only: the output reads the encoder
        names["tgt"] = names["src"]
    return names


# --- what every family shares -------------------------------------------------------------------


def _embed(b: Builder, ctx, side: str, tokens: Node, segments: Node | None = None) -> Node:
    """Token embeddings (d_embed or the stack's d_model wide); on the source with `segments = N`, plus the
    embedding of each token's segment (segment 0 where the caller gives none)."""
    arch = ctx.arch
    name = embedding_names(arch)[side]
    rows = arch.src_vocab if name == "src_embed" else arch.tgt_vocab
    width = arch.d_embed or (arch.encoder if name == "src_embed" else arch.decoder or arch.encoder).d_model
    x = b.leaf(name, embedding(rows, width), tokens, name="x")
    if segments is None:
        return x
    ids = b.call(ops.segment_ids, tokens, segments, name="segments", shape=SHAPES["segments"])
    return b.add(x, b.leaf("segment_embed", embedding(arch.segments, width), ids, name="segment"))


def _segments(b: Builder, ctx, entry: str) -> Node | None:
    """The `segments` argument of an entry point that takes one (default None: segment 0 everywhere)."""
    return b.input("segments", SHAPES["segments"], default=None) if Family.segmented(ctx.arch, entry) else None


def _head(b: Builder, ctx, x: Node) -> Node:
    """The prediction head (if any), then, with a narrower d_embed and no head to narrow the states,
    output_proj: the final states at the output projection's width."""
    arch = ctx.arch
    if isinstance(arch.head, nodes.DenseHead):
        return b.sub("head", ctx.unit(prediction_head, arch.head), "forward", x, name="x",
                     shape=x.meta.get("shape")[:-1] + (arch.embed_width,))
    if arch.embed_width == arch.d_model:
        return x
    return b.leaf("output_proj", linear(arch.d_model, arch.d_embed, False), x, name="x")


def prediction_head(ctx, head: nodes.DenseHead) -> Unit:
    """BERT's prediction-head transform before the output projection: LayerNorm(act(dense(x))), the norm
    as the head's `normalization` says (ModernBERT's has no bias); its dense layer maps d_model to d_embed
    where that is narrower (ALBERT, ELECTRA)."""
    d, out = ctx.arch.d_model, ctx.arch.embed_width
    unit = Unit("PredictionHead", "The prediction-head transform: LayerNorm(act(dense(x)))")
    b = Builder(unit, "forward")
    x = b.input("x", ("batch", "seq_len", d))
    dense = b.leaf("dense", linear(d, out, head.bias), x, name="x")
    act = ACTIVATIONS[head.activation]
    if head.activation in nodes.GATED:  # act(W_gate x) * (W x), as a gated feed-forward's
        gate = activate(b, act, b.leaf("gate", linear(d, out, head.bias), x, name="gate"), name="gate")
        act = b.call(torch.mul, gate, dense, name="x")
    else:
        act = activate(b, act, dense, name="x")
    b.output(apply_norm(b, ctx, "norm", head.normalization, out, act, name="x"))
    return unit


def _logits(b: Builder, ctx, x: Node) -> Node:
    """Hidden states -> vocabulary logits: the output projection or the tied embedding (+ output_bias),
    times logit_scale, soft-capped with logit_softcap (attncomp.train.loss applies the same to its fused
    projection: `logit_map`)."""
    arch = ctx.arch
    target = embedding_names(arch)["output"]
    if target == "output":
        out = b.leaf("output", linear(arch.embed_width, arch.tgt_vocab, False), x, name="logits")
    else:
        out = b.call(F.linear, x, b.param(f"{target}.weight", name="embedding"), name="logits")
    if arch.bias.output:
        out = b.add(out, b.param("output_bias", Param((arch.tgt_vocab,), "zeros")), name="logits")
    if arch.logit_scale != 1.0:
        out = b.call(torch.mul, out, arch.logit_scale, name="logits")
    if arch.logit_softcap is not None:
        out = b.call(ops.softcap, out, arch.logit_softcap, name="logits")
    return out


def _finish(b: Builder, ctx, x: Node, project: bool) -> None:
    x = _head(b, ctx, x)
    b.output(_logits(b, ctx, x) if project else x)


def _inputs(b: Builder, names: tuple[str, ...]) -> list[Node]:
    return [b.input(name, SHAPES[name]) for name in names]


def _padding(b: Builder, ctx, src: Node) -> Node:
    """Where the source is the vocabulary's <pad> (its declared id: an encoder's vocabulary has one)."""
    return b.call(ops.padding_mask, src, ctx.arch.vocab.pad, name="padding_mask")


# --- the families -------------------------------------------------------------------------------------


def _encoder_decoder(ctx, unit: Unit) -> None:
    arch = ctx.arch
    enc, dec = ctx.unit(encoder, arch.encoder), ctx.unit(decoder, arch.decoder, arch.encoder.d_model)
    for name, project, padded in (("forward", True, True), ("hidden", False, True), ("hidden_dense", False, False)):
        b = Builder(unit, name)
        src, tgt = _inputs(b, ("src", "tgt_in"))
        segments = _segments(b, ctx, name)
        padding = _padding(b, ctx, src) if padded else None
        memory = b.sub("encoder", enc, "forward", _embed(b, ctx, "src", src, segments), padding, name="memory",
                       shape=("batch", "src_len", arch.encoder.d_model))
        x = b.sub("decoder", dec, "forward", _embed(b, ctx, "tgt", tgt), memory, padding, name="x",
                  shape=("batch", "tgt_len", arch.d_model))
        _finish(b, ctx, x, project)

    b = Builder(unit, "encode")
    (src,) = _inputs(b, ("src",))
    segments = _segments(b, ctx, "encode")
    b.output(b.sub("encoder", enc, "forward", _embed(b, ctx, "src", src, segments), _padding(b, ctx, src),
                   name="memory", shape=("batch", "src_len", arch.encoder.d_model)))

    b = Builder(unit, "init_cache", decoding=True)
    (src,) = _inputs(b, ("src",))
    memory = b.input("memory", ("batch", "src_len", arch.encoder.d_model))
    caches = b.sub("decoder", dec, "init_cache", memory, name="caches")
    position = _first_position(b, src)
    b.output(b.call(DecodingCache, _padding(b, ctx, src), caches, position, name="cache"))

    b = Builder(unit, "decode_step", decoding=True)
    tokens, cache = b.input("tokens", ("batch", 1)), b.input("cache")
    padding = b.field(cache, "padding_mask", ("batch", 1, 1, "src_len"))
    _step(b, ctx, dec, tokens, cache, padding)


def _first_position(b: Builder, tokens: Node) -> Node:
    """The cache's position before the first step: 0 in every row (B,)."""
    return b.method("new_zeros", tokens, (b.size(tokens, 0, "batch"),), name="position", shape=("batch",))


def _step(b: Builder, ctx, dec: Unit, tokens: Node, cache: Node, padding: Node | None) -> None:
    """decode_step: the newest tokens through the decoder's step at the cache's position (row 0's: the rows
    decode in lockstep); the last position's logits, and the cache one position further."""
    caches = b.field(cache, "layers")
    position = b.field(cache, "position", ("batch",))
    start = b.item(position, 0, "start")
    out = b.sub("decoder", dec, "step", _embed(b, ctx, "tgt", tokens), caches, *(() if padding is None else (padding,)),
                start, name="stepped")
    x = b.item(out, 0, "x", shape=("batch", 1, ctx.arch.d_model))
    last = b.call(torch.select, x, 1, -1, name="x")  # (B, d): the newest position
    x = _head(b, ctx, last)
    logits = _logits(b, ctx, x)
    position = b.call(torch.add, position, 1, name="position", shape=("batch",))
    b.output((logits, b.call(DecodingCache, padding, b.item(out, 1, "caches"), position, name="cache")))


def _decoder_only(ctx, unit: Unit) -> None:
    arch = ctx.arch
    dec = ctx.unit(decoder, arch.decoder, None)
    for name, project in (("forward", True), ("hidden", False)):
        b = Builder(unit, name)
        (tokens,) = _inputs(b, ("tokens",))
        prefix = (b.input("prefix", SHAPES["prefix"], default=None),) if Family.prefixed(arch, name) else ()
        x = b.sub("decoder", dec, "forward", _embed(b, ctx, "tgt", tokens), *prefix, name="x",
                  shape=("batch", "tgt_len", arch.d_model))
        _finish(b, ctx, x, project)

    b = Builder(unit, "init_cache", decoding=True)
    (tokens,) = _inputs(b, ("tokens",))  # the prompt: only its batch size matters here (a prefix LM's: its prefix)
    like = b.param(f"{embedding_names(arch)['tgt']}.weight", name="like")  # the model's dtype and device
    caches = b.sub("decoder", dec, "init_cache", like, b.size(tokens, 0, "batch"), name="caches")
    if prefix_lm(arch):
        _encode_prefix(b, ctx, dec, tokens, caches)
    else:
        b.output(b.call(DecodingCache, None, caches, _first_position(b, tokens), name="cache"))

    b = Builder(unit, "decode_step", decoding=True)
    tokens, cache = b.input("tokens", ("batch", 1)), b.input("cache")
    _step(b, ctx, dec, tokens, cache, None)


def _encode_prefix(b: Builder, ctx, dec: Unit, tokens: Node, caches: Node) -> None:
    """A prefix LM's init_cache: the tokens (B, P), every row's prefix, through the decoder's step in one call
    from the empty caches, their queries seeing every one of their keys (the step hides none: the bidirectional
    prefix); the cache holds their keys and values, at position P, and decode_step goes on causally."""
    stepped = b.sub("decoder", dec, "step", _embed(b, ctx, "tgt", tokens), caches, 0, name="stepped")
    position = b.method("new_full", tokens, (b.size(tokens, 0, "batch"),), b.size(tokens, 1, "tgt_len"),
                        name="position", shape=("batch",))
    b.output(b.call(DecodingCache, None, b.item(stepped, 1, "caches"), position, name="cache"))


def _encoder_only(ctx, unit: Unit) -> None:
    arch = ctx.arch
    enc = ctx.unit(encoder, arch.encoder)
    for name, project, padded in (("forward", True, True), ("hidden", False, True), ("hidden_dense", False, False),
                                  ("encode", None, True)):
        b = Builder(unit, name)
        (src,) = _inputs(b, ("src",))
        segments = _segments(b, ctx, name)
        x = b.sub("encoder", enc, "forward", _embed(b, ctx, "src", src, segments),
                  _padding(b, ctx, src) if padded else None, name="memory" if project is None else "x",
                  shape=("batch", "src_len", arch.d_model))
        if project is None:
            b.output(x)
        else:
            _finish(b, ctx, x, project)


LOWERED = {"encoder-decoder": _encoder_decoder, "decoder-only": _decoder_only, "encoder-only": _encoder_only}


def model_unit(ctx) -> Unit:
    """The model: its embeddings, stacks and output projection, and its family's entry points."""
    family = family_of(ctx.arch)
    unit = Unit("Model", f"The `{ctx.arch.name}` model: {family.title}")
    LOWERED[family.name](ctx, unit)
    unit.reorder(MEMBERS)
    return unit


__all__ = ["FAMILIES", "SEGMENTED", "Entry", "Family", "LOWERED", "embedding_names", "family_of", "model_unit"]
