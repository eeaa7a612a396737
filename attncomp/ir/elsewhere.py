"""Where the language writes what other toolkits name on their own: the pointer an unknown word gets.

A researcher who knows x-transformers, Hugging Face or fairseq writes `layerscale = 0.1` in a stack,
`attention = sigmoid`, or `lr = 1e-3` in `train`. "did you mean" finds spelling mistakes, not these: the part
exists, under another key. Each row is data: the word as others spell it, what it is here, and how to write it
(docs/language.md has the section named). A word in KEYS is an unknown key anywhere; one in VALUES an unknown
choice of that key only (`sigmoid` is an attention's normalizer, not an activation).
"""

from __future__ import annotations

from attncomp.errors import Span, SpecError

_SUBLAYERS = "block = sequential(attention({arg}), ffn({arg}))"

KEYS: dict[str, tuple[str, str]] = {  # unknown key -> (what it is in attncomp, how to write it)
    "layerscale": ("LayerScale is a sub-layer's gain", _SUBLAYERS.format(arg="gain = layerscale(init = 0.1)")),
    "layer_scale": ("LayerScale is a sub-layer's gain", _SUBLAYERS.format(arg="gain = layerscale(init = 0.1)")),
    "rezero": ("ReZero is a sub-layer's gain", _SUBLAYERS.format(arg="gain = rezero")),
    "deepnorm": ("DeepNorm is a sub-layer's skip, with norm = post",
                 _SUBLAYERS.format(arg="skip = deepnorm")),
    "residual_scale": ("a residual's weights are a sub-layer's scale, gain or skip",
                       _SUBLAYERS.format(arg="scale = 0.5") + " (or gain = ..., skip = ...)"),
    "unet_skips": ("U-net skips are a stack key", "unet = true"),
    "attn_value_residual": ("value residual learning is a stack key", "value_residual = true"),
    "shared_layers": ("sharing layers is a stack key", "share = all (or groups(n), cycle(n))"),
    "share_layers": ("sharing layers is a stack key", "share = all (or groups(n), cycle(n))"),
    "share_weights": ("sharing layers is a stack key", "share = all (or groups(n), cycle(n))"),
    "cla": ("cross-layer key/value sharing is a stack key", "share_kv = 2"),
    "prefix_lm": ("a prefix LM is a decoder's mask", "decoder { mask = prefix }"),
    "pre_norm": ("norm placement is the stack's norm", "norm = pre"),
    "sandwich_norm": ("norm placement is the stack's norm", "norm = sandwich"),
    "hidden_size": ("the residual stream's width is d_model", "d_model = 512"),
    "dim": ("the residual stream's width is d_model", "d_model = 512"),
    "intermediate_size": ("the feed-forward width is d_ff", "d_ff = 2048"),
    "depth": ("a stack's depth is layers", "layers = 6"),
    "num_hidden_layers": ("a stack's depth is layers", "layers = 6"),
    "num_key_value_heads": ("grouped-query attention is kv_heads", "kv_heads = 2"),
    "n_embd": ("the residual stream's width is d_model", "d_model = 512"),
    "num_attention_heads": ("attention heads are heads", "heads = 8"),
    **{f"{stack}_{theirs}": (f"fairseq's {stack}_{theirs} is {ours} in {stack} {{ }} (or in model, for both)",
                             f"{ours} = {value}")
       for stack in ("encoder", "decoder")
       for theirs, ours, value in (("layers", "layers", 6), ("embed_dim", "d_model", 512),
                                   ("ffn_embed_dim", "d_ff", 2048), ("attention_heads", "heads", 8))},
    "lr": ("the learning rate is train's schedule", "schedule = constant(lr = 1e-4)"),
    "learning_rate": ("the learning rate is train's schedule", "schedule = constant(lr = 1e-4)"),
    "warmup": ("warm-up is train's schedule", "schedule = inverse_sqrt(peak = 5e-4, warmup = 4000)"),
    "weight_decay": ("weight decay is train's optimizer", "optimizer = adamw(weight_decay = 0.01)"),
    "label_smoothing": ("label smoothing is train's loss", "loss = cross_entropy(label_smoothing = 0.1)"),
    "batch_size": ("a batch is counted in tokens", "batch = tokens(25000)"),
    "max_tokens": ("a batch is counted in tokens", "batch = tokens(25000)"),
    "beam_size": ("the beam is decode's", "decode { beam = 4 }"),
    "num_beams": ("the beam is decode's", "decode { beam = 4 }"),
}

_DOT = "attention = scaled_dot(normalizer = {})"

VALUES: dict[tuple[str, str], tuple[str, str]] = {  # (key, unknown choice) -> (what it is, how to write it)
    ("attention", "sigmoid"): ("sigmoid attention is a dot-product attention's normalizer",
                               _DOT.format("sigmoid(length = 1024)")),
    ("attention", "differential"): ("differential attention is a dot-product attention's normalizer",
                                    _DOT.format("differential")),
    ("attention", "diff"): ("differential attention is a dot-product attention's normalizer",
                            _DOT.format("differential")),
    ("attention", "softcap"): ("soft-capping is a part of dot-product attention",
                               "attention = scaled_dot(softcap = 50)"),
    ("attention", "gqa"): ("grouped-query attention is a stack key", "kv_heads = 2"),
    ("attention", "mqa"): ("multi-query attention is a stack key", "kv_heads = 1"),
    ("attention", "mla"): ("multi-head latent attention is latent(...)",
                           "attention = latent(kv_rank = 12, rope_dims = 8)"),
    ("mask", "prefix_lm"): ("a prefix LM is mask = prefix", "decoder { mask = prefix }"),
    ("positions", "rotary"): ("rotary positions are rope", "positions = rope(base = 10000)"),
    ("norm", "deepnorm"): ("DeepNorm is a sub-layer's skip, with norm = post",
                           _SUBLAYERS.format(arg="skip = deepnorm")),
    ("norm", "rmsnorm"): ("the kind of norm is the stack's normalization", "normalization = rmsnorm"),
    ("activation", "swish"): ("swish is silu", "activation = silu"),
    ("activation", "squared_relu"): ("ReLU squared is relu2", "activation = relu2"),
}


def pointer(word: str, key: str | None = None) -> tuple[str, str] | None:
    """(what `word` is in attncomp, how to write it) for an unknown key (`key` None) or an unknown choice of `key`;
    None when attncomp has no such part under another name."""
    return KEYS.get(word.lower()) if key is None else VALUES.get((key, word.lower()))


def refusal(head: str, word: str, span: Span | None, key: str | None = None) -> SpecError | None:
    """The error for an unknown word that attncomp spells elsewhere (`head` says what was unknown, as the
    "did you mean" error would), or None: then the caller's own error stands."""
    found = pointer(word, key)
    if found is None:
        return None
    what, how = found
    return SpecError(f"{head}: {what}", span, hint=f"write {how} (docs/language.md)")
