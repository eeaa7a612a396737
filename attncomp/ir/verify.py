"""Cross-field checks on a resolved Spec: rules no single field can state.

Each rule raises a SpecError at the line that set the offending value. Rules are listed in
`RULES`, one small function each, so docs/language.md can name them all.
"""

from __future__ import annotations

from attncomp.errors import SpecError
from attncomp.ir import nodes


def _stacks(spec: nodes.Spec) -> None:
    if not spec.model.stacks:
        raise SpecError("the model has neither an encoder nor a decoder block", spec.span("model"),
                        hint="add encoder { } and/or decoder { }")


def _tie(spec: nodes.Spec) -> None:
    m = spec.model
    if m.tie == "all":
        if not isinstance(m.vocab, nodes.Shared):
            raise SpecError("tie = all needs a shared vocabulary", spec.span("model", "tie"),
                            hint="use vocab = shared(N), or tie = decoder")
        if m.encoder is None or m.decoder is None:
            raise SpecError("tie = all shares source and target embeddings, so it needs an encoder and a decoder",
                            spec.span("model", "tie"), hint="use tie = decoder for a single stack")
        if m.encoder.d_model != m.decoder.d_model and m.d_embed is None:
            raise SpecError(
                f"tie = all needs equal widths, but the encoder has d_model = {m.encoder.d_model} "
                f"and the decoder {m.decoder.d_model}", spec.span("model", "tie"))
    if m.tie == "encoder" and (m.encoder is None or m.decoder is not None):
        raise SpecError("tie = encoder ties an encoder-only model's embedding to the output; this model has a "
                        "decoder" if m.decoder is not None else "tie = encoder needs an encoder",
                        spec.span("model", "tie"), hint="use tie = decoder or tie = all")
    if m.tie == "inputs":
        if not isinstance(m.vocab, nodes.Shared):
            raise SpecError("tie = inputs shares the source and target embeddings, so it needs a shared vocabulary",
                            spec.span("model", "tie"), hint="use vocab = shared(N), or tie = none")
        if m.encoder is None or m.decoder is None:
            raise SpecError("tie = inputs shares source and target embeddings, so it needs an encoder and a decoder",
                            spec.span("model", "tie"), hint="use tie = none (or tie = decoder) for a single stack")
        if m.encoder.d_model != m.decoder.d_model and m.d_embed is None:
            raise SpecError(
                f"tie = inputs needs equal widths, but the encoder has d_model = {m.encoder.d_model} "
                f"and the decoder {m.decoder.d_model}", spec.span("model", "tie"), hint="or set d_embed")
    if m.tie == "decoder" and m.decoder is None:
        raise SpecError("tie = decoder ties the decoder's embedding to the output, but there is no decoder",
                        spec.span("model", "tie"), hint="use tie = none")


def _vocab(spec: nodes.Spec) -> None:
    m = spec.model
    if isinstance(m.vocab, nodes.Separate) and (m.encoder is None or m.decoder is None):
        raise SpecError("a model with one stack reads and writes one vocabulary; use vocab = shared(N)",
                        spec.span("model", "vocab"))
    declared = {role: getattr(m.vocab, role) for role in nodes.ROLES if getattr(m.vocab, role) is not None}
    size = min(m.src_vocab, m.tgt_vocab)  # the ids are the same on both sides
    if size <= len(set(declared.values())):
        raise SpecError(f"a vocabulary of {size} leaves no room beside the {len(set(declared.values()))} special "
                        "tokens", spec.span("model", "vocab"))
    for role, token in declared.items():
        if token >= size:
            raise SpecError(f"{role} = {token} is not an id of a vocabulary of {size} tokens",
                            spec.span("model", "vocab", role))
    if m.encoder is not None and m.vocab.pad is None:
        raise SpecError("an encoder masks its padding, so its vocabulary needs a pad",
                        spec.span("model", "vocab", "pad"), hint="declare pad = ID (a decoder-only model may lack one)")
    if m.encoder is not None:  # the encoder hides pad's id as padding: a token it reads needs an id of its own
        specials = m.specials
        read = [("bos", "bos", specials.bos), ("eos", "eos", specials.eos)]  # (what, the key that set it, id)
        if m.decoder is None:  # masked LM writes <mask> into the encoder's input (unset: sep's id)
            read.append(("mask", "mask", specials.mask) if m.vocab.mask is not None or m.vocab.sep is None
                        else ("mask (unset: sep's id)", "sep", specials.mask))
        for what, role, token in read:
            if token is not None and token == m.vocab.pad:
                where = spec._spans.get(("model", "vocab", role)) or spec.span("model", "vocab", "pad")
                raise SpecError(f"{what} and pad are both {token}, but the encoder masks pad's id as padding: it "
                                f"would hide every {what.split()[0]} token it reads", where,
                                hint="give it an id of its own" + (": declare mask = ID" if role == "sep" else ""))
    if m.decoder is not None and m.specials.start is None:
        raise SpecError("a decoder needs a first input, but the vocabulary declares neither bos nor start",
                        spec.span("model", "vocab", "bos"), hint="declare bos = ID or start = ID")


