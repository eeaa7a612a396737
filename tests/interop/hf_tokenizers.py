"""Tiny tokenizers trained in the test with the `tokenizers` library (no network), in the three kinds real
models use: byte-level BPE (GPT-2, Llama 3, Qwen), Unigram (T5, mBART, Llama 2's sentencepiece), WordPiece
(BERT); and tiny random models whose vocabulary is theirs."""

from __future__ import annotations

import json

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


def m2m100_files(directory, vocab_size: int = 120):
    """M2M100's own tokenizer files (no tokenizer.json: transformers has no fast M2M100 tokenizer):
    sentencepiece.bpe.model (BPE, trained here), vocab.json in fairseq's numbering (<s> 0, <pad> 1, </s> 2,
    <unk> 3, then the pieces in another order than sentencepiece's, one of them left out: it reads as <unk>)
    and tokenizer_config.json; returns transformers' M2M100Tokenizer of them."""
    import io
    import json

    sentencepiece = pytest.importorskip("sentencepiece")
    from transformers import M2M100Tokenizer
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(TEXT), model_writer=model, vocab_size=vocab_size,
                                             model_type="bpe", bos_id=-1, eos_id=-1, unk_id=0, minloglevel=2)
    sp = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [sp.id_to_piece(i) for i in range(1, sp.get_piece_size())][::-1][1:]
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, **{p: 4 + i for i, p in enumerate(pieces)}}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sentencepiece.bpe.model").write_bytes(model.getvalue())
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    codes = FAIRSEQ_LANGUAGE_CODES["m2m100"]  # as facebook/m2m100_418M lists them: text splits on them
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "M2M100Tokenizer", "language_codes": "m2m100", "src_lang": "en",
         "additional_special_tokens": [f"__{code}__" for code in codes]}), encoding="utf-8")
    return M2M100Tokenizer.from_pretrained(directory)


def _unigram_vocab() -> list[tuple[str, float]]:
    base = unigram(specials=("<s>", "<pad>", "</s>", "<unk>"), template=None)
    return [tuple(v) for v in json.loads(base.to_str())["model"]["vocab"]]


def _nllb_vocab() -> tuple[dict, list]:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(
        vocab_size=120, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], show_progress=False))
    model = json.loads(tok.to_str())["model"]
    return model["vocab"], [tuple(m) if isinstance(m, list) else tuple(m.split()) for m in model["merges"]]


def transformers_tokenizer(kind: str, directory):
    """transformers' own tokenizer of a multilingual family (mbart: MBartTokenizer, mbart50, nllb, m2m100)
    made from a tiny vocabulary trained here and saved into `directory`: (tokenizer, source and target
    language codes as transformers names them)."""
    if kind == "m2m100":  # transformers names M2M100's languages `en`, its tokens `__en__`: either is taken
        return m2m100_files(directory), "en", "de"
    transformers = pytest.importorskip("transformers")
    if kind == "nllb":
        vocab, merges = _nllb_vocab()
        tok = transformers.NllbTokenizer(vocab=vocab, merges=merges)
        src, tgt = "eng_Latn", "deu_Latn"
    else:
        cls = transformers.MBartTokenizer if kind == "mbart" else transformers.MBart50Tokenizer
        tok, src, tgt = cls(vocab=_unigram_vocab()), "en_XX", "de_DE"
    tok.save_pretrained(directory)
    return tok, src, tgt
