"""`attncomp export --format ctranslate2`: CTranslate2 computes attncomp's probabilities and translations."""

from __future__ import annotations

import pytest
import torch

from attncomp.cli.main import run
from attncomp.loading import load_checkpoint
from attncomp.data.tokenizer import Tokenizer
from attncomp.decode.beam import CachedStepper, beam_search
from attncomp import ir
from attncomp.interop.ctranslate2_export import vocabulary
from tests.conftest import ROOT

ctranslate2 = pytest.importorskip("ctranslate2")


def _export(checkpoint, out, *extra) -> tuple:
    assert run(["export", str(checkpoint), "--format", "ctranslate2", "--out", str(out), *extra]) == 0
    model, found = load_checkpoint(checkpoint)
    tokenizer = Tokenizer(found.header.tokenizers["src"].numpy().tobytes())
    return model, tokenizer, ctranslate2.Translator(str(out), device="cpu", intra_threads=1)


def _both(model, tokenizer, translator, line: str, beam: int) -> tuple[list[int], list[int], list[int]]:
    """The source ids, attncomp's and CTranslate2's best translation of one line (alpha 0, attncomp's
    maximum length)."""
    vocab = vocabulary(tokenizer)
    ids = tokenizer.encode([line])[0] + [3]
    limit = len(ids) - 1 + 10  # tokens with </s>; CTranslate2 counts them without
    ours = beam_search(CachedStepper(model, torch.tensor([ids])), 1, [limit], beam, 0.0)[0][0].tokens
    found = translator.translate_batch([[vocab[i] for i in ids]], beam_size=beam, length_penalty=0.0,
                                      max_decoding_length=limit - 1,
                                      suppress_sequences=[["<pad>"], ["<s>"], ["<sep>"]])[0]
    return ids, ours, [vocab.index(token) for token in found.hypotheses[0]]


TIE = 1e-4  # log-probabilities closer than this may rank either way in two engines' float32 arithmetic


def _logprobs(model, src: list[int], tokens: list[int]) -> torch.Tensor:
    """attncomp's next-token log-probabilities after <s> + each prefix of `tokens` (teacher forcing)."""
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([src]), torch.tensor([[2] + tokens])).double(), -1)[0]


def _score(model, src: list[int], tokens: list[int]) -> float:
    """The search's objective at alpha 0: the sum of log-probabilities of the tokens and </s>."""
    logp = _logprobs(model, src, tokens)
    return float(sum(logp[i, t] for i, t in enumerate(tokens + [3])))


def _greedy_agrees(model, src: list[int], ours: list[int], theirs: list[int]) -> bool:
    """Both are greedy: equal, or they part where attncomp's two choices tie to within TIE."""
    if ours == theirs:
        return True
    at = next(i for i, (a, b) in enumerate(zip(ours + [3], theirs + [3])) if a != b)
    a, b = (seq[at] if at < len(seq) else 3 for seq in (ours, theirs))
    logp = _logprobs(model, src, ours[:at])[at]
    return abs(float(logp[a] - logp[b])) < TIE


POSITIONS = {"halves": "sinusoidal(layout = halves)",
             "learned_offset": "learned(max_len = 64, offset = 2)"}  # the table is written from row 2


@pytest.mark.parametrize("layout", ["interleaved", *POSITIONS])
def test_log_probabilities_equal_attncomps(random_tiny, sample_data, tmp_path, layout):
    from tests.interop.conftest import random_checkpoint

    checkpoint = random_tiny if layout == "interleaved" else random_checkpoint(
        sample_data, tmp_path / f"{layout}.pt", sets=("model.layers=2", f"model.positions={POSITIONS[layout]}"))
    model, tokenizer, translator = _export(checkpoint, tmp_path / "ct2")
    vocab = vocabulary(tokenizer)
    src = tokenizer.encode(["the dog sees a cat"])[0] + [3]
    tgt = tokenizer.encode(["der hund sieht eine katze"])[0]
    theirs = translator.score_batch([[vocab[i] for i in src]], [[vocab[i] for i in tgt]])[0].log_probs
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([src]), torch.tensor([[2] + tgt])), -1)[0]
    ours = [float(logp[i, t]) for i, t in enumerate(tgt + [3])]
    assert theirs == pytest.approx(ours, abs=1e-3)


def test_greedy_translations_equal_attncomps(random_tiny, sample_data, tmp_path):
    model, tokenizer, translator = _export(random_tiny, tmp_path / "ct2")
    for line in (sample_data / "text/test.src").read_text().splitlines()[:4]:
        src, ours, theirs = _both(model, tokenizer, translator, line, beam=1)
        assert _greedy_agrees(model, src, ours, theirs), (ours, theirs)


