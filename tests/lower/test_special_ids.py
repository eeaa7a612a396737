"""The special ids a spec's vocabulary declares (attncomp.vocab; issue 27's Build item 3): written only away
from attncomp's defaults (every shipped spec keeps its hash), and read by every stage — the compiled model's
padding mask, batching, the loss (tests/train/test_loss.py), masked-LM corruption, decoding — so a model
with its own ids (BART's <pad> 1, GPT-2's missing <pad>) needs no vocabulary row moved."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.ir import nodes
from attncomp.codegen import render
from attncomp.data import masking
from attncomp.data.batching import mono_batch
from attncomp.data.objective import OBJECTIVES
from attncomp.decode.beam import CachedStepper, beam_search
from attncomp.errors import DataError
from attncomp.passes import DEFAULT_PASSES
from attncomp.vocab import DEFAULT, IGNORE, Specials
from tests.conftest import ROOT

TOLERANCE = 1e-10
STACK = "layers = 2  d_model = 32  heads = 4  d_ff = 64"
BART_IDS = "pad = 1, bos = 0, eos = 2, unk = 3, start = 2"  # BART's: <s> 0, <pad> 1, </s> 2, <unk> 3


def _spec(vocab: str, stacks: str = f"encoder {{ {STACK} }}  decoder {{ {STACK} }}"):
    return ir.load_flat(f"model m {{ vocab = {vocab}  {stacks} }}", "<test>")


def _model(spec, passes=()):
    torch.manual_seed(0)
    return attncomp.compile(spec, passes=passes, dtype=torch.float64).eval()


def test_defaults_are_not_written_and_declared_ids_round_trip():
    base = ir.load(ROOT / "specs/base.attn")
    assert "pad" not in ir.to_text(base) and base.model.specials == DEFAULT
    gpt = _spec("shared(100, pad = none, unk = 99, bos = 99, eos = 99, sep = none)", f"decoder {{ {STACK} }}")
    text = ir.to_text(gpt)
    assert "vocab = shared(size = 100, pad = none, unk = 99, bos = 99, eos = 99, sep = none)" in text
    again = ir.load_flat(text, "<canonical>")
    assert again.model.specials == gpt.model.specials == Specials(pad=None, unk=99, bos=99, eos=99, sep=None,
                                                                  mask=None, start=99)
    assert ir.spec_hash(again) == ir.spec_hash(gpt) != ir.spec_hash(_spec("shared(100)", f"decoder {{ {STACK} }}"))


@pytest.mark.parametrize("passes", [(), DEFAULT_PASSES], ids=["explicit", "fused"])
def test_the_declared_pad_is_what_the_compiled_model_masks(passes):
    """BART's ids: a source padded with 1 gives each row the logits it has alone, and id 0 (its <s>) is a
    token the encoder attends to, not padding."""
    model = _model(_spec(f"shared(50, {BART_IDS})"), passes)
    rows = [[0, 9, 14, 22, 30, 2], [0, 7, 2]]
    src = torch.tensor([rows[0], rows[1] + [1, 1, 1]])
    tgt = torch.tensor([[2, 0, 11, 12], [2, 0, 13, 14]])
    with torch.no_grad():
        both = model(src, tgt)
        for i, row in enumerate(rows):
            alone = model(torch.tensor([row]), tgt[i : i + 1])
            assert (both[i] - alone[0]).abs().max() < TOLERANCE
        without_bos = model(torch.tensor([[9, 14, 22, 30, 2]]), tgt[:1])  # had 0 been padding, no change
        assert (both[0] - without_bos[0]).abs().max() > 1e-3
        hyps = beam_search(CachedStepper(model, src), 2, [5, 5], 2, 0.0, specials=model.spec.model.specials)
        for i, row in enumerate(rows):
            alone = beam_search(CachedStepper(model, torch.tensor([row])), 1, [5], 2, 0.0,
                                specials=model.spec.model.specials)
            assert hyps[i][0].tokens == alone[0][0].tokens
    assert "padding_mask(src, 1)" in render(model, "bart.attn")  # the generated module says so


def test_a_vocabulary_without_pad_keeps_token_0_in_the_loss(sample_data):
    """GPT-2's vocabulary (no <pad>, <|endoftext|> for begin and end): every target counts, id 0 included;
    the inputs pad with id 0, which only positions after the end read."""
    from attncomp.data.dataset import PreparedData

    split = PreparedData(sample_data).split("train")
    gpt2 = Specials(pad=None, unk=60, bos=60, eos=60, sep=None, mask=None, start=60)
    indices = np.arange(6)
    batch = mono_batch(split, indices, gpt2)
    lengths = split.tgt.lengths[indices]
    assert int((batch["tgt_out"] != IGNORE).sum()) == int(lengths.sum())
    assert (batch["tokens"][:, 0] == 60).all()
    short = int(np.argmin(lengths))
    assert (batch["tokens"][short, lengths[short]:] == 0).all()
    assert (batch["tgt_out"][short, lengths[short]:] == IGNORE).all()


def test_data_whose_tokenizer_declares_other_ids_is_refused_in_one_line():
    spec = ir.load(ROOT / "specs/base.attn")
    bart = Specials(pad=1, unk=3, bos=0, eos=2, sep=None, start=2)
    with pytest.raises(DataError, match=r"^data/de-en's tokenizer has pad = 1, but the spec's vocabulary declares "
                                        r"pad = 0: "):
        OBJECTIVES["translation"].batcher_collate(spec, lambda: SimpleNamespace(specials=bart), "data/de-en")
    # the same ids: accepted; a chosen target language may start the decoder (mBART) and force its tokens
    chosen = SimpleNamespace(specials=replace(DEFAULT, start=9, forced=(9,)), languages={"de_DE": 9})
    collate = OBJECTIVES["translation"].batcher_collate(spec, lambda: chosen, "data/de-en")
    assert collate.keywords["specials"] == replace(DEFAULT, start=9, forced=(9,))
    with pytest.raises(DataError, match="has start = 9, but the spec's vocabulary declares start = 2"):
        OBJECTIVES["translation"].batcher_collate(spec, lambda: SimpleNamespace(specials=chosen.specials), "x")


BERT = Specials(pad=0, unk=100, bos=101, eos=102, sep=None, mask=103, start=101)


def test_a_tokenizer_whose_mask_differs_from_the_specs_is_refused_and_one_without_a_mask_is_accepted():
    """Before: <mask> was never compared, so masked-LM corrupted BERT's data with the spec's mask id while its
    tokenizer's [MASK] was another token."""
    spec = _spec("shared(200, unk = 100, bos = 101, eos = 102, sep = none, mask = 103)", f"encoder {{ {STACK} }}")
    masked_lm = OBJECTIVES["masked_lm"]
    with pytest.raises(DataError, match=r"^data/bert's tokenizer has mask = 104, but the spec's vocabulary declares "
                                        r"mask = 103: "):
        masked_lm.batcher_collate(spec, lambda: SimpleNamespace(specials=replace(BERT, mask=104)), "data/bert")
    for theirs in (BERT, replace(BERT, mask=None)):  # the same <mask>, or none (the spec's is used)
        collate = masked_lm.batcher_collate(spec, lambda: SimpleNamespace(specials=theirs), "data/bert")
        assert collate.keywords["specials"].mask == 103


