"""An imported model's tokenizer and special ids: `tokenizer.json` (through the `tokenizers` library) and
`generation_config.json` (through transformers' GenerationConfig) -> the envelope a checkpoint stores
(attncomp.data.hf_tokenizer), with the model's own ids (attncomp.vocab.Specials).

    decoder-only      <s> text </s> (the start is the model's bos, or its eos where it has none: GPT-2's
                      <|endoftext|> is both); no <sep>: generation continues the prompt
    encoder-decoder   the source as the tokenizer's template frames it (BART's <s> text </s>, M2M100's and
                      NLLB's `lang text </s>`, mBART's `text </s> lang`); the decoder starts with
                      decoder_start_token_id, then the forced tokens (forced_bos_token_id: BART's <s>, or the
                      target language, `translate --tgt-lang`), then the text, then </s>

generation_config.json's values take precedence over config.json's, as in transformers' generate.

A family whose entry names a slow tokenizer (M2M100's own checkpoints: `M2M100Tokenizer`, which transformers
has no fast form of) is read from that tokenizer's files where DIR has no tokenizer.json: `m2m100_record`.
"""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path

from attncomp.data.hf_tokenizer import M2M100_CONFIG, M2M100_SPECIALS, SentencePieceVocab, envelope
from attncomp.errors import DataError, UsageError
from attncomp.files import parse_json, present, read_json, read_regular, shown_path
from attncomp.interop import require
from attncomp.native import native
from attncomp.vocab import Specials

MAX_TOKENIZER_BYTES = 256 << 20
TOKENIZER = "tokenizer.json"
GENERATION = "generation_config.json"
# language tokens as mBART (en_XX), NLLB (eng_Latn) and M2M100 (__en__) write them
LANGUAGE = re.compile(r"^(__[a-z]{2,3}(_[A-Za-z]{2,4})?__|[a-z]{2,3}_[A-Z][A-Za-z]{1,3})$")
PROBE = "a b"
PROBES = [c * 2000 + end for c in ("a", "A", "0", " ", ".", "-", "\u00e9", "\u65e5") for end in ("!", "")]
PROBE_SECONDS = 10.0  # what the probes may take together: a healthy tokenizer takes milliseconds


def _one_line(err: Exception) -> str:
    return (" ".join(str(err).split()) or type(err).__name__)[:160]


def _is_file(path: Path) -> bool:
    """Whether DIR has this file (attncomp.files.present: something else in its place is refused)."""
    return present(path, what="model directory's file")


def read_tokenizer(directory: Path, label: str):
    """(tokenizer.json's text, its tokenizers.Tokenizer); a missing or unreadable file is one line."""
    path = directory / TOKENIZER
    if not _is_file(path):
        raise UsageError(f"{directory} has no {TOKENIZER} (the tokenizer of a {label} model, "
                         "as save_pretrained writes it)")
    data = read_regular(path, limit=MAX_TOKENIZER_BYTES, what="tokenizer file", error=UsageError)
    parse_json(data, shown_path(path), error=lambda message: UsageError(f"{message}: not a tokenizers file"))
    text = data.decode("utf-8")
    tokenizers = require("tokenizers", "attncomp import")
    shown = shown_path(path)
    with native(f"{shown} is not a tokenizer the tokenizers library reads", error=UsageError):
        tok = tokenizers.Tokenizer.from_str(text)
    probe_patterns(tok, shown)
    return text, tok


def probe_patterns(tok, shown: str) -> None:
    """Encode runs of one character (a backtracking pattern's worst case: `(a+)+$` on "aaa...!") under a time
    bound, so that a tokenizer whose normaliser or pre-tokenizer patterns fail or hang is refused at import,
    not at every later translate, eval or data prepare."""
    start = time.monotonic()
    with native(f"{shown}: its normaliser or pre-tokenizer fails on a run of one character (a regular "
                "expression that backtracks without bound?)", "fix its patterns", error=UsageError):
        for line in PROBES:
            tok.encode(line, add_special_tokens=False)
            if time.monotonic() - start > PROBE_SECONDS:
                raise UsageError(f"{shown}: its normaliser or pre-tokenizer took over {PROBE_SECONDS} s on "
                                 f"{len(PROBES)} lines of {len(line):,} characters (a regular expression that "
                                 "backtracks without bound?); fix its patterns")


def generation_config(directory: Path) -> dict | None:
    """generation_config.json as transformers' GenerationConfig validates it (None where the directory has
    none); the import stores it so that export writes it back (its forced language, its end tokens)."""
    path = directory / GENERATION
    if not _is_file(path):
        return None
    raw = read_json(path, what="JSON file", error=UsageError)
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: JSON {type(raw).__name__}, not an object")
    transformers = require("transformers", "attncomp import")
    try:
        transformers.GenerationConfig.from_dict(raw)
    except Exception as err:  # transformers validates the fields (its own exception types)
        raise UsageError(f"{path} is not a valid GenerationConfig ({_one_line(err)})") from None
    return raw