def test_translations_of_a_trained_model_follow_the_same_search(trained_tiny, sample_data, tmp_path):
    """On a model the suite trains itself (its weights round differently on other machines), compare
    what both searches define, never two engines' outputs bit for bit:

    - beam 1 is greedy in both: equal translations, or they part at a tie of attncomp's log-probabilities;
    - beam 4 follows the same live hypotheses in both, but attncomp's `stop = bound` (tensor2tensor's
      rule) also keeps an ending ranked below the beam as a finished hypothesis, where CTranslate2 keeps
      only the endings within it: attncomp's best never scores below CTranslate2's (under attncomp's model,
      to within TIE), and where they differ attncomp's scores higher.
    """
    model, tokenizer, translator = _export(trained_tiny / "checkpoint_avg.pt", tmp_path / "ct2")
    lines = (sample_data / "text/test.src").read_text().splitlines()[:10]
    for line in lines:
        src, ours, theirs = _both(model, tokenizer, translator, line, beam=1)
        assert _greedy_agrees(model, src, ours, theirs), (line, ours, theirs)
    same = 0
    for line in lines:
        src, ours, theirs = _both(model, tokenizer, translator, line, beam=4)
        same += ours == theirs
        assert _score(model, src, ours) >= _score(model, src, theirs) - TIE, (line, ours, theirs)
    assert same >= len(lines) // 2  # the searches mostly agree: the comparison is not vacuous


def test_int8_export_translates(random_tiny, tmp_path):
    _, tokenizer, translator = _export(random_tiny, tmp_path / "ct2", "--quantization", "int8")
    vocab = vocabulary(tokenizer)
    out = translator.translate_batch([[vocab[i] for i in tokenizer.encode(["the dog"])[0]] + ["</s>"]],
                                     max_decoding_length=5)
    assert 0 < len(out[0].hypotheses[0]) <= 5


def test_a_model_ctranslate2_cannot_express_is_one_clear_error(sample_data, tmp_path, capsys):
    from tests.interop.conftest import random_checkpoint

    local = random_checkpoint(sample_data, tmp_path / "local.pt",
                              sets=("model.layers=1", "model.encoder.attention=local(window = 2)"))
    assert run(["export", str(local), "--format", "ctranslate2", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "CTranslate2 cannot express this model" in err and "scaled_dot" in err


@pytest.mark.parametrize("sets, named", [
    (("model.bias.attention=true", "model.bias.k=false"), "q, k and v must all have a bias or none"),
    (("model.positions=alibi",), "positions must be sinusoidal or learned, not alibi"),
    (("model.positions=relative(max_distance = 4)",), "positions must be sinusoidal or learned, not relative"),
    (("model.head=dense(activation = gelu)",), "head must be linear"),
    (("model.normalization=rmsnorm",), "normalization = layernorm"), (("model.activation=swiglu",), "relu, gelu, gelu_tanh, silu activations"),
    (("model.kv_heads=2",), "kv_heads must equal heads"), (("model.positions=rope",), "sinusoidal or learned"),
    (("model.final_norm=true",), "a final norm exactly when norm = pre"),
    (("model.decoder.attention=scaled_dot(normalizer = sigmoid(length = 64))",),
     "normalizer = sigmoid(length = 64) (only softmax)"),
    (("model.encoder.attention=scaled_dot(normalizer = differential)",), "normalizer = differential (only softmax)"),
])
def test_unsupported_choices_are_refused_in_one_line(sets, named):
    from attncomp import ir
    from attncomp.errors import UsageError
    from attncomp.interop.ctranslate2_export import check_supported
    from tests.conftest import ROOT

    with pytest.raises(UsageError, match="CTranslate2 cannot express this model") as err:
        check_supported(ir.load(ROOT / "specs/examples/tiny.attn", list(sets)))
    assert named in str(err.value) and "\n" not in str(err.value)


def test_a_prefix_lm_is_refused_in_one_line(sample_data, tmp_path, capsys):
    """decoder { mask = prefix }: CTranslate2's decoders are causal, so the export says so, exit 2."""
    from tests.conftest import ROOT
    from tests.interop.conftest import random_checkpoint

    path = random_checkpoint(sample_data, tmp_path / "prefix.pt", spec_path=ROOT / "specs/examples/lm.attn",
                             sets=("model.vocab=shared(256)", "model.d_model=16", "model.heads=2", "model.d_ff=32",
                                   "model.decoder.layers=1", "model.decoder.mask=prefix"))
    assert run(["export", str(path), "--format", "ctranslate2", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "CTranslate2 cannot express a prefix LM (decoder { mask = prefix })" in err
    assert not (tmp_path / "out").exists()
