"""Hugging Face tokenizers (byte-level BPE, WordPiece, Unigram: any `tokenizer.json`) as a checkpoint stores
them: `tokenizer.json` through the `tokenizers` library, in an envelope that says how attncomp reads it.

An imported checkpoint's tokenizer is this JSON object (UTF-8), where a sentencepiece model would be:

    {"format": "attncomp/hf-tokenizer", "version": 1,
     "tokenizer": "<tokenizer.json's text, as the model directory had it>",
     "exchanged": null | P,          null; P: ids 0 and P exchange places (checkpoints imported before the
                                     spec's vocabulary declared the model's ids, which moved its pad P to 0)
     "specials": {"pad", "unk", "bos", "eos", "sep", "start", "forced"},   as the spec's vocab declares them
                                     (and "mask", where the tokenizer has a special [MASK] or <mask>: BERT's)
     "source": [...],                the source frame: ids and "text" (and "lang", a language token)
     "languages": {"en_XX": id, ...},   language tokens (mBART, M2M100, NLLB)
     "source_lang": "en_XX" | null,  the source language of the stored tokenizer's template
     "target_lang": "forced" | "start" | null,   where --tgt-lang goes: the forced token, or the start
     "size": N,                      the model's vocabulary (its embedding rows; at least the tokenizer's)
     "shift": "rotate"               (optional) the decoder reads the label's last token first (mBART's
                                     shift_tokens_right): a chosen target language sets the start from it
     "target": [...]}                (optional) the target frame, as "source" (ids and "text"), where a
                                     target language was chosen (`data prepare --tgt-lang`): the labels

Without "target", a target (the training labels) is `forced text </s>`. With a target language chosen
(`HFTokenizer.with_target_language`), the labels are the tokenizer's own template with that language, as
transformers' `tokenizer(src, text_target=tgt)` frames them with `tgt_lang` set: M2M100's and NLLB's
`lang text </s>`, mBART-50's `lang text </s>`, mBART's `text </s> lang`; the decoder then reads
decoder_start_token_id first (M2M100, NLLB), or, where the envelope says "rotate" (mBART), the labels' last
token (mBART: the language; mBART-50: </s>), as transformers' `shift_tokens_right` makes the decoder input.

M2M100's own checkpoints have no tokenizer.json (transformers has no fast M2M100 tokenizer): their record has
"tokenizer": null and "sentencepiece": {"model": base64 of sentencepiece.bpe.model, "vocab": vocab.json's text,
"language_codes": "m2m100" | "wmt21"}, read as transformers' M2M100Tokenizer reads them (`SentencePieceVocab`).

Ids are the model's own (attncomp.vocab.Specials): GPT-2's <|endoftext|> is its begin and end, and the
imported spec's vocabulary declares the same ids (the runner refuses a tokenizer whose ids differ).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field, replace

import sentencepiece as spm

from attncomp.errors import DataError
from attncomp.files import parse_json
from attncomp.native import native
from attncomp.optional import require
from attncomp.vocab import Specials

FORMAT = "attncomp/hf-tokenizer"
USE_HINT = ("its tokenizer.json's patterns or ids are broken: import the model again (attncomp import refuses "
            "such a tokenizer.json)")


def is_hf(model_bytes: bytes) -> bool:
    """Whether stored tokenizer bytes are this envelope (a sentencepiece model is a protobuf, never '{')."""
    return bytes(model_bytes[:1]) == b"{"


def _specials_record(specials: Specials) -> dict:
    """The envelope's "specials"; "mask" only where the tokenizer has one (earlier envelopes have none)."""
    return {**specials.tokenizer_roles(), **({} if specials.mask is None else {"mask": specials.mask}),
            "forced": list(specials.forced)}


def envelope(tokenizer_json: str | None, specials: Specials, source: list, languages: dict, source_lang: str | None,
             target_lang: str | None, size: int, sentencepiece: dict | None = None, shift: str | None = None) -> bytes:
    record = {"format": FORMAT, "version": 1, "tokenizer": tokenizer_json, "exchanged": None,
              "specials": _specials_record(specials),
              "source": source, "languages": languages, "source_lang": source_lang, "target_lang": target_lang,
              "size": size, **({} if sentencepiece is None else {"sentencepiece": sentencepiece}),
              **({} if shift is None else {"shift": shift})}
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


# what a language choice changes in a record (`data prepare --src-lang/--tgt-lang`): not the vocabulary; nor does
# "mask", which envelopes written before it was recorded lack (the spec's vocabulary is checked against it)
CHOICES = ("source_lang", "target")
CHOSEN_SPECIALS = ("start", "forced", "mask")


