"""The model families, one table entry each: what every stage asks about the kind of model a spec describes.

    family            stacks              entry points                                   objective
    encoder-decoder   encoder, decoder    forward(src, tgt_in) hidden hidden_dense       translation
                                          encode(src) init_cache(src, memory) decode_step
    decoder-only      decoder             forward(tokens) hidden init_cache(tokens)      language_model
                                          decode_step
    encoder-only      encoder             forward(src) hidden hidden_dense encode(src)   masked_lm

With `segments = N`, the entry points that read the source (forward, hidden, hidden_dense, encode) take
its segment ids as a last argument `segments` (default None: segment 0 everywhere).
With `mask = prefix` (a prefix LM), a decoder-only model's forward and hidden take each row's prefix length
as a last argument `prefix` (B,) int64 (default None: no prefix, causal everywhere), and its init_cache
encodes the tokens it is given as the prefix, in one step (every row's prefix is all of them), so that
decode_step continues causally after it.

`hidden` gives the states before the output projection (after the prediction head, if any) for a
loss that fuses the projection; `hidden_dense` the same without a source padding mask, for batches
without padding, so every attention can use the flash kernel. decode_step takes the newest token
(B, 1) and a DecodingCache and returns the next token's logits (B, V) and the cache, extended; how
decoding starts from a source (`source`): through the encoder ("encoded"), or fed to the decoder as a
prompt ("prompt").

The table is data of the IR, below lowering: the runtime (data, training, decoding, checkpoints) asks it
what a model's batches hold and how it decodes without importing the compiler; attncomp.lower.family
lowers each family's entry points. Nothing outside this table asks which stacks a model has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attncomp.ir import nodes
from attncomp.vocab import Specials

SEGMENTED = ("forward", "hidden", "hidden_dense", "encode")  # entry points that read the source's tokens
PREFIXED = ("forward", "hidden")  # a prefix LM's entry points that take the rows' prefix lengths


@dataclass(frozen=True)
class Entry:
    name: str
    inputs: tuple[str, ...]
    returns: str


@dataclass(frozen=True)
class Family:
    name: str
    title: str  # "an encoder-decoder Transformer"
    stacks: tuple[str, ...]
    entries: tuple[Entry, ...]
    objective: str  # attncomp.data.batching: "translation", "language_model" or "masked_lm"
    source: str  # how decoding reads a source: "encoded", "prompt", or "none" (no decoder)

    @property
    def entry_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entries)

    def entry(self, name: str) -> Entry:
        return next(e for e in self.entries if e.name == name)

    @property
    def decodes(self) -> bool:
        return "decode_step" in self.entry_names

    def forward_inputs(self, src: Any, tgt: Any) -> tuple[Any, ...]:
        """forward's arguments from a batch of sources and target inputs."""
        by_name = {"src": src, "tgt_in": tgt, "tokens": tgt}
        return tuple(by_name[name] for name in self.entries[0].inputs)

    @staticmethod
    def segmented(arch: nodes.ModelSpec, entry: str) -> bool:
        """Whether `entry` takes the source's segment ids as a last, optional argument (`segments = N`)."""
        return bool(arch.segments) and entry in SEGMENTED

    @staticmethod
    def prefixed(arch: nodes.ModelSpec, entry: str) -> bool:
        """Whether `entry` takes the rows' prefix lengths as a last, optional argument (`mask = prefix`)."""
        return prefix_lm(arch) and entry in PREFIXED


def prefix_lm(arch: nodes.ModelSpec) -> bool:
    """A decoder-only model whose self-attention sees its input's prefix both ways (`decoder { mask = prefix }`)."""
    return arch.decoder is not None and arch.decoder.mask == "prefix"


def _entries(*rows: tuple[str, tuple[str, ...], str]) -> tuple[Entry, ...]:
    return tuple(Entry(*row) for row in rows)


ENCODER_DECODER = Family(
    "encoder-decoder", "an encoder-decoder Transformer", ("encoder", "decoder"),
    _entries(("forward", ("src", "tgt_in"), "logits"), ("hidden", ("src", "tgt_in"), "states"),
             ("hidden_dense", ("src", "tgt_in"), "states"), ("encode", ("src",), "memory"),
             ("init_cache", ("src", "memory"), "cache"), ("decode_step", ("tokens", "cache"), "(logits, cache)")),
    "translation", "encoded")
DECODER_ONLY = Family(
    "decoder-only", "a decoder-only Transformer language model", ("decoder",),
    _entries(("forward", ("tokens",), "logits"), ("hidden", ("tokens",), "states"),
             ("init_cache", ("tokens",), "cache"), ("decode_step", ("tokens", "cache"), "(logits, cache)")),
    "language_model", "prompt")
ENCODER_ONLY = Family(
    "encoder-only", "an encoder-only Transformer", ("encoder",),
    _entries(("forward", ("src",), "logits"), ("hidden", ("src",), "states"), ("hidden_dense", ("src",), "states"),
             ("encode", ("src",), "memory")),
    "masked_lm", "none")
FAMILIES = (ENCODER_DECODER, DECODER_ONLY, ENCODER_ONLY)


def family_of(arch: nodes.ModelSpec) -> Family:
    """The family of a model: the one place that asks which stacks it has."""
    if arch.encoder is not None and arch.decoder is not None:
        return ENCODER_DECODER
    return DECODER_ONLY if arch.decoder is not None else ENCODER_ONLY


def named(name: str) -> Family:
    """The family called `name` ("encoder-decoder", "decoder-only", "encoder-only")."""
    return next(f for f in FAMILIES if f.name == name)


@dataclass(frozen=True)
class ModelFacts:
    """What the runtime needs to know of a model beyond its protocol, to batch data for it and decode with it:
    made from a spec's model block (`facts_of`), or from a model a factory made (attncomp.train.factory)."""

    name: str
    family: Family
    src_vocab: int
    tgt_vocab: int
    specials: Specials
    segments: int = 0  # segment embeddings (`segments = N`): encoder-only pairs read both sides as two segments
    max_positions: int | None = None  # a learned position table's rows; None: any length
    mask: int | None = None  # the <mask> id the vocabulary declares explicitly (named in messages only)
    prefix: bool = False  # a prefix LM (`mask = prefix`): a pair's source is its input's prefix, seen both ways


def facts_of(arch: nodes.ModelSpec | ModelFacts) -> ModelFacts:
    """The facts of a spec's model block (a ModelFacts is returned as it is)."""
    if isinstance(arch, ModelFacts):
        return arch
    learned = isinstance(arch.positions, nodes.Learned)
    return ModelFacts(arch.name, family_of(arch), arch.src_vocab, arch.tgt_vocab, arch.specials, arch.segments,
                      arch.positions.max_len if learned else None, arch.vocab.mask, prefix_lm(arch))


@dataclass(frozen=True)
class Described:
    """A model's facts with its recipe: what the runtime reads where a spec-trained run reads its Spec (the same
    attribute names: `model`, `train`, `decode`), so a model a factory made trains and decodes alike."""

    model: ModelFacts
    train: nodes.Train
    decode: nodes.Decode


def described(spec: nodes.Spec) -> Described:
    return Described(facts_of(spec.model), spec.train, spec.decode)