def _attention(spec: nodes.Spec) -> None:
    decoder = spec.model.decoder
    if decoder is not None and isinstance(decoder.cross_attention, nodes.Local):
        raise SpecError("cross-attention cannot be local: source and target positions do not line up",
                        spec.span("model", "decoder", "cross_attention"))
    if spec.model.encoder is None and decoder is not None and decoder.cross_attention != nodes.ScaledDot():
        raise SpecError("cross_attention needs an encoder to attend to",
                        spec.span("model", "decoder", "cross_attention"))


def _positions(spec: nodes.Spec) -> None:
    m = spec.model
    if isinstance(m.positions, nodes.Sinusoidal) and m.positions.timescales == "tensor2tensor":
        if m.positions.layout != "halves":
            raise SpecError("sinusoidal(timescales = tensor2tensor) writes sines then cosines: it needs "
                            "layout = halves", spec.span("model", "positions"))
        if min(m.d_embed or s.d_model for s in m.stacks) < 4:
            raise SpecError("sinusoidal(timescales = tensor2tensor) needs d_model of at least 4",
                            spec.span("model", "positions"))
    if isinstance(m.positions, nodes.Learned) and isinstance(spec.decode.max_len, nodes.Fixed):
        if spec.decode.max_len.length > m.positions.max_len:
            raise SpecError(
                f"decode.max_len = {spec.decode.max_len.length} is beyond the learned positions' "
                f"max_len = {m.positions.max_len}", spec.span("decode", "max_len"))


def _embeddings(spec: nodes.Spec) -> None:
    """A narrower embedding needs a stack wider than it; segment ids belong to a source."""
    m = spec.model
    if m.d_embed is not None and all(s.d_model == m.d_embed for s in m.stacks):
        raise SpecError(f"d_embed = {m.d_embed} is every stack's d_model: there is nothing to project",
                        spec.span("model", "d_embed"), hint="leave d_embed unset")
    if m.segments and m.encoder is None:
        raise SpecError(f"segments = {m.segments} adds segment embeddings to the source, but a decoder-only "
                        "model reads no source", spec.span("model", "segments"),
                        hint="segments need an encoder (BERT, ELECTRA: encoder-only)")


def _checkpoint(spec: nodes.Spec) -> None:
    ck = spec.train.checkpoint
    if ck.average_last > ck.keep:
        raise SpecError(f"average_last = {ck.average_last} needs keep >= {ck.average_last} (keep = {ck.keep})",
                        spec.span("train", "checkpoint", "average_last"))


def _validation(spec: nodes.Spec) -> None:
    """The best checkpoint by BLEU needs BLEU measured; patience counts evaluations without a better best."""
    v = spec.train.validation
    if v is None:
        return
    if v.bleu > 0 and spec.model.decoder is None:
        raise SpecError(f"bleu = {v.bleu} translates validation sentences, but an encoder-only model does not "
                        "generate text", spec.span("train", "validation", "bleu"),
                        hint="set bleu = 0 (and best = ppl or none)")
    if v.best == "bleu" and v.bleu == 0:
        raise SpecError("best = bleu needs BLEU at each evaluation, but bleu = 0",
                        spec.span("train", "validation", "best"),
                        hint="set bleu = N: the first N validation sentences are translated")
    if v.patience > 0 and v.best == "none":
        raise SpecError(f"patience = {v.patience} counts evaluations without a better best metric, but best = none",
                        spec.span("train", "validation", "patience"), hint="set best = ppl or best = bleu")


