"""`attncomp export --format ctranslate2` of imported encoder-decoders (BART, mBART, mBART-50, M2M100, NLLB):
CTranslate2 translates the exported tiny model as attncomp does (greedy and beam, the same token ids), with
the tokenizer's vocabulary, M2M100's fairseq sinusoids from position 2, BART's embedding norm and output
bias, each family's decoder start and forced language (the target prefix; mBART's decoder starts with it)."""

from __future__ import annotations

import json

import pytest
import torch

from attncomp.cli.main import run
from attncomp.data.tokenizer import tokenizer_of
from attncomp.decode.beam import CachedStepper, beam_search
from attncomp.interop import ctranslate2_export
from attncomp.loading import load_checkpoint
from tests.interop import hf_models, hf_tokenizers

ctranslate2 = pytest.importorskip("ctranslate2")
transformers = pytest.importorskip("transformers")

LINES = ["the quick brown fox", "a cat sees the dog", "der hund und die katze"]
LIMIT = 12  # generated tokens, </s> included (attncomp's limit; CTranslate2 counts without </s>)


def _directory(kind: str, directory):
    """A tiny model of the family with its tokenizer: (directory, source and target language codes)."""
    if kind == "bart":
        tok = hf_tokenizers.unigram(specials=("<s>", "<pad>", "</s>", "<unk>"), template="<s> $A </s>")
        hf = hf_models.model("bart", torch.float32, vocab_size=tok.get_vocab_size(), max_position_embeddings=64,
                             decoder_attention_heads=4)
        hf_tokenizers.save(hf, tok, directory, {"decoder_start_token_id": 2, "forced_bos_token_id": 0})
        return None, None
    tok, src, tgt = hf_tokenizers.transformers_tokenizer(kind, directory)
    model_type = "mbart" if kind.startswith("mbart") else "m2m_100"
    hf = hf_models.model(model_type, torch.float32, vocab_size=len(tok), max_position_embeddings=64,
                         decoder_attention_heads=4)  # CTranslate2: one number of heads
    hf.save_pretrained(directory)
    return src, tgt


@pytest.mark.parametrize("kind", ["bart", "mbart", "mbart50", "m2m100", "nllb"])
def test_ctranslate2_translates_an_imported_model_as_attncomp(kind, tmp_path):
    src_lang, tgt_lang = _directory(kind, tmp_path / kind)
    assert run(["import", str(tmp_path / kind), "--out", str(tmp_path / "imported")]) == 0
    checkpoint = tmp_path / "imported" / "checkpoint.pt"
    out = tmp_path / "ct2"
    assert run(["export", str(checkpoint), "--format", "ctranslate2", "--out", str(out)]) == 0
    decoding = json.loads((out / "attncomp_decoding.json").read_text())
    vocab = json.loads((out / "shared_vocabulary.json").read_text())
    model, found = load_checkpoint(checkpoint)
    stored = tokenizer_of(found.header.tokenizers["tgt"].numpy().tobytes())
    assert decoding["target_prefix"] == ctranslate2_export.target_prefix(stored, vocab)
    src_tok = stored.with_source_language(src_lang)
    tgt_tok = stored.with_target_language(tgt_lang)
    prefix = ctranslate2_export.target_prefix(tgt_tok, vocab)
    # without a decoder start in the config (mBART's) the prefix's first token is the start: not in the hypothesis
    shown = len(prefix) - (json.loads((out / "config.json").read_text())["decoder_start_token"] is None)
    specials = tgt_tok.specials
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    suppressed = [[vocab[t]] for t in specials.never_generated()]
    model.eval()
    equal = 0
    for line in LINES:
        ids = src_tok.encode_source([line])[0]
        for beam in (1, 2):
            ours = beam_search(CachedStepper(model, torch.tensor([ids])), 1, [LIMIT], beam, 0.0,
                               specials=specials)[0][0].tokens
            found = translator.translate_batch([[vocab[i] for i in ids]], target_prefix=[prefix], beam_size=beam,
                                              length_penalty=0.0, max_decoding_length=shown + LIMIT - 1,
                                              suppress_sequences=suppressed)[0]
            theirs = [vocab.index(t) for t in found.hypotheses[0][shown:]]
            equal += ours == theirs
            if beam == 1:
                assert _greedy_agrees(model, ids, specials, ours, theirs), (kind, line, ours, theirs)
            else:  # CTranslate2 ends a beam otherwise (docs/decoding.md): its best never beats attncomp's
                assert _score(model, ids, specials, ours) >= _score(model, ids, specials, theirs) - TIE
    assert equal >= len(LINES), (kind, equal)


