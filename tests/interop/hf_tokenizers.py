"""Tiny tokenizers trained in the test with the `tokenizers` library (no network), in the three kinds real
models use: byte-level BPE (GPT-2, Llama 3, Qwen), Unigram (T5, mBART, Llama 2's sentencepiece), WordPiece
(BERT); and tiny random models whose vocabulary is theirs."""

from __future__ import annotations

import pytest

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

TEXT = [
    "the quick brown fox jumps over the lazy dog",
    "a cat sees the dog and the dog sees a cat",
    "der schnelle braune fuchs springt über den faulen hund",
    "eine katze sieht den hund und der hund sieht eine katze",
    "hello world, this is a tiny corpus for a tiny tokenizer",
    "numbers 1 2 3 and punctuation: yes! no? maybe.",
] * 4


def byte_level_bpe(vocab_size: int = 300, end: str = "<|endoftext|>"):
    """GPT-2's kind: byte-level BPE, one special token after the merges (its begin, end and unknown)."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    tok.add_special_tokens([end])
    return tok


def unigram(vocab_size: int = 120, specials=("<unk>", "<s>", "</s>"), template: str | None = "<s> $A",
            languages: tuple[str, ...] = ()):
    """Llama 2's kind (sentencepiece Unigram, <unk> 0, <s> 1, </s> 2; <s> added to each text), or with
    other specials and a template: mBART-50's, M2M100's and NLLB's `lang text </s>`."""
    tok = tokenizers.Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=list(specials), unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    tok.add_special_tokens(list(languages))
    if template:
        tokens = [t for t in template.split() if t != "$A"]
        tok.post_processor = processors.TemplateProcessing(
            single=template, pair=f"{template} $B:1", special_tokens=[(t, tok.token_to_id(t)) for t in tokens])
    return tok


def wordpiece(vocab_size: int = 150):
    """BERT's kind: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4; [CLS] text [SEP]."""
    tok = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                                               "[MASK]"], show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tok


def save(hf, tok, directory, generation: dict | None = None):
    """save_pretrained of the model, the tokenizer's tokenizer.json, and a generation_config.json."""
    import json

    hf.save_pretrained(directory)
    tok.save(str(directory / "tokenizer.json"))
    if generation is not None:
        (directory / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    return directory