def generation_values(directory: Path, config) -> dict:
    """decoder_start, forced_bos, bos, eos and pad ids: generation_config.json's where it has them (read
    through transformers.GenerationConfig), else config.json's."""
    names = ("decoder_start_token_id", "forced_bos_token_id", "bos_token_id", "eos_token_id", "pad_token_id")
    values = {name: getattr(config, name, None) for name in names}
    raw = generation_config(directory)
    if raw is not None:
        generation = require("transformers", "attncomp import").GenerationConfig.from_dict(raw)
        values.update({name: getattr(generation, name) for name in names if getattr(generation, name, None) is not None})
    for name, value in values.items():
        if isinstance(value, (list, tuple)):  # several end tokens (Llama 3): the first is the one attncomp ends at
            value = value[0] if value else None
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not
                                  0 <= value < config.vocab_size):
            raise UsageError(f"{directory}: {name} = {json.dumps(value, default=str)[:40]} is not a token id of the "
                             f"{config.vocab_size}-token vocabulary")
        values[name] = value
    return values


def _frame(tok, languages: dict) -> tuple[list, str | None]:
    """The source template of the tokenizer's post-processor, found by encoding a probe with and without
    its special tokens: ids around "text" (a language token as "lang"); and the language it names."""
    plain = tok.encode(PROBE, add_special_tokens=False).ids
    full = tok.encode(PROBE, add_special_tokens=True).ids
    at = next((i for i in range(len(full) - len(plain) + 1) if full[i : i + len(plain)] == plain), None)
    if at is None or not plain:
        return ["text"], None
    frame, lang = [], None
    by_id = {i: code for code, i in languages.items()}
    for token in (*full[:at], "text", *full[at + len(plain):]):
        if token != "text" and token in by_id:
            lang = by_id[token]
            frame.append("lang")
        else:
            frame.append(token)
    return frame, lang


def _unk(text: str, tok) -> int | None:
    model = parse_json(text, TOKENIZER).get("model", {})
    model = model if isinstance(model, dict) else {}
    if isinstance(model.get("unk_id"), int):  # Unigram
        return model["unk_id"]
    unk = model.get("unk_token")
    return tok.token_to_id(unk) if isinstance(unk, str) else None


def _seq2seq_specials(values: dict, unk: int | None, mask: int | None = None) -> Specials:
    """An encoder-decoder's (or an encoder's): the decoder starts with decoder_start_token_id (else bos, else
    0), then the forced token (forced_bos_token_id); `mask`: masked-LM's (an encoder-only model's)."""
    pad, bos, eos = (values[k] for k in ("pad_token_id", "bos_token_id", "eos_token_id"))
    start = values["decoder_start_token_id"]
    start = start if start is not None else (bos if bos is not None else 0)
    forced = values["forced_bos_token_id"]
    return Specials(pad=pad, unk=unk, bos=bos, eos=eos, sep=None, mask=mask, start=start,
                    forced=() if forced is None else (forced,))


def _mask(tok) -> int | None:
    """The tokenizer's mask token ([MASK], <mask>): a special added token, for masked-LM."""
    return next((i for i, t in sorted(tok.get_added_tokens_decoder().items())
                 if t.special and t.content in ("[MASK]", "<mask>")), None)


def _target_lang(specials: Specials, languages: dict) -> str | None:
    """Where --tgt-lang goes: the decoder start where the model starts with its language, else the forced token."""
    if not languages:
        return None
    return "start" if specials.start in languages.values() else "forced"


def tokenizer_name(directory: Path, family) -> str:
    """The tokenizer file(s) the import read, as the checkpoint's manifest names them."""
    if family.slow_tokenizer == "M2M100Tokenizer" and not _is_file(directory / TOKENIZER):
        return ", ".join(M2M100_FILES)
    return TOKENIZER


def tokenizer_record(directory: Path, family, config, decoder_only: bool, label: str,
                     encoder_only: bool = False) -> tuple[bytes, Specials]:
    """The envelope the checkpoint stores for the tokenizer of DIR (attncomp.data.hf_tokenizer), and the
    special ids it declares (the model's own: the imported spec's vocabulary declares the same). An
    encoder-only model whose config names no bos or eos takes them from its template (BERT's [CLS] and
    [SEP]), so that masked LM never chooses them."""
    if tokenizer_name(directory, family) != TOKENIZER:
        return m2m100_record(directory, config)
    text, tok = read_tokenizer(directory, label)
    tokens = tok.get_vocab_size(with_added_tokens=True)
    if tokens > config.vocab_size:
        raise UsageError(f"{shown_path(directory / TOKENIZER)} has {tokens} tokens, more than the model's "
                         f"{config.vocab_size} embedding rows (config.json's vocab_size): not this model's tokenizer")
    values = generation_values(directory, config)
    languages = {t.content: i for i, t in sorted(tok.get_added_tokens_decoder().items())
                 if LANGUAGE.match(t.content)}
    pad, bos, eos = (values[k] for k in ("pad_token_id", "bos_token_id", "eos_token_id"))
    if decoder_only:
        start = bos if bos is not None else eos
        specials = Specials(pad=pad, unk=_unk(text, tok), bos=bos, eos=eos, sep=None, mask=None,
                            start=0 if start is None else start)
        source, source_lang, target_lang = ["text", *([] if eos is None else [eos])], None, None
    else:
        source, source_lang = _frame(tok, languages)
        if encoder_only:  # [CLS] text [SEP]: the template's first and last ids, where the config has none
            first, last = source[0], source[-1]
            values = {**values, "bos_token_id": values["bos_token_id"] if values["bos_token_id"] is not None
                      else first if isinstance(first, int) else None,
                      "eos_token_id": values["eos_token_id"] if values["eos_token_id"] is not None
                      else last if isinstance(last, int) else None}
        specials = _seq2seq_specials(values, _unk(text, tok), _mask(tok))
        if source == ["text"] and eos is not None:
            source = ["text", eos]
        target_lang = _target_lang(specials, languages)
    return (envelope(text, specials, source, languages, source_lang, target_lang, config.vocab_size,
                     shift=family.shift), specials)


