"""Hostile special token ids (`vocab = shared(N, pad = ..., mask = ...)`): what bench/hostile.py's special_ids
category found. Ids that the encoder's padding mask would hide are refused at the spec's line; the refusals
of a vocabulary that does not fit the data name ids that `train` then accepts; translate's refusal of ids
that differ from the model's tokenizer says what to do there (not "prepare the data")."""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import pytest

from attncomp.cli.main import run
from attncomp.data.tokenizer import Tokenizer
from attncomp.errors import DataError
from attncomp import ir
from attncomp.train.config import check_vocab
from attncomp.vocab import Specials

MODEL = "model m {{\n  d_model = 16  heads = 2  d_ff = 32  layers = 1\n  vocab = {vocab}\n  {stacks}\n}}\n"


def _spec(tmp_path, vocab: str, stacks: str):
    path = tmp_path / "m.attn"
    path.write_text(MODEL.format(vocab=vocab, stacks=stacks))
    return path


@pytest.mark.parametrize("vocab, stacks, message", [
    ("shared(64, mask = 0)", "encoder { }", "mask and pad are both 0"),
    ("shared(64, sep = 0)", "encoder { }", r"mask (unset: sep's id) and pad are both 0"),
    ("shared(64, pad = 4)", "encoder { }", r"mask (unset: sep's id) and pad are both 4"),
    ("shared(64, pad = 3)", "encoder { } decoder { }", "eos and pad are both 3"),
    ("shared(64, pad = 7, bos = 7)", "encoder { } decoder { }", "bos and pad are both 7"),
    ("shared(64, eos = 0)", "encoder { }", "eos and pad are both 0"),
])
def test_an_id_the_encoder_would_hide_as_padding_is_refused_at_its_line(vocab, stacks, message, tmp_path, capsys):
    """Before: masked-LM trained with mask = pad (every <mask> hidden from attention), and an encoder read
    sources whose </s> was padding, silently."""
    path = _spec(tmp_path, vocab, stacks)
    assert run(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"m\.attn:3:(22|31): error: " + re.escape(message) + ", but the encoder masks pad's id", err)
    assert "Traceback" not in err


@pytest.mark.parametrize("vocab, stacks", [
    ("shared(64, mask = 0)", "encoder { } decoder { }"),  # an encoder-decoder never writes <mask>
    ("shared(64, pad = 3)", "decoder { }"),  # a decoder-only model masks no padding
    ("shared(64, sep = 0, mask = 5)", "encoder { }"),  # an encoder-only model never reads <sep>
    ("shared(64, pad = 54, eos = 0, start = 54)", "encoder { } decoder { }"),  # Marian's: start = pad
])
def test_ids_shared_where_nothing_hides_them_are_kept(vocab, stacks, tmp_path, capsys):
    assert run(["check", str(_spec(tmp_path, vocab, stacks))]) == 0


def test_the_resize_hint_declares_the_data_tokenizers_ids(tmp_path):
    """Before: `--set "model.vocab=shared(N)"`, which dropped the spec's ids (an imported GPT-2's pad = none,
    bos = eos = 50256), or kept ones outside the new size; now the data's tokenizer's, which train accepts."""
    gpt2 = Specials(pad=None, unk=None, bos=300, eos=300, sep=None, mask=None, start=300)
    data = SimpleNamespace(path=tmp_path / "data", vocab={"src_size": 301, "tgt_size": 301, "shared": True},
                           tokenizer=lambda side: SimpleNamespace(specials=gpt2))
    arch = ir.load(str(_spec(tmp_path, "shared(64, mask = 9)", "encoder { }"))).model
    with pytest.raises(DataError) as info:
        check_vocab(data, arch)
    assert 'model.vocab=shared(301, pad = none, unk = none, bos = 300, eos = 300, sep = none, mask = 9)"' \
        in str(info.value)
    ours = SimpleNamespace(**{**vars(data), "tokenizer": lambda side: SimpleNamespace(specials=Tokenizer.specials)})
    with pytest.raises(DataError, match=r'model\.vocab=shared\(301, mask = 9\)"'):
        check_vocab(ours, arch)
    bert = replace(gpt2, pad=0, mask=103)  # a tokenizer with a <mask> of its own: the hint declares that one
    bertlike = SimpleNamespace(**{**vars(data), "tokenizer": lambda side: SimpleNamespace(specials=bert)})
    with pytest.raises(DataError, match=r'model\.vocab=shared\(301, unk = none, bos = 300, eos = 300, sep = none, '
                                        r'mask = 103\)"'):
        check_vocab(bertlike, arch)


@pytest.mark.slow  # a trained tiny run (tiny_artifacts)
def test_translate_with_ids_set_away_from_the_models_says_to_keep_them(tiny_artifacts, tmp_path, capsys):
    code = run(["translate", str(tiny_artifacts["ckpt"]), "--input", str(tiny_artifacts["src"]), "--device", "cpu",
                "--set", "model.vocab=shared(256, pad = 5)"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("error:") == 1
    assert "the model's target tokenizer has pad = 0, but the spec's vocabulary declares pad = 5: keep the ids " \
           "the model was trained with" in err and "prepare the data" not in err


@pytest.mark.slow  # a trained tiny run (tiny_artifacts)
def test_a_sweep_row_whose_ids_disagree_with_the_data_is_refused_before_anything_trains(tiny_artifacts, tmp_path,
                                                                                         capsys):
    """Before: the row's training refused it, then the sweep said the row failed (two error lines, after
    the rows before it had trained); now `plan` refuses it with the spec's other checks."""
    code = run(["sweep", str(tiny_artifacts["spec"]), "--data", str(tiny_artifacts["data"]), "--out",
                str(tmp_path / "sweep"), "--steps", "1", "--bleu-sentences", "0",
                "--set", "model.vocab=shared(256, bos = 7)"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("error:") == 1 and "tokenizer has bos = 2" in err
    assert not (tmp_path / "sweep" / "rows").exists()


@pytest.mark.slow  # a trained tiny run (tiny_artifacts)
def test_train_refuses_ids_that_disagree_with_the_data_before_it_says_it_trains(tiny_artifacts, tmp_path, capfd):
    """Before: the run directory, its spec.attn and run.json were written and "training tiny on 1 CPU
    worker(s)" printed, then the worker refused the tokenizer; now the refusal comes first, alone."""
    out = tmp_path / "run"
    code = run(["train", str(tiny_artifacts["spec"]), "--data", str(tiny_artifacts["data"]), "--out", str(out),
                "--procs", "1", "--set", "model.vocab=shared(256, bos = 7)"])
    captured = capfd.readouterr()
    both = captured.out + captured.err
    assert code == 2 and both.count("error:") == 1 and "tokenizer has bos = 2" in both
    assert not re.search(r"^training ", both, re.MULTILINE)
    assert not out.exists()