def _schedule(spec: nodes.Spec) -> None:
    sched = spec.train.schedule
    warmup = getattr(sched, "warmup", 0)
    if isinstance(sched, nodes.Cosine) and warmup >= spec.train.steps:
        raise SpecError(f"cosine warmup = {warmup} leaves no steps to decay over (steps = {spec.train.steps})",
                        spec.span("train", "schedule"))
    if isinstance(sched, nodes.Cosine) and sched.final > sched.peak:
        raise SpecError("cosine final must not exceed peak", spec.span("train", "schedule"))


def _local_window(spec: nodes.Spec) -> None:
    m = spec.model
    for name, stack in (("encoder", m.encoder), ("decoder", m.decoder)):
        if stack is not None and isinstance(stack.attention, nodes.Local) and isinstance(m.positions, nodes.Learned):
            if stack.attention.window >= m.positions.max_len:
                raise SpecError(
                    f"a local window of {stack.attention.window} covers every one of the "
                    f"{m.positions.max_len} positions; use attention = scaled_dot",
                    spec.span("model", name, "attention"))


def _relative_scores(spec: nodes.Spec) -> None:
    """Shaw et al.'s q . a^K term belongs to dot-product scores; additive scores have no q . k to extend."""
    m = spec.model
    if not isinstance(m.positions, nodes.Relative):
        return
    for name, stack in (("encoder", m.encoder), ("decoder", m.decoder)):
        if stack is not None and isinstance(stack.attention, nodes.Additive):
            raise SpecError(f"relative positions add q . a^K to dot-product scores, but the {name}'s "
                            "self-attention is additive", spec.span("model", "positions"),
                            hint="use attention = scaled_dot or local(...), or other positions")


def _mlm(spec: nodes.Spec) -> None:
    mlm = spec.train.mlm
    if mlm.mask + mlm.random > 1.0:
        raise SpecError(f"mlm: mask = {mlm.mask:g} and random = {mlm.random:g} add up to more than 1",
                        spec.span("train", "mlm", "random"), hint="the rest, 1 - mask - random, keeps its token")


def _kv_heads(spec: nodes.Spec) -> None:
    """Grouped-query attention: every key/value head serves the same number of query heads."""
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is not None and stack.heads % stack.key_value_heads:
            raise SpecError(f"kv_heads = {stack.key_value_heads} does not divide heads = {stack.heads}",
                            spec.span("model", name, "kv_heads"),
                            hint="each key/value head serves heads / kv_heads query heads; 1 is multi-query")


def _rope(spec: nodes.Spec) -> None:
    """Rotary positions rotate pairs of dims: fraction * d_k must be a whole, even number."""
    rope = spec.model.positions
    if not isinstance(rope, nodes.Rope):
        return
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is None:
            continue
        if isinstance(stack.attention, nodes.Latent):  # it rotates its rope_dims (_latent)
            continue
        halved = isinstance(getattr(stack.attention, "normalizer", None), nodes.Differential)
        d_k = stack.d_k // 2 if halved else stack.d_k  # differential attention rotates each half
        dims = rope.fraction * d_k
        if abs(dims - rope.dims(d_k)) > 1e-9 or rope.dims(d_k) % 2 or rope.dims(d_k) == 0:
            width = f"d_k / 2 = {rope.fraction} * {d_k}" if halved else f"d_k = {rope.fraction} * {d_k}"
            raise SpecError(f"rope rotates pairs of dims, but fraction * {width} = "
                            f"{dims:g} in the {name} is not a positive even number",
                            spec.span("model", "positions"), hint="choose a fraction that leaves an even count")