# --- M2M100Tokenizer: sentencepiece.bpe.model, vocab.json (and tokenizer_config.json) -----------------------

M2M100_FILES = ("sentencepiece.bpe.model", "vocab.json")


def _m2m100_files(directory: Path) -> tuple[bytes, str, dict]:
    """sentencepiece.bpe.model's bytes, vocab.json's text and its object (piece -> id, with <unk> and </s>)."""
    for name in M2M100_FILES:
        if not _is_file(directory / name):
            raise UsageError(f"{directory} has neither {TOKENIZER} nor {name} (an M2M100 model's tokenizer: "
                             f"{' and '.join(M2M100_FILES)}, as M2M100Tokenizer.save_pretrained writes them)")
    model, vocab_path = directory / M2M100_FILES[0], directory / M2M100_FILES[1]
    data = read_regular(model, limit=MAX_TOKENIZER_BYTES, what="sentencepiece model", error=UsageError)
    raw = read_regular(vocab_path, limit=MAX_TOKENIZER_BYTES, what="vocabulary file", error=UsageError)
    vocab = parse_json(raw, shown_path(vocab_path),
                       error=lambda message: UsageError(f"{message}: not M2M100's vocabulary"))
    text = raw.decode("utf-8")
    if not isinstance(vocab, dict) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                              for i in vocab.values()):
        raise UsageError(f"{vocab_path}: JSON {type(vocab).__name__}, not an object of token ids")
    missing = [t for t in ("<unk>", "</s>") if t not in vocab]
    if missing:
        raise UsageError(f"{vocab_path} has no {missing[0]} (M2M100Tokenizer's special tokens are "
                         f"{', '.join(M2M100_SPECIALS)})")
    return data, text, vocab


def _m2m100_languages(directory: Path) -> tuple[str, list[str], str]:
    """tokenizer_config.json's language_codes (transformers' lists: "m2m100" or "wmt21") and src_lang."""
    codes = require("transformers.models.m2m_100.tokenization_m2m_100", "attncomp import").FAIRSEQ_LANGUAGE_CODES
    path, values = directory / M2M100_CONFIG, {}
    if _is_file(path):
        values = read_json(path, what="JSON file", error=UsageError)
        if not isinstance(values, dict):
            raise UsageError(f"{path}: JSON {type(values).__name__}, not an object")
    kind, src = values.get("language_codes", "m2m100"), values.get("src_lang") or "en"
    if not isinstance(kind, str) or kind not in codes:
        raise UsageError(f"{path}: language_codes {json.dumps(kind)[:40]} is none of M2M100Tokenizer's "
                         f"({', '.join(codes)})")
    if src not in codes[kind]:
        raise UsageError(f"{path}: src_lang {json.dumps(src)[:40]} is not one of its {kind} language codes")
    return kind, list(codes[kind]), src


def m2m100_record(directory: Path, config) -> tuple[bytes, Specials]:
    """The envelope of M2M100Tokenizer's files: sentencepiece pieces looked up in vocab.json, the language
    tokens __xx__ after it (vocab.json's size + their place in transformers' list), `__src__ text </s>`."""
    model, vocab_text, vocab = _m2m100_files(directory)
    kind, codes, src = _m2m100_languages(directory)
    if len(vocab) + len(codes) > config.vocab_size or max(vocab.values()) >= config.vocab_size:
        raise UsageError(f"{directory}: vocab.json's {len(vocab)} tokens and {len(codes)} language tokens do not fit "
                         f"the model's {config.vocab_size}-token vocabulary")
    languages = {f"__{code}__": len(vocab) + i for i, code in enumerate(codes)}
    try:
        SentencePieceVocab(model, vocab, languages)
    except DataError as err:
        raise UsageError(f"{directory / M2M100_FILES[0]}: {err}") from None
    specials = _seq2seq_specials(generation_values(directory, config), vocab["<unk>"])
    source = ["lang", "text", vocab["</s>"]]
    pieces = {"model": base64.b64encode(model).decode("ascii"), "vocab": vocab_text, "language_codes": kind}
    return (envelope(None, specials, source, languages, f"__{src}__", _target_lang(specials, languages),
                     config.vocab_size, sentencepiece=pieces), specials)
