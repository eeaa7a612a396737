"""Special token ids: attncomp's own defaults (every vocabulary it trains: sentencepiece is trained with
them), and `Specials`, the roles a vocabulary declares.

The spec's vocabulary declares them (`vocab = shared(50257, pad = none, bos = 50256, ...)`, attncomp.ir.
nodes; `ModelSpec.specials`), and every stage reads them from there: the padding mask of the compiled
model, batching, the loss, masked-LM corruption, decoding. A checkpoint imported from Hugging Face keeps
its model's ids (GPT-2 has one token for begin, end and unknown, and no pad; Llama's <s> is 1 and </s> 2;
BART's <pad> is 1), so no vocabulary rows move; its stored tokenizer declares the same ids (attncomp.data.
hf_tokenizer) and is refused where they disagree (`agree`).

Targets are padded with IGNORE, never with a token id, so a vocabulary without <pad> (GPT-2) keeps every
token in the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

PAD, UNK, BOS, EOS, SEP = 0, 1, 2, 3, 4
SPECIAL_TOKENS = 5


@dataclass(frozen=True)
class Specials:
    """The ids of a vocabulary's special roles; None where the vocabulary has no such token.

    `start` is what the decoder reads first (its <s>; an encoder-decoder's decoder_start_token_id), `forced`
    the tokens every target begins with after it (BART's <s>: forced_bos_token_id), `sep` what joins a
    decoder-only model's source and target (attncomp's <sep>; None: a plain continuation)."""

    pad: int | None = PAD  # None: the vocabulary has none (a decoder-only model's inputs pad with `filler`)
    unk: int | None = UNK
    bos: int | None = BOS
    eos: int | None = EOS  # None: the model declares no end (it cannot generate)
    sep: int | None = SEP
    mask: int | None = SEP  # masked-LM's <mask> (attncomp's vocabularies use <sep>'s id: attncomp.data.masking)
    start: int | None = BOS
    forced: tuple[int, ...] = ()

    @property
    def filler(self) -> int:
        """What pads a batch's inputs: <pad>, or (a vocabulary without one) id 0, which only a causal
        model's positions after the end read."""
        return 0 if self.pad is None else self.pad

    def ids(self) -> list[int]:
        """Every declared special id (masked-LM never chooses or draws them)."""
        return sorted({t for t in (self.pad, self.unk, self.bos, self.eos, self.sep, self.mask, self.start)
                       if t is not None})

    def never_generated(self) -> list[int]:
        """Tokens decoding never emits: padding, <s> and <sep> (none of them when it is also </s>)."""
        return sorted({t for t in (self.pad, self.bos, self.sep) if t is not None and t != self.eos})

    def tokenizer_roles(self) -> dict[str, int | None]:
        """The ids every stored tokenizer records, by role (attncomp.data.hf_tokenizer's "specials"; an export's
        special_ids): a vocabulary's roles (attncomp.ir.nodes.ROLES) but <mask>, which only some have (BERT's)."""
        return {k: getattr(self, k) for k in ("pad", "unk", "bos", "eos", "sep", "start")}


def agree(declared: Specials, tokenizer: Specials, what: str, languages=(),
          remedy: str = "write the tokenizer's ids into the spec's vocab, or prepare the data with this model's "
                        "tokenizer") -> Specials:
    """The special ids a stage uses: the spec's (`declared`), with the decoder's start and forced tokens of
    the tokenizer, where a chosen target language sets them (`translate --tgt-lang`, `data prepare
    --tgt-lang`: mBART starts its decoder with the language). A tokenizer whose ids differ otherwise (data
    prepared for another model) is refused: ValueError naming the first role that differs. `languages`: the
    tokenizer's language token ids; `remedy`: what the refusal tells the user to do. <mask> is compared only
    where the tokenizer has one (BERT's [MASK], BART's <mask>; attncomp's sentencepiece models and GPT-2's
    have none, and masked-LM then uses the spec's)."""
    recorded = {**tokenizer.tokenizer_roles(), "mask": tokenizer.mask}
    for role, value in {**declared.tokenizer_roles(), "mask": declared.mask}.items():
        theirs = recorded[role]
        if role == "start" and theirs in set(languages):
            continue  # the chosen language starts the decoder
        if role == "mask" and theirs is None:
            continue  # the tokenizer has no <mask>: masked-LM uses the spec's
        if theirs != value:
            raise ValueError(f"{what} has {role} = {_id(theirs)}, but the spec's vocabulary declares {role} = "
                             f"{_id(value)}: {remedy}")
    return replace(declared, start=tokenizer.start, forced=tokenizer.forced)


def _id(value: int | None) -> str:
    return "none" if value is None else str(value)


IGNORE = -1  # a padded target: the loss reads none of them


DEFAULT = Specials()