def _latent(spec: nodes.Spec) -> None:
    """Multi-head latent attention: self-attention only, every layer of its stack latent with the same rotary
    part (the stack makes one rotary table, rope_dims wide), rotary positions over all of it, no k/v heads of
    its own, no q/k norm and no clip_qkv (its keys come from the latent)."""
    m = spec.model
    if m.decoder is not None and isinstance(m.decoder.cross_attention, nodes.Latent):
        raise SpecError("cross-attention cannot be latent: its keys and values come from the encoder's output, "
                        "and the latent's decoupled rotary keys need positions that line up",
                        spec.span("model", "decoder", "cross_attention"))
    for name, stack in (("encoder", m.encoder), ("decoder", m.decoder)):
        if stack is None:
            continue
        own = stack.attention
        for kind in stack.layer:
            other = kind.attention
            if other is not None and isinstance(other, nodes.Latent) != isinstance(own, nodes.Latent) or \
                    isinstance(other, nodes.Latent) and other.rope_dims != own.rope_dims:
                change = "to latent with other rope_dims" if other.kind == own.kind else \
                    f"from {own.kind} to {other.kind}"
                raise SpecError(f"layer {kind.name} cannot change the {name}'s attention {change}: latent attention "
                                "needs every layer of its stack latent with the same rope_dims (the stack makes one "
                                "rotary table for all its layers)",
                                spec.span("model", name, "layer", kind.name, "attention"))
        if not isinstance(own, nodes.Latent):
            continue
        where = spec.span("model", name, "attention")
        if not isinstance(m.positions, nodes.Rope) or m.positions.fraction != 1.0:
            raise SpecError(f"latent attention rotates its decoupled rope_dims: it needs positions = rope (over "
                            f"all of them, fraction 1), not {m.positions.kind}", spec.span("model", "positions"))
        if own.rope_dims % 2 or own.rope_dims >= stack.d_k:
            raise SpecError(f"rope_dims = {own.rope_dims} must be even and below d_k = {stack.d_k} (a head's query "
                            "and key width counts the rotary part and the part from the latent)", where)
        if stack.kv_heads is not None:
            raise SpecError("latent attention has no kv_heads: every head's keys and values come from the shared "
                            "latent", spec.span("model", name, "kv_heads"), hint="leave kv_heads unset")
        if stack.qk_norm != "none" or any(k.qk_norm not in (None, "none") for k in stack.layer):
            raise SpecError("latent attention takes no qk_norm: its keys are made from the normalised latent",
                            spec.span("model", name, "qk_norm"))
        if own.clip_qkv:
            raise SpecError("latent attention takes no clip_qkv: its keys and values have no projection of their own "
                            "to clip (they come from the latent)", where)


def _normalizer(spec: nodes.Spec) -> None:
    """How an attention turns scores into weights: sigmoid takes no sinks (a softmax's extra column);
    differential attention halves each head's q and k (an even d_k), takes no latent attention (its keys carry a
    shared rotary part) and no relative positions (their value term reads one map of weights), and with rope a
    stack's layers are all differential or none (the stack makes one rotary table, d_k / 2 wide for them)."""
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is None:
            continue
        for key in ("attention", "cross_attention"):
            attention = getattr(stack, key, None)
            normalizer = getattr(attention, "normalizer", None)
            where = spec.span("model", name, key)
            if isinstance(normalizer, nodes.Sigmoid) and attention.sinks:
                raise SpecError("sigmoid attention takes no sinks: a sink is one more column of a softmax, and sigmoid "
                                "weights are not normalised over the keys", where, hint="drop sinks = true")
            if not isinstance(normalizer, nodes.Differential):
                continue
            if isinstance(attention, nodes.Latent):
                raise SpecError("differential attention cannot be latent: its halves of q and k would split the "
                                "latent's keys from their shared rotary part", where)
            if stack.d_k % 2:
                raise SpecError(f"differential attention splits each head's q and k into two halves, but d_k = "
                                f"{stack.d_k} in the {name} is odd", where, hint="choose heads or d_k for an even d_k")
            if isinstance(spec.model.positions, nodes.Relative):
                raise SpecError("differential attention takes no relative positions: their value term reads one map "
                                "of weights, and it has two", spec.span("model", "positions"))
        own = isinstance(getattr(stack.attention, "normalizer", None), nodes.Differential)
        for kind in stack.layer:
            if isinstance(spec.model.positions, nodes.Rope) and kind.attention is not None and \
                    isinstance(getattr(kind.attention, "normalizer", None), nodes.Differential) != own:
                raise SpecError(f"layer {kind.name} cannot change whether the {name}'s attention is differential with "
                                "rope: the stack makes one rotary table, d_k / 2 wide for differential attention",
                                spec.span("model", name, "layer", kind.name, "attention"))


def _rope_base(spec: nodes.Spec) -> None:
    """A rotary base or scaling of a stack or layer kind needs rotary positions."""
    if isinstance(spec.model.positions, nodes.Rope):
        return
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        for key in ("rope_base", "rope_scaling"):
            if stack is not None and getattr(stack, key) is not None:
                raise SpecError(f"{key} in the {name} needs positions = rope, not {spec.model.positions.kind}",
                                spec.span("model", name, key))