def _record(model_bytes: bytes):
    """The stored envelope's JSON value, read as every JSON file is (attncomp.files.parse_json: bounded depth)."""
    return parse_json(bytes(model_bytes), "the stored tokenizer",
                      error=lambda message: DataError(f"{message}: neither a sentencepiece model nor a "
                                                      "tokenizer.json envelope"))


def vocabulary_record(model_bytes: bytes) -> dict:
    """The record without its language choices: two envelopes with the same one read text as the same ids."""
    record = _record(model_bytes)
    for key in CHOICES:
        record.pop(key, None)
    record["specials"] = {k: v for k, v in record["specials"].items() if k not in CHOSEN_SPECIALS}
    return record


def _id(value, what: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise DataError(f"the stored tokenizer is damaged: {what} is {str(value)[:40]!r}, not a token id")


# M2M100Tokenizer's special tokens: transformers splits the text on them (and on the language tokens, which
# the checkpoints' tokenizer_config.json lists as additional special tokens) before sentencepiece sees it
M2M100_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
M2M100_CONFIG = "tokenizer_config.json"


def _shift(value) -> str | None:
    if value in (None, "rotate"):
        return value
    raise DataError(f"the stored tokenizer is damaged: shift is {str(value)[:40]!r}, not \"rotate\"")


def _frame_of(value) -> list | None:
    """A stored target frame: token ids and one "text"."""
    if value is None:
        return None
    if not isinstance(value, list) or value.count("text") != 1 or None in value:
        raise DataError("the stored tokenizer is damaged: its target frame is not a list of ids around one \"text\"")
    return [item if item == "text" else _id(item, "a target frame token") for item in value]


def _source_of(value) -> list:
    """A stored source frame: token ids, at most one "lang", and exactly one "text" (without it every line
    would be read as nothing)."""
    if not isinstance(value, list) or value.count("text") != 1 or value.count("lang") > 1 or None in value:
        raise DataError("the stored tokenizer is damaged: its source frame is not a list of ids around one \"text\"")
    return [item if item in ("text", "lang") else _id(item, "a source frame token") for item in value]


@dataclass
class _Encoding:
    ids: list[int]


class SentencePieceVocab:
    """transformers' M2M100Tokenizer, which is a slow tokenizer only: the text split on its special and
    language tokens, each piece of sentencepiece's segmentation looked up in vocab.json (<unk> where it is
    not there); `languages` are the language tokens' ids (the model's), after vocab.json's. It answers the
    calls HFTokenizer makes of a tokenizers.Tokenizer."""

    def __init__(self, model: bytes, vocab: dict, languages: dict[str, int]):
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.LoadFromSerializedProto(model)
        except Exception as err:  # sentencepiece raises RuntimeError/OSError with C++ messages
            raise DataError(f"not a sentencepiece model ({' '.join(str(err).split())[:120]})") \
                from None
        if self.sp.get_piece_size() == 0:
            raise DataError("a sentencepiece model without pieces")
        if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()) or "<unk>" not in vocab:
            raise DataError("the vocab.json is not an object of token ids with <unk>")
        self.encoder, self.decoder = vocab, {i: piece for piece, i in vocab.items()}
        self.unk = vocab["<unk>"]
        self.whole = {**{t: vocab.get(t, self.unk) for t in M2M100_SPECIALS}, **languages}  # never split
        self.skipped = set(self.whole.values())
        longest_first = sorted(self.whole, key=len, reverse=True)
        self.split = re.compile("(" + "|".join(re.escape(t) for t in longest_first) + ")")

    def _ids(self, line: str) -> list[int]:
        ids = []
        for part in self.split.split(line):
            if part in self.whole:
                ids.append(self.whole[part])
            elif part:
                ids += [self.encoder.get(piece, self.unk) for piece in self.sp.encode(part, out_type=str)]
        return ids

    def encode_batch(self, lines: list[str], add_special_tokens: bool = False) -> list[_Encoding]:
        assert not add_special_tokens  # the frame is the envelope's
        return [_Encoding(self._ids(line)) for line in lines]

    def decode_batch(self, seqs: list[list[int]], skip_special_tokens: bool = True) -> list[str]:
        """The pieces of the ids that have one, special and language tokens dropped (skip_special_tokens)."""
        assert skip_special_tokens
        return [self.sp.decode_pieces([self.decoder[i] for i in seq if i in self.decoder and i not in self.skipped])
                .strip() for seq in seqs]

    def id_to_token(self, i: int) -> str | None:
        """vocab.json's piece of id i, or its language token (None: no token has it)."""
        return self.decoder.get(i) or next((t for t, j in self.whole.items() if j == i), None)

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return len(self.encoder) + len(self.whole) - len(M2M100_SPECIALS)


