"""Special token ids: attncomp's own (every vocabulary it trains: sentencepiece is trained with them), and
`Specials`, the roles a tokenizer declares, which every stage that needs one of them reads.

A checkpoint imported from Hugging Face keeps its model's ids (GPT-2 has one token for begin, end and
unknown, and no pad; Llama's <s> is 1 and </s> 2): its stored tokenizer declares them (attncomp.data.
hf_tokenizer), and batching, decoding and data preparation take them from the tokenizer. The spec's
vocabulary declares no special ids: padding is id 0 in every compiled model (its masks and the loss),
which an import keeps by exchanging rows 0 and pad where the family has a pad other than 0.
"""

from __future__ import annotations

from dataclasses import dataclass

PAD, UNK, BOS, EOS, SEP = 0, 1, 2, 3, 4
SPECIAL_TOKENS = 5


@dataclass(frozen=True)
class Specials:
    """The ids of a vocabulary's special roles; None where the vocabulary has no such token.

    `start` is what the decoder reads first (its <s>; an encoder-decoder's decoder_start_token_id), `forced`
    the tokens every target begins with after it (BART's <s>: forced_bos_token_id), `sep` what joins a
    decoder-only model's source and target (attncomp's <sep>; None: a plain continuation)."""

    pad: int | None = PAD  # None: the vocabulary has none (batches still pad with id 0, which is masked)
    unk: int | None = UNK
    bos: int | None = BOS
    eos: int | None = EOS  # None: the model declares no end (it cannot generate)
    sep: int | None = SEP
    start: int = BOS
    forced: tuple[int, ...] = ()

    def never_generated(self) -> list[int]:
        """Tokens decoding never emits: padding, <s> and <sep> (none of them when it is also </s>)."""
        return sorted({t for t in (self.pad, self.bos, self.sep) if t is not None and t != self.eos})


DEFAULT = Specials()
