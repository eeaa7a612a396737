"""attncomp's CTranslate2 export of an imported model against CTranslate2's own converter
(`ctranslate2.converters.TransformersConverter` on the same save_pretrained directory): BART and mBART (cc25)
get the same config tokens (mBART's decoder start null: the target prefix's language starts the decoder) and
the same vocabulary, and both directories give the same log-probabilities and translations; Marian's
vocabularies differ by design (attncomp renumbers them with <pad>, <s> and <sep>, which the caller suppresses;
the converter drops <pad> and starts from a zero embedding), and their translations and scores are the same.

CTranslate2 4.8.5's converter reads `normalize_before`, which transformers 5 no longer keeps in BART's and
mBART's config: the test writes it (false, mBART's true) into the directory's config.json first."""

from __future__ import annotations

import json

import pytest
import torch

from attncomp.cli.main import run
from tests.interop.test_ctranslate2_imported import LINES, _directory
from tests.interop.test_marian_import import _lines, marian_directory

ctranslate2 = pytest.importorskip("ctranslate2")
transformers = pytest.importorskip("transformers")

LENGTH = 10  # CTranslate2's max_decoding_length


def _both(kind: str, tmp_path):
    """(attncomp's export, the converter's output, source and target languages) of a tiny `kind` model."""
    directory = tmp_path / kind
    if kind == "marian":
        marian_directory(directory)
        langs = (None, None)
    else:
        langs = _directory(kind, directory)
        config = json.loads((directory / "config.json").read_text())
        config.setdefault("normalize_before", kind == "mbart")
        (directory / "config.json").write_text(json.dumps(config))
    assert run(["import", str(directory), "--out", str(tmp_path / "imported")]) == 0
    ours = tmp_path / "ours"
    assert run(["export", str(tmp_path / "imported" / "checkpoint.pt"), "--format", "ctranslate2", "--out",
                str(ours)]) == 0
    theirs = ctranslate2.converters.TransformersConverter(str(directory)).convert(str(tmp_path / "theirs"))
    return ours, tmp_path / "theirs" if theirs else None, *langs


def _read(directory, name):
    return json.loads((directory / name).read_text())


def _translator(directory):
    return ctranslate2.Translator(str(directory), device="cpu", intra_threads=1)


@pytest.mark.parametrize("kind", ["bart", "mbart"])
def test_bart_and_mbart_equal_the_converters(kind, tmp_path):
    ours, theirs, src_lang, tgt_lang = _both(kind, tmp_path)
    config, expected = _read(ours, "config.json"), _read(theirs, "config.json")
    assert expected.pop("layer_norm_epsilon") is None and config.pop("layer_norm_epsilon") == 1e-5  # its default
    assert config == expected
    assert config["decoder_start_token"] == (None if kind == "mbart" else "</s>")
    vocab = _read(ours, "shared_vocabulary.json")
    assert vocab == _read(theirs, "shared_vocabulary.json")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / kind)
    if kind == "mbart":
        tokenizer.src_lang = src_lang
    prefix = [tgt_lang] if kind == "mbart" else _read(ours, "attncomp_decoding.json")["target_prefix"]
    sources = [tokenizer.convert_ids_to_tokens(tokenizer(line).input_ids) for line in LINES]
    a, b = _translator(ours), _translator(theirs)
    targets = [[*prefix, *s[1:4]] for s in sources]
    for x, y in zip(a.score_batch(sources, targets), b.score_batch(sources, targets)):
        assert x.log_probs == pytest.approx(y.log_probs, abs=1e-5)
    for beam in (1, 2):
        options = dict(target_prefix=[prefix] * len(LINES), beam_size=beam, max_decoding_length=LENGTH,
                       return_scores=True)
        x, y = a.translate_batch(sources, **options), b.translate_batch(sources, **options)
        assert [r.hypotheses for r in x] == [r.hypotheses for r in y]
        assert [r.scores[0] for r in x] == pytest.approx([r.scores[0] for r in y], abs=1e-4)


def test_marian_translates_as_the_converters(tmp_path):
    ours, theirs, _, _ = _both("marian", tmp_path)
    assert _read(ours, "config.json")["decoder_start_token"] == "<s>"  # its <s> has Marian's decoder start row
    assert _read(theirs, "config.json")["decoder_start_token"] == "</s>"  # any: a zero embedding starts
    vocab, expected = _read(ours, "shared_vocabulary.json"), _read(theirs, "shared_vocabulary.json")
    assert set(vocab) - set(expected) == {"<pad>", "<s>", "<sep>"} and set(expected) <= set(vocab)
    tokenizer = transformers.MarianTokenizer.from_pretrained(tmp_path / "marian")
    sources = [tokenizer.convert_ids_to_tokens(tokenizer(line).input_ids) for line in _lines(6)]
    a, b = _translator(ours), _translator(theirs)
    for beam in (1, 4):
        options = dict(beam_size=beam, max_decoding_length=LENGTH, return_scores=True, min_decoding_length=0)
        x = a.translate_batch(sources, suppress_sequences=[["<pad>"], ["<s>"], ["<sep>"]], **options)
        y = b.translate_batch(sources, **options)
        assert [r.hypotheses for r in x] == [r.hypotheses for r in y]
        assert [r.scores[0] for r in x] == pytest.approx([r.scores[0] for r in y], abs=1e-4)