def _rope_scaling(spec: nodes.Spec) -> None:
    """A rotary scaling's arguments must leave its formulas defined: llama3's blend needs high_freq_factor
    above low_freq_factor, YaRN's ramp beta_fast above beta_slow, dynamic NTK's exponent r / (r - 2) more
    than two rotated dims, LongRoPE's factor lists one factor per rotated pair (in every layer kind too)."""
    rope = spec.model.positions
    if not isinstance(rope, nodes.Rope):
        return
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is None:
            continue
        scaling = stack.rope_scaling or rope.scaling
        where = spec.span("model", name, "rope_scaling") if stack.rope_scaling else \
            spec.span("model", "positions", "scaling")
        if isinstance(scaling, nodes.Llama3Scaling) and scaling.high_freq_factor <= scaling.low_freq_factor:
            raise SpecError(f"llama3 scaling needs high_freq_factor above low_freq_factor, got "
                            f"{scaling.high_freq_factor:g} and {scaling.low_freq_factor:g}", where,
                            hint="Llama 3.1: low_freq_factor = 1, high_freq_factor = 4")
        if isinstance(scaling, nodes.YarnScaling) and scaling.beta_fast <= scaling.beta_slow:
            raise SpecError(f"yarn scaling needs beta_fast above beta_slow, got {scaling.beta_fast:g} and "
                            f"{scaling.beta_slow:g}", where, hint="the paper's: beta_fast = 32, beta_slow = 1")
        if isinstance(scaling, nodes.DynamicScaling) and rope.dims(stack.d_k) <= 2:
            raise SpecError(f"dynamic scaling raises the base to r / (r - 2), but the {name} rotates r = "
                            f"{rope.dims(stack.d_k)} dims", where, hint="rotate more dims (fraction, d_k)")
        kinds = [(scaling, where)] + [(k.rope_scaling, spec.span("model", name, "layer", k.name, "rope_scaling"))
                                      for k in stack.layer if k.rope_scaling is not None]
        rotated = stack.attention.rope_dims if isinstance(stack.attention, nodes.Latent) else rope.dims(stack.d_k)
        for each, at in kinds:
            _longrope_factors(each, rotated, name, at)


def _longrope_factors(scaling, dims: int, stack: str, where) -> None:
    """LongRoPE divides each rotated pair's frequency by its own factor: one factor per pair, r / 2."""
    if not isinstance(scaling, nodes.LongropeScaling):
        return
    for key in ("short_factor", "long_factor"):
        got = len(getattr(scaling, key))
        if got != dims // 2:
            raise SpecError(f"longrope's {key} has {got} factor(s), but the {stack} rotates {dims} dims in "
                            f"{dims // 2} pairs: one factor per pair", where,
                            hint=f"list {dims // 2} factors, or rotate {2 * got} dims (d_k, fraction)")


def _normalization(spec: nodes.Spec) -> None:
    """A norm's bias or offset needs its gain (a stack's norms, and the dense head's)."""
    found = []
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is None:
            continue
        found.append((("model", name, "normalization"), stack.normalization))
        if stack.qk_normalization is not None:
            found.append((("model", name, "qk_normalization"), stack.qk_normalization))
        found += [(("model", name, "block", "sublayers", str(i), "normalization"), part.normalization)
                  for i, part in enumerate(stack.block.sublayers) if part.normalization is not None]
    if isinstance(spec.model.head, nodes.DenseHead):
        found.append((("model", "head", "normalization"), spec.model.head.normalization))
    for path, norm in found:
        if norm.gain:
            continue
        if isinstance(norm, nodes.LayerNorm) and norm.bias:
            raise SpecError("layernorm(gain = false) has no bias either: write layernorm(gain = false, bias = false)",
                            spec.span(*path))
        if isinstance(norm, nodes.RMSNorm) and norm.offset:
            raise SpecError("rmsnorm(offset = 1) adds 1 to a learned gain, so it needs gain = true", spec.span(*path))