def test_an_hf_envelope_records_the_tokenizers_mask_and_an_earlier_one_declares_none():
    pytest.importorskip("tokenizers")
    from attncomp.data.hf_tokenizer import HFTokenizer, envelope
    from tests.interop import hf_tokenizers

    text = hf_tokenizers.wordpiece().to_str()
    bert = Specials(pad=0, unk=1, bos=2, eos=3, sep=None, mask=4, start=2)
    stored = envelope(text, bert, ["text"], {}, None, None, 150)
    assert HFTokenizer.from_bytes(stored).specials == bert
    assert HFTokenizer.from_bytes(HFTokenizer.from_bytes(stored).to_bytes()).specials.mask == 4
    record = json.loads(stored)
    del record["specials"]["mask"]  # as envelopes were written before <mask> was recorded
    assert HFTokenizer.from_bytes(json.dumps(record).encode()).specials == replace(bert, mask=None)
    assert "mask" not in json.loads(envelope(text, replace(bert, mask=None), ["text"], {}, None, None, 150))["specials"]


def test_a_tokenizer_records_every_role_of_a_vocabulary_but_mask():
    """The names say which is which: a vocabulary's roles (nodes.ROLES) and a stored tokenizer's, without <mask>
    (Specials.roles() was the latter under the former's name)."""
    assert tuple(BERT.tokenizer_roles()) == tuple(r for r in nodes.ROLES if r != "mask")
    assert not hasattr(BERT, "roles")


def test_masked_lm_never_chooses_nor_draws_a_declared_special_and_masks_with_the_declared_mask():
    g = np.random.default_rng(0)
    tokens = g.integers(0, 200, size=(300, 40))
    tokens[:, 0], tokens[:, -1] = 101, 102  # [CLS] text [SEP]
    inputs, target = masking.corrupt(7, 0.3, 0.5, 0.4, 200, np.arange(300), tokens, BERT)
    chosen = target != IGNORE
    assert chosen.sum() > 1000 and not np.isin(tokens[chosen], BERT.ids()).any()
    assert (target[chosen] == tokens[chosen]).all() and (inputs[~chosen] == tokens[~chosen]).all()
    masked = chosen & (inputs == 103)
    replaced = chosen & (inputs != 103) & (inputs != tokens)
    assert masked.sum() > 0 and replaced.sum() > 0 and not np.isin(inputs[replaced], BERT.ids()).any()
    assert np.isin(np.arange(200), BERT.ids(), invert=True).sum() == len(np.unique(masking.draw(
        np.linspace(0, 1, 10_000, endpoint=False), 200, BERT)))  # every ordinary id can be drawn


def test_attncomps_own_ids_draw_and_choose_as_before():
    """The defaults give what masked-LM gave before the ids were declared: k + 5, ids 0-4 never chosen."""
    u = np.random.default_rng(1).random(10_000)
    assert (masking.draw(u, 1000) == 5 + (u * 995).astype(np.int64)).all()
    tokens = np.arange(40).reshape(1, 40)
    assert not masking.chosen(3, 1.0, np.array([0]), tokens)[0, :5].any()
    assert masking.chosen(3, 1.0, np.array([0]), tokens)[0, 5:].all()