@dataclass
class HFTokenizer:
    """Text <-> attncomp token ids through a `tokenizer.json` (or M2M100's sentencepiece model and vocab.json);
    the interface of data.tokenizer.Tokenizer."""

    model_bytes: bytes
    specials: Specials
    source: list
    languages: dict
    source_lang: str | None
    target_lang: str | None
    exchanged: int | None
    size: int = 0
    shift: str | None = None  # "rotate": the decoder reads the labels' last token first (mBART)
    target_frame: list | None = None  # the labels' frame where a target language was chosen (ids and "text")
    tok: object = field(default=None, repr=False, compare=False)  # the tokenizers.Tokenizer

    @classmethod
    def from_bytes(cls, model_bytes: bytes) -> "HFTokenizer":
        record = _record(model_bytes)
        if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("version") != 1:
            raise DataError(f"the stored tokenizer is not a version-1 {FORMAT} record")
        try:
            s = record["specials"]
            specials = Specials(pad=_id(s["pad"], "pad"), unk=_id(s["unk"], "unk"), bos=_id(s["bos"], "bos"),
                                eos=_id(s["eos"], "eos"), sep=_id(s["sep"], "sep"), mask=_id(s.get("mask"), "mask"),
                                start=_id(s["start"], "start"),
                                forced=tuple(_id(t, "a forced token") for t in s["forced"]))
            languages = {str(k): _id(v, f"language {k}") for k, v in record["languages"].items()}
            self = cls(bytes(model_bytes), specials, _source_of(record["source"]), languages, record["source_lang"],
                       record["target_lang"], _id(record["exchanged"], "exchanged"), _id(record["size"], "size"),
                       _shift(record.get("shift")), _frame_of(record.get("target")))
            text = record["tokenizer"]
            if "sentencepiece" in record:  # M2M100's sentencepiece.bpe.model and vocab.json
                pieces = record["sentencepiece"]
                model_ids = {code: self._swap(i) for code, i in languages.items()}
                self.tok = SentencePieceVocab(base64.b64decode(pieces["model"], validate=True),
                                              parse_json(pieces["vocab"], "the stored vocab.json", DataError),
                                              model_ids)
                return self._checked()
        except (KeyError, TypeError, AttributeError, ValueError) as err:  # binascii.Error is a ValueError
            raise DataError(f"the stored tokenizer record is damaged ({type(err).__name__}: {str(err)[:120]})") \
                from None
        tokenizers = require("tokenizers", "a Hugging Face tokenizer")
        with native("the stored tokenizer.json is not readable by tokenizers"):
            self.tok = tokenizers.Tokenizer.from_str(text)
        return self._checked()

    def _checked(self) -> "HFTokenizer":
        """This tokenizer, once every id it can produce is one of the model's `size` embedding rows: its tokens,
        special, forced and language ids, its frames' ids and its exchange (a damaged or hand-made envelope's
        id past the rows was an IndexError in beam search)."""
        s = self.specials
        named = [*({**s.tokenizer_roles(), "mask": s.mask}.items()), *(("a forced token", t) for t in s.forced),
                 *((f"language {k}", v) for k, v in self.languages.items()),
                 *(("a source frame token", i) for i in self.source if isinstance(i, int)),
                 *(("a target frame token", i) for i in self.target_frame or () if isinstance(i, int)),
                 ("exchanged", self.exchanged)]
        for what, i in named:
            if i is not None and i >= self.size:
                raise DataError(f"the stored tokenizer is damaged: {what} is {i}, past the model's {self.size} "
                                "embedding rows")
        with native("the stored tokenizer is not readable"):
            tokens = self.tok.get_vocab_size(with_added_tokens=True)
        if tokens > self.size:
            raise DataError(f"the stored tokenizer is damaged: it has {tokens} tokens, more than the model's "
                            f"{self.size} embedding rows")
        return self

    # --- ids: attncomp's <-> the model's (an exchange is its own inverse) ---------------------------------

    def _swap(self, i: int) -> int:
        p = self.exchanged
        return i if p is None else p if i == 0 else 0 if i == p else i

    @property
    def vocab_size(self) -> int:
        return max(self.size, self.tok.get_vocab_size(with_added_tokens=True))

    def language(self, code: str | None, what: str) -> int:
        """A language token's id; M2M100's `__de__` may be given as transformers names it there, `de`."""
        if code in self.languages:
            return self.languages[code]
        if f"__{code}__" in self.languages:
            return self.languages[f"__{code}__"]
        shown = ", ".join(sorted(self.languages)[:12]) or "none"
        raise DataError(f"{what} {str(code)[:40]!r} is not a language of this tokenizer (it has: {shown})")

    def with_target_language(self, code: str | None) -> "HFTokenizer":
        """This tokenizer with decoding's start or forced tokens set to language `code` (--tgt-lang), and
        its labels framed as the tokenizer's template frames a target in that language (`tgt_lang`)."""
        if code is None:
            return self
        if self.target_lang is None:
            raise DataError("--tgt-lang: this model has no target-language token (no language codes in its "
                            "tokenizer)")
        lang = self.language(code, "--tgt-lang")
        frame = [lang if item == "lang" else item for item in self.source] if "lang" in self.source else None
        if self.shift == "rotate" and frame is not None:  # mBART: the decoder input starts with the labels' last
            specials = replace(self.specials, start=frame[-1], forced=tuple(frame[: frame.index("text")]))
        elif self.target_lang == "forced":
            specials = replace(self.specials, forced=(lang,))
        else:
            specials = replace(self.specials, start=lang)
        return replace(self, specials=specials, target_frame=frame)

    def with_source_language(self, code: str | None) -> "HFTokenizer":
        if code is None:
            return self
        lang = self.language(code, "--src-lang")
        return replace(self, source_lang=next(name for name, i in self.languages.items() if i == lang))

    def encode(self, lines: list[str]) -> list[list[int]]:
        """The ids of each line's text, without special tokens."""
        with native("the stored tokenizer failed to encode the text", USE_HINT):
            encoded = self.tok.encode_batch(list(lines), add_special_tokens=False)
        return [[self._swap(i) for i in e.ids] for e in encoded]

    def frame(self, body: list[int]) -> list[int]:
        """A source as the model reads it: the frame of the stored template around the text (</s> included)."""
        out = []
        for item in self.source:
            if item == "text":
                out += body
            elif item == "lang":
                out.append(self.language(self.source_lang, "the source language"))
            else:
                out.append(item)
        return out

    def frame_size(self) -> int:
        return len(self.source) - 1

    def target(self, body: list[int]) -> list[int]:
        """A target as the decoder is trained on it (the labels): the chosen language's frame, or else the
        forced tokens, the text, </s>."""
        if self.target_frame is not None:
            at = self.target_frame.index("text")
            return [*self.target_frame[:at], *body, *self.target_frame[at + 1:]]
        return [*self.specials.forced, *body, *([] if self.specials.eos is None else [self.specials.eos])]

    def to_bytes(self) -> bytes:
        """The envelope of this tokenizer as chosen (its source language, target specials and frame)."""
        record = _record(self.model_bytes)
        record.update(source_lang=self.source_lang, specials=_specials_record(self.specials))
        if self.target_frame is not None:
            record["target"] = self.target_frame
        return json.dumps(record, ensure_ascii=False).encode("utf-8")

    def encode_with_eos(self, lines: list[str]) -> list[list[int]]:
        """Data preparation's ids of each line: the target frame (forced tokens, text, </s>)."""
        return [self.target(ids) for ids in self.encode(lines)]

    def encode_source(self, lines: list[str]) -> list[list[int]]:
        """Data preparation's ids of each source line: the source frame."""
        return [self.frame(ids) for ids in self.encode(lines)]

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Ids -> text; special tokens are dropped (as skip_special_tokens does), and a line break that a
        byte-level vocabulary can generate becomes a space: one line of text per sentence."""
        with native("the stored tokenizer failed to decode the model's output", USE_HINT):
            texts = self.tok.decode_batch([[self._swap(i) for i in seq] for seq in ids], skip_special_tokens=True)
        return [t.replace("\r\n", " ").replace("\n", " ").replace("\r", " ") for t in texts]

    def files(self) -> dict[str, bytes]:
        """The tokenizer files of a save_pretrained directory: tokenizer.json as the imported directory had it,
        or M2M100's sentencepiece.bpe.model, vocab.json and a tokenizer_config.json naming its language codes."""
        record = _record(self.model_bytes)
        if "sentencepiece" not in record:
            return {"tokenizer.json": record["tokenizer"].encode("utf-8")}
        pieces = record["sentencepiece"]
        config = {"tokenizer_class": "M2M100Tokenizer", "language_codes": pieces["language_codes"],
                  "src_lang": (self.source_lang or "__en__").strip("_"),
                  "additional_special_tokens": list(self.languages)}
        return {"sentencepiece.bpe.model": base64.b64decode(pieces["model"]),
                "vocab.json": pieces["vocab"].encode("utf-8"), M2M100_CONFIG: json.dumps(config).encode("utf-8")}