def _block(spec: nodes.Spec) -> None:
    """Parallel sub-layers add both outputs to the layer's input: a norm after the sum (post) has no
    place in them, nor has cross-attention (which reads the self-attention's output)."""
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is None or not isinstance(stack.block, nodes.Parallel):
            continue
        for i, part in enumerate(stack.sublayers(False)):
            if part.norm != "post":
                continue
            own = stack.block.sublayers and stack.block.sublayers[i].norm is not None
            where = spec._spans.get(("model", name, "block", "sublayers", str(i))) if own else None
            where = where or spec._spans.get(("model", name, "norm")) or spec.span("model", name, "block")
            raise SpecError(f"a parallel block in the {name} needs its norms before the sub-layers, not norm = post",
                            where, hint="write norm = pre (or output, sandwich)")
        if name == "decoder" and spec.model.encoder is not None:
            raise SpecError("a parallel block has no place for cross-attention: the decoder of an "
                            "encoder-decoder model stays sequential", spec.span("model", name, "block"))


def _sublayers(spec: nodes.Spec) -> None:
    """Written-out sub-layers: one self-attention each layer, cross-attention once exactly where the decoder
    reads an encoder (the decoding cache holds one of each); a parallel block's are the shorthand's."""
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is None or not stack.block.sublayers:
            continue
        where = spec.span("model", name, "block")
        if isinstance(stack.block, nodes.Parallel):
            if [s.kind for s in stack.block.sublayers] != ["attention", "ffn"]:
                raise SpecError("a parallel block's sub-layers are attention and ffn, in that order, reading one "
                                "input", where, hint="write parallel(attention(...), ffn(...), norms = 1 | 2), or "
                                                     "a sequential(...) block")
            continue
        cross = name == "decoder" and spec.model.encoder is not None
        kinds = [s.kind for s in stack.block.sublayers]
        for kind, wanted in (("attention", 1), ("cross_attention", 1 if cross else 0)):
            if kinds.count(kind) != wanted:
                extra = [i for i, k in enumerate(kinds) if k == kind][wanted:]
                at = spec._spans.get(("model", name, "block", "sublayers", str(extra[0]))) if extra else None
                reads = "reads no encoder" if name == "decoder" else "is an encoder"
                message = f"the {name} {reads}, so its layers have no cross_attention sub-layer" if not wanted \
                    else f"a layer of the {name} has one {kind} sub-layer, but its block lists {kinds.count(kind)}"
                raise SpecError(message,
                                at or where, hint="e.g. block = sequential(" +
                                ", ".join(s.kind for s in nodes.paper_sublayers(cross)) + ")")


def _residual_stream(spec: nodes.Spec) -> None:
    """A sub-layer's skip and gain need the norms they are defined with: DeepNorm's alpha x inside a post-norm,
    Norm(x, alpha x + F(x)); a normed skip a norm before the sub-layer. A norm-only step has no keys of its own."""
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is None or not stack.block.sublayers:
            continue
        for i, (written, part) in enumerate(zip(stack.block.sublayers, stack.sublayers(False))):
            where = spec._spans.get(("model", name, "block", "sublayers", str(i))) or spec.span("model", name, "block")
            if isinstance(part, nodes.Stream):
                continue
            if part.skip is not None and isinstance(stack.block, nodes.Parallel):
                raise SpecError("a parallel block adds both outputs to one skip, x + F(x) + G(x): its sub-layers "
                                "take no skip", where, hint="write the skip in a sequential(...) block")
            if isinstance(part.skip, nodes.DeepNorm) and part.norm != "post":
                raise SpecError(f"skip = deepnorm is Norm(alpha x + F(x)), a post-norm, but this sub-layer's norm is "
                                f"{part.norm}", where, hint="write norm = post on it (or a number: skip = 0.5)")
            if isinstance(part.skip, nodes.NormedSkip) and part.norm not in ("pre", "sandwich"):
                raise SpecError(f"skip = normed carries the normed input, but this sub-layer's norm is {part.norm}: "
                                "it has no norm before it", where, hint="write norm = pre (or sandwich)")


def _connections(spec: nodes.Spec) -> None:
    """Connections across layers join a layer's input to other layers' values: a stack needs two layers for them."""
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        for key in ("unet", "reinject", "value_residual"):
            if stack is not None and getattr(stack, key) and stack.layers < 2:
                raise SpecError(f"{key} = true connects layers across the {name}, which has one layer",
                                spec.span("model", name, key), hint="write layers = 2 or more, or leave it out")
        if stack is not None and stack.value_residual and any(
                isinstance(seen.attention, nodes.Latent) for _, seen in stack.layer_plan()):
            raise SpecError(f"value_residual = true mixes each layer's values with the first layer's, but the {name} "
                            "has latent attention, whose values are made from a compressed cache",
                            spec.span("model", name, "value_residual"), hint="use scaled_dot or local attention")


