"""The paper's other settings as specs: Table 3 without averaging, parsing (6.3), English-French (Table 2)."""

from __future__ import annotations

import pytest

import attncomp
from attncomp import ir
from attncomp.report import count_params
from tests.conftest import ROOT
from tests.lower.test_params import _paper_count

TABLE3 = sorted((ROOT / "specs" / "table3").glob("*.attn"))


def _load(path: str):
    return ir.load(ROOT / "specs" / path)


def _params(spec) -> int:
    return count_params(attncomp.compile(spec, device="meta", passes=()))[0]


@pytest.mark.parametrize("path", TABLE3, ids=lambda p: p.stem)
def test_table3_rows_average_no_checkpoints(path):
    # section 6.2: "We used beam search as described in the previous section, but no checkpoint averaging."
    spec = ir.load(path)
    assert spec.train.checkpoint.average_last == 1
    assert (spec.decode.beam, spec.decode.length_penalty, spec.decode.stop) == (4, 0.6, "bound")


def test_base_and_big_average_5_and_20():
    assert _load("base.attn").train.checkpoint.average_last == 5
    assert _load("big.attn").train.checkpoint.average_last == 20


def _stacks(spec) -> list:
    return [spec.model.encoder, spec.model.decoder]


def test_parsing_is_base_with_the_papers_changes():
    spec = _load("examples/parsing.attn")
    for stack in _stacks(spec):
        assert (stack.layers, stack.d_model, stack.heads, stack.d_k, stack.d_ff) == (4, 1024, 8, 128, 2048)
    model = spec.model
    assert model.vocab.size == 16000 and (model.bias.attention, model.bias.ffn) == (False, True)
    assert (model.dropout.residual, model.dropout.attention) == (0.2, 0.2)
    assert (spec.decode.beam, spec.decode.length_penalty, spec.decode.max_len.offset) == (21, 0.3, 300)
    base = _load("base.attn")
    assert spec.train == base.train  # "all other parameters remained unchanged"
    assert _params(spec) == _paper_count(1024, 2048, 4, 16000, attention_bias=False, ffn_bias=True)


def test_semi_supervised_parsing_has_a_32k_vocabulary():
    wsj, semi = _load("examples/parsing.attn"), _load("examples/parsing_semi.attn")
    assert semi.model.vocab.size == 32000 and semi.model.dropout.residual == 0.1
    changed = {key for key, _, _ in ir.diff(wsj, semi)}
    assert changed == {"model.name", "model.vocab.size", "model.dropout.residual", "model.dropout.embedding",
                       "model.dropout.attention"}


def test_english_french_base_differs_from_english_german_only_in_its_vocabulary():
    ende, enfr = _load("base.attn"), _load("enfr/base.attn")
    assert enfr.model.vocab.size == 32000
    changed = {key for key, _, _ in ir.diff(ende, enfr)}
    assert {key for key in changed if not key.startswith("expect.params")} == {"model.name", "model.vocab.size"}
    assert enfr.expect.params is None  # the paper gives no count
    assert _params(enfr) == _paper_count(512, 2048, 6, 32000, attention_bias=False, ffn_bias=True)


def test_english_french_big_drops_out_0_1_instead_of_0_3():
    big, enfr = _load("big.attn"), _load("enfr/big.attn")
    assert (enfr.model.dropout.residual, enfr.model.dropout.embedding) == (0.1, 0.1)
    assert (enfr.model.d_model, enfr.model.encoder.heads, enfr.model.encoder.d_ff) == (1024, 16, 4096)
    assert enfr.train == big.train and enfr.decode == big.decode
    assert _params(enfr) == _paper_count(1024, 4096, 6, 32000, attention_bias=False, ffn_bias=True)
