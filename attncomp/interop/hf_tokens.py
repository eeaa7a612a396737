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
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from attncomp.data.hf_tokenizer import envelope
from attncomp.errors import UsageError
from attncomp.files import present, read_json, read_regular
from attncomp.interop import require
from attncomp.vocab import Specials

MAX_TOKENIZER_BYTES = 256 << 20
TOKENIZER = "tokenizer.json"
GENERATION = "generation_config.json"
# language tokens as mBART (en_XX), NLLB (eng_Latn) and M2M100 (__en__) write them
LANGUAGE = re.compile(r"^(__[a-z]{2,3}(_[A-Za-z]{2,4})?__|[a-z]{2,3}_[A-Z][A-Za-z]{1,3})$")
PROBE = "a b"


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
    try:
        text = data.decode("utf-8")
        json.loads(text)
    except ValueError:
        raise UsageError(f"{path} is not JSON: not a tokenizers file") from None
    tokenizers = require("tokenizers", "attncomp import")
    try:
        return text, tokenizers.Tokenizer.from_str(text)
    except Exception as err:  # the library's own exception types
        raise UsageError(f"{path} is not a tokenizer the tokenizers library reads ({_one_line(err)})") from None


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


def _frame(tok, swap, languages: dict) -> tuple[list, str | None]:
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
        if token != "text" and swap(token) in by_id:
            lang = by_id[swap(token)]
            frame.append("lang")
        else:
            frame.append(token if token == "text" else swap(token))
    return frame, lang


def _unk(text: str, tok) -> int | None:
    model = json.loads(text).get("model", {})
    model = model if isinstance(model, dict) else {}
    if isinstance(model.get("unk_id"), int):  # Unigram
        return model["unk_id"]
    unk = model.get("unk_token")
    return tok.token_to_id(unk) if isinstance(unk, str) else None


def tokenizer_record(directory: Path, family, config, exchanged: int | None, decoder_only: bool,
                     label: str) -> bytes:
    """The envelope the checkpoint stores for the tokenizer of DIR (attncomp.data.hf_tokenizer)."""
    text, tok = read_tokenizer(directory, label)
    values = generation_values(directory, config)

    def swap(i):
        if i is None or exchanged is None:
            return i
        return exchanged if i == 0 else 0 if i == exchanged else i

    languages = {t.content: swap(i) for i, t in sorted(tok.get_added_tokens_decoder().items())
                 if LANGUAGE.match(t.content)}
    pad, bos, eos = (swap(values[k]) for k in ("pad_token_id", "bos_token_id", "eos_token_id"))
    if decoder_only:
        start = bos if bos is not None else eos
        specials = Specials(pad=pad, unk=swap(_unk(text, tok)), bos=bos, eos=eos, sep=None,
                            start=0 if start is None else start)
        source, source_lang, target_lang = ["text", *([] if eos is None else [eos])], None, None
    else:
        start = swap(values["decoder_start_token_id"])
        start = start if start is not None else (bos if bos is not None else 0)
        forced = swap(values["forced_bos_token_id"])
        specials = Specials(pad=pad, unk=swap(_unk(text, tok)), bos=bos, eos=eos, sep=None, start=start,
                            forced=() if forced is None else (forced,))
        source, source_lang = _frame(tok, swap, languages)
        if source == ["text"] and eos is not None:
            source = ["text", eos]
        target_lang = None
        if languages:
            target_lang = "start" if start in languages.values() else "forced"
    return envelope(text, exchanged, specials, source, languages, source_lang, target_lang, config.vocab_size)