def _prefix_mask(spec: nodes.Spec) -> None:
    """mask = prefix (a prefix LM): a decoder-only model's source is the prefix of its input; with an encoder the
    source is the encoder's. A local window and a bidirectional prefix disagree on which keys a position sees."""
    decoder = spec.model.decoder
    if decoder is None or decoder.mask != "prefix":
        return
    where = spec.span("model", "decoder", "mask")
    if spec.model.encoder is not None:
        raise SpecError("mask = prefix makes a decoder-only model bidirectional over its input's prefix (the "
                        "source), but this model has an encoder, which reads the source", where,
                        hint="leave mask out (causal), or drop the encoder block")
    if any(isinstance(seen.attention, nodes.Local) for _, seen in decoder.layer_plan()):
        raise SpecError("mask = prefix sees the whole prefix from every position, but the decoder has local "
                        "attention, which sees only a window", where,
                        hint="use scaled_dot (or latent) attention with mask = prefix")


def _layer_kinds(spec: nodes.Spec) -> None:
    """Each layer kind names at least one layer, no layer has two kinds, and every layer, as its kind
    changes it, keeps the stack rules (checked with the stack's own rules on each kind's view)."""
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is None or not stack.layer:
            continue
        owner: dict[int, str] = {}
        prefixes: dict[str, str] = {}
        for n, kind in enumerate(stack.layer):
            where = spec.span("model", name, "layer", kind.name)
            if n == nodes.LAYER_KIND_LIMIT:
                raise SpecError(f"the {name} has more than {nodes.LAYER_KIND_LIMIT} layer kinds", where,
                                hint="each kind is lowered and printed as a class of its own")
            if kind.name in STACKS_NAMED:
                raise SpecError(f'a layer kind cannot be named "{kind.name}": the build report names a stack\'s '
                                "own layers so", where)
            clash = prefixes.setdefault(kind.class_prefix, kind.name)
            if clash != kind.name:
                raise SpecError(f"layer kinds {clash} and {kind.name} would both be the class "
                                f"{kind.class_prefix}{name.capitalize()}Layer", where,
                                hint="give kinds names that differ in more than their underscores")
            found = kind.indices(stack.layers)
            if not found:
                raise SpecError(f"layer {kind.name} starts at index {kind.start}, but the {name} has "
                                f"{stack.layers} layers (0 to {stack.layers - 1})",
                                spec.span("model", name, "layer", kind.name, "start"))
            for i in found:
                if i in owner:
                    raise SpecError(f"layer {i} of the {name} is both {owner[i]} and {kind.name}", where,
                                    hint="give the kinds start, every and count that do not overlap")
                owner[i] = kind.name
            view = spec.model.model_copy(update={name: stack.model_copy(update={**kind.changes(), "layer": ()})})
            seen = spec.model_copy(update={"model": view})
            seen._spans = {k: v for k, v in spec._spans.items() if k[:2] != ("model", name)} | {
                k[:2] + k[4:]: v for k, v in spec._spans.items() if k[:4] == ("model", name, "layer", kind.name)}
            seen._spans.setdefault(("model", name), where)
            for rule in STACK_RULES:
                rule(seen)


def _ffn(spec: nodes.Spec) -> None:
    """A mixture of experts routes each token to top_k of its experts: no more than it has."""
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        ffn = stack.ffn if stack is not None else None
        if isinstance(ffn, nodes.MoE) and ffn.top_k > ffn.experts:
            raise SpecError(f"moe routes each token to top_k = {ffn.top_k} experts, but the {name} has "
                            f"{ffn.experts}", spec._spans.get(("model", name, "ffn", "top_k"))
                            or spec.span("model", name, "ffn"), hint="top_k must not exceed experts")