TIE = 1e-4  # log-probabilities closer than this may rank either way in two engines' float32 arithmetic


def _logprobs(model, src: list[int], specials, tokens: list[int]) -> torch.Tensor:
    """attncomp's log-probabilities of each next token after the start, the forced tokens and each prefix of
    `tokens` (teacher forcing): row k is the distribution of tokens[k]."""
    decoder_in = [specials.start, *specials.forced, *tokens]
    with torch.no_grad():
        logits = model(torch.tensor([src]), torch.tensor([decoder_in])).double()
    return torch.log_softmax(logits, -1)[0, len(specials.forced):]


def _score(model, src, specials, tokens) -> float:
    """The search's objective at alpha 0: the log-probabilities of the tokens and </s> (forced at the limit)."""
    logp = _logprobs(model, src, specials, tokens)
    return float(sum(logp[i, t] for i, t in enumerate([*tokens, specials.eos][: LIMIT])))


def _greedy_agrees(model, src, specials, ours: list[int], theirs: list[int]) -> bool:
    """Both greedy: equal where both are shorter than the limit, or parting where attncomp's two choices tie."""
    n = min(len(ours), len(theirs), LIMIT - 1)
    ours_, theirs_ = [*ours, specials.eos][: n + 1], [*theirs, specials.eos][: n + 1]
    if ours_ == theirs_:
        return True
    at = next(i for i, (a, b) in enumerate(zip(ours_, theirs_)) if a != b)
    logp = _logprobs(model, src, specials, ours[:at])[at]
    return abs(float(logp[ours_[at]] - logp[theirs_[at]])) < TIE


def test_a_model_that_starts_with_its_target_language_starts_from_the_prefix(tmp_path):
    """mBART's (cc25's `text </s> lang` template): the config has no decoder start, so CTranslate2's decoder
    starts from the target prefix's first token, the language, as its TransformersConverter writes mBART-25
    (a fixed start would put `</s>` before the language: log-probabilities off by about 1e-2); CTranslate2's
    log-probabilities after it equal attncomp's."""
    src_lang, tgt_lang = _directory("mbart", tmp_path / "mbart")
    assert run(["import", str(tmp_path / "mbart"), "--out", str(tmp_path / "imported")]) == 0
    checkpoint = tmp_path / "imported" / "checkpoint.pt"
    out = tmp_path / "ct2"
    assert run(["export", str(checkpoint), "--format", "ctranslate2", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["decoder_start_token"] is None
    vocab = json.loads((out / "shared_vocabulary.json").read_text())
    model, found = load_checkpoint(checkpoint)
    stored = tokenizer_of(found.header.tokenizers["tgt"].numpy().tobytes())
    src_tok, tgt_tok = stored.with_source_language(src_lang), stored.with_target_language(tgt_lang)
    prefix = ctranslate2_export.target_prefix(tgt_tok, vocab)
    assert prefix == [tgt_lang]
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    model.eval()
    for line, target in zip(LINES, reversed(LINES)):
        ids, tgt = src_tok.encode_source([line])[0], src_tok.encode([target])[0]
        theirs = translator.score_batch([[vocab[i] for i in ids]], [prefix + [vocab[i] for i in tgt]])[0].log_probs
        ours = _logprobs(model, ids, tgt_tok.specials, tgt)
        assert theirs == pytest.approx([float(ours[i, t]) for i, t in enumerate([*tgt, tgt_tok.specials.eos])],
                                       abs=1e-4)
