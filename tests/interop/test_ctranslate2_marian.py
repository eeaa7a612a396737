"""`attncomp export --format ctranslate2` of imported Marian models (one shared vocabulary, and separate source
and target vocabularies): CTranslate2's log-probabilities equal attncomp's, and its greedy and beam-4
translations follow attncomp's (`attncomp translate`'s Translator, the spec's `stop = first`, alpha 0): greedy the
same ids (parting only where attncomp's two choices tie to within 1e-4), beam 4 never better than attncomp's
and mostly equal (CTranslate2 renormalises after suppressing tokens: test_translations_equal_attncomps). The
separate model has a random final_logits_bias (the output bias); random weights make most translations
degenerate (a token repeated to the limit, or empty), so the log-probabilities are what compare the weights."""

from __future__ import annotations

import json

import pytest
import torch

from attncomp.cli.main import run
from attncomp.data.tokenizer import Tokenizer
from attncomp.decode.translate import Translator
from attncomp.interop.ctranslate2_export import vocabulary
from attncomp.ir import nodes
from attncomp.loading import load_checkpoint
from tests.interop.test_marian_import import _lines, marian_directory
from tests.interop.test_marian_separate import separate_directory

ctranslate2 = pytest.importorskip("ctranslate2")
transformers = pytest.importorskip("transformers")

LIMIT = 16  # generated tokens, </s> included (attncomp's limit; CTranslate2 counts without </s>)
TIE = 1e-4  # log-probabilities closer than this may rank either way in two engines' float32 arithmetic


@pytest.fixture(scope="module", params=["shared", "separate"])
def exported(request, tmp_path_factory):
    """(the imported model, its source and target tokenizers, the CTranslate2 directory)."""
    root = tmp_path_factory.mktemp(f"marian-{request.param}")
    directory = marian_directory(root / "opus-mt")[0] if request.param == "shared" \
        else separate_directory(root / "separate")[0]
    assert run(["import", str(directory), "--out", str(root / "imported")]) == 0
    checkpoint = root / "imported" / "checkpoint.pt"
    assert run(["export", str(checkpoint), "--format", "ctranslate2", "--out", str(root / "ct2")]) == 0
    model, found = load_checkpoint(checkpoint)
    src, tgt = (Tokenizer(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt"))
    return request.param, model.eval(), src, tgt, root / "ct2"


def test_the_directory_holds_each_sides_vocabulary(exported):
    kind, model, src, tgt, out = exported
    names = {"shared": ["shared_vocabulary.json"], "separate": ["source_vocabulary.json", "target_vocabulary.json"]}
    sides = [src, tgt] if kind == "separate" else [tgt]
    for name, tokenizer in zip(names[kind], sides):
        assert json.loads((out / name).read_text()) == vocabulary(tokenizer)
    config = json.loads((out / "config.json").read_text())
    specials = model.spec.model.specials
    assert [config[k] for k in ("decoder_start_token", "eos_token", "unk_token")] == \
        [vocabulary(tgt)[i] for i in (specials.start, specials.eos, specials.unk)]


def test_log_probabilities_equal_attncomps(exported):
    _, model, src, tgt, out = exported
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    sv, tv, specials = vocabulary(src), vocabulary(tgt), model.spec.model.specials
    for source, target in zip(_lines(3, 0), _lines(3, 1)):
        src_ids, tgt_ids = src.encode([source])[0] + [specials.eos], tgt.encode([target])[0]
        theirs = translator.score_batch([[sv[i] for i in src_ids]], [[tv[i] for i in tgt_ids]])[0].log_probs
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([src_ids]), torch.tensor([[specials.start, *tgt_ids]])), -1)[0]
        assert theirs == pytest.approx([float(logp[i, t]) for i, t in enumerate([*tgt_ids, specials.eos])], abs=1e-4)


@pytest.mark.parametrize("beam", [1, 4])
def test_translations_equal_attncomps(exported, beam):
    """Greedy: equal ids (or parting at a tie). Beam 4: CTranslate2 suppresses <pad>, <s> and <sep> before its
    softmax (the other tokens' log-probabilities renormalised), attncomp and transformers after it, so
    hypotheses rank alike within a row but not always across rows: attncomp's best never scores below
    CTranslate2's under attncomp's model, and most lines are equal."""
    _, model, src, tgt, out = exported
    lines = _lines(8)
    ours = Translator(model, src, tgt, beam=beam, alpha=0.0, max_len=nodes.Fixed(length=LIMIT), progress=False)
    specials = ours.specials
    expected = [options[0].tokens for options in ours.translate(lines)]
    sv, tv = vocabulary(src), vocabulary(tgt)
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    sources = src.encode_with_eos(lines)
    found = translator.translate_batch([[sv[i] for i in ids] for ids in sources], beam_size=beam,
                                       length_penalty=0.0, max_decoding_length=LIMIT - 1, min_decoding_length=0,
                                       suppress_sequences=[[tv[t]] for t in specials.never_generated()])
    got = [[tv.index(token) for token in result.hypotheses[0]] for result in found]
    for ids, a, b in zip(sources, expected, got):
        if beam == 1:
            assert a == b or _tie(model, ids, specials, a, b), (a, b)
        else:
            assert _score(model, ids, specials, a) >= _score(model, ids, specials, b) - TIE, (a, b)
    assert sum(a == b for a, b in zip(expected, got)) >= len(lines) // 2 + 1


def _logprobs(model, src: list[int], specials, tokens: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([src]), torch.tensor([[specials.start, *tokens]])).double()
    return torch.log_softmax(logits, -1)[0]


def _score(model, src, specials, tokens) -> float:
    """The search's objective at alpha 0: the log-probabilities of the tokens and </s> (forced at the limit)."""
    logp = _logprobs(model, src, specials, tokens)
    return float(sum(logp[i, t] for i, t in enumerate([*tokens, specials.eos][:LIMIT])))


def _tie(model, src: list[int], specials, ours: list[int], theirs: list[int]) -> bool:
    """Greedy translations that part where attncomp's two choices tie to within TIE."""
    at = next(i for i, (a, b) in enumerate(zip([*ours, specials.eos], [*theirs, specials.eos])) if a != b)
    logp = _logprobs(model, src, specials, ours[:at])[at]
    a, b = ([*seq, specials.eos][at] for seq in (ours, theirs))
    return abs(float(logp[a] - logp[b])) < TIE