def _sharing(spec: nodes.Spec) -> None:
    """Parameter sets (`share`) and key/value sharing (`share_kv`) group a stack's layers: a group fits in the
    stack, and its layers are of one layer kind (a kind says what a layer is; sharing, which layers of a kind
    hold one set of weights, or attend with one layer's keys and values)."""
    for name, stack in (("encoder", spec.model.encoder), ("decoder", spec.model.decoder)):
        if stack is None:
            continue
        share, where = stack.share, spec.span("model", name, "share")
        if isinstance(share, nodes.ShareGroups) and (share.size > stack.layers or stack.layers % share.size):
            raise SpecError(f"share = groups({share.size}) splits the {name}'s {stack.layers} layers into groups of "
                            f"{share.size}, which does not divide them", where,
                            hint="write a size that divides layers (or cycle(period) for sets used in turn)")
        if isinstance(share, nodes.ShareCycle) and share.period > stack.layers:
            raise SpecError(f"share = cycle({share.period}) uses {share.period} parameter sets in turn, but the "
                            f"{name} has {stack.layers} layers", where, hint="write a period of at most layers")
        kv_where = spec.span("model", name, "share_kv")
        if stack.share_kv > stack.layers:
            raise SpecError(f"share_kv = {stack.share_kv} groups more layers than the {name} has ({stack.layers})",
                            kv_where, hint="write share_kv of at most layers (1: no sharing)")
        plan = [kind for kind, _ in stack.layer_plan()]
        _one_kind(name, plan, stack.parameter_sets(), "use one parameter set", where)
        _one_kind(name, plan, tuple(stack.kv_source(i) for i in range(stack.layers)),
                  "attend with one layer's keys and values", kv_where)
        if stack.share_kv > 1:
            _kv_sharing(spec, name, stack, kv_where)


def _one_kind(name: str, plan: list[str], groups: tuple[int, ...], what: str, where) -> None:
    """The layers of each group are of one layer kind."""
    first: dict[int, int] = {}
    for i, group in enumerate(groups):
        j = first.setdefault(group, i)
        if plan[i] != plan[j]:
            kinds = [f"kind {plan[n]}" if plan[n] else "the stack's own" for n in (j, i)]
            raise SpecError(f"layers {j} and {i} of the {name} {what}, but one is {kinds[0]}, the other "
                            f"{kinds[1]}", where,
                            hint="layers that share are of one layer kind: change the sharing or the kinds")


def _kv_sharing(spec: nodes.Spec, name: str, stack: nodes.Stack, where) -> None:
    """A layer that reuses keys and values computes none, so nothing of its own may change them."""
    if stack.value_residual:
        raise SpecError(f"share_kv = {stack.share_kv} makes layers reuse another layer's values, but value_residual "
                        "mixes each layer's own values with the first layer's", where,
                        hint="use one of share_kv and value_residual")
    for kind, what in ((nodes.Latent, "latent attention, whose keys and values are made from a compressed cache"),
                       (nodes.Local, "local attention, whose cache keeps only its window")):
        if any(isinstance(seen.attention, kind) for _, seen in stack.layer_plan()):
            raise SpecError(f"share_kv = {stack.share_kv} shares keys and values across layers, but the {name} has "
                            f"{what}", where, hint="use scaled_dot attention")
    sets, n = stack.parameter_sets(), stack.share_kv
    for i, s in enumerate(sets):
        j = sets.index(s)
        if (i % n == 0) != (j % n == 0):
            raise SpecError(f"layers {j} and {i} of the {name} use one parameter set, but with share_kv = {n} one "
                            "computes keys and values and the other reads them (it has no k/v projections)",
                            spec.span("model", name, "share"),
                            hint=f"share sets among layers i with the same i % {n} == 0, e.g. cycle({n})")


STACKS_NAMED = ("encoder", "decoder")  # the build report's name of a stack's own layers
RULES = (_stacks, _tie, _vocab, _embeddings, _attention, _positions, _checkpoint, _validation, _schedule, _local_window,
         _relative_scores, _mlm, _kv_heads, _rope, _latent, _normalization, _block, _sublayers, _rope_base,
         _rope_scaling, _ffn, _residual_stream, _connections, _prefix_mask, _normalizer,
         _layer_kinds, _sharing)
# the rules a layer kind's view of its stack must keep too
STACK_RULES = (_attention, _local_window, _relative_scores, _kv_heads, _rope, _normalization, _block, _sublayers,
               _rope_base, _rope_scaling, _ffn, _residual_stream, _normalizer)


def verify(spec: nodes.Spec) -> nodes.Spec:
    """Check every cross-field rule; return the spec unchanged when all hold."""
    for rule in RULES:
        rule(spec)
    return spec
