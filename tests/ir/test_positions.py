"""Positions on the scores (ALiBi, relative) and the sinusoid layouts: the reference formulas written out,
and specs stored before these keys existed still meaning what they meant."""

from __future__ import annotations

import math

import pytest
import torch

from attncomp import ir
from attncomp.ir import nodes
from attncomp.lower import ops
from tests.conftest import ROOT


def _paper_slopes(n: int) -> list[float]:
    """get_slopes of the ALiBi paper's code (ofirpress/attention_with_linear_biases), written out."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start**i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _paper_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("heads", [1, 2, 3, 6, 8, 12, 16])
def test_alibi_bias_has_the_papers_slopes_and_distances(heads):
    bias = ops.alibi_bias(heads, 5, 5, torch.device("cpu"), torch.float64)
    i, j = torch.arange(5).unsqueeze(1), torch.arange(5).unsqueeze(0)
    expected = -torch.tensor(_paper_slopes(heads), dtype=torch.float64).view(-1, 1, 1) * (i - j).abs()
    assert torch.equal(bias, expected)
    step = ops.alibi_bias(heads, 1, 5, torch.device("cpu"), torch.float64)  # a decode step: the last query
    assert torch.equal(step, expected[:, -1:])


def test_relative_positions_are_tensor2tensors_clipped_distances():
    """_generate_relative_positions_matrix: clip(j - i, -k, k) + k, queries the last Tq of Tk positions."""
    full = ops.relative_positions(5, 5, 2, torch.device("cpu"))
    assert full.tolist() == [[2, 3, 4, 4, 4], [1, 2, 3, 4, 4], [0, 1, 2, 3, 4], [0, 0, 1, 2, 3], [0, 0, 0, 1, 2]]
    assert torch.equal(ops.relative_positions(2, 5, 2, torch.device("cpu")), full[-2:])


def test_halves_is_the_interleaved_table_with_sines_first():
    pos = torch.arange(9)
    interleaved = ops.sinusoidal(pos, 16, torch.float64)
    halves = ops.sinusoidal_halves(pos, 16, torch.float64)
    assert torch.equal(halves, torch.cat([interleaved[:, 0::2], interleaved[:, 1::2]], dim=1))


def test_a_spec_stored_before_the_new_keys_keeps_its_meaning():
    """Checkpoints store canonical text; one written before `layout` existed says `positions = sinusoidal`."""
    spec = ir.load(ROOT / "specs/examples/tiny.attn")
    old_text = ir.to_text(spec).replace("sinusoidal(layout = interleaved)", "sinusoidal")
    assert "positions = sinusoidal\n" in old_text
    assert ir.load_flat(old_text, "old checkpoint") == spec
    assert spec.model.positions == nodes.Sinusoidal(layout="interleaved")


LEARNED = """model learned {
  d_model = 16  heads = 2  d_ff = 24  vocab = shared(32)  norm = pre
  positions = learned(max_len = 12)
  decoder { layers = 1 }
  dropout { residual = 0.0  embedding = 0.0 }
}
"""


def test_learned_offset_reads_its_table_from_row_offset():
    """`learned(offset = 2)` (OPT's): a table of max_len + 2 rows, position p reading row p + 2; the same model
    as `learned` with the table's first two rows dropped, in the forward and in cached decoding. At 0 the key
    stays out of the canonical text, so specs written before it keep their text and hash."""
    import attncomp
    from tests.helpers import assert_decode_steps

    plain = ir.load_flat(LEARNED, "<plain>")
    shifted = ir.load_flat(LEARNED.replace("max_len = 12", "max_len = 12, offset = 2"), "<shifted>")
    assert "offset" not in ir.to_text(plain) and "learned(max_len = 12, offset = 2)" in ir.to_text(shifted)
    assert ir.spec_hash(plain) != ir.spec_hash(shifted)
    assert ir.load_flat(ir.to_text(shifted), "<again>") == shifted
    torch.manual_seed(0)
    ours = attncomp.compile(shifted, dtype=torch.float64).eval()
    state = ours.state_dict()
    assert state["decoder.pos.weight"].shape == (14, 16)
    base = attncomp.compile(plain, dtype=torch.float64).eval()
    base.load_state_dict({**state, "decoder.pos.weight": state["decoder.pos.weight"][2:]})
    tokens = torch.randint(0, 32, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = base(tokens)
        assert torch.equal(ours(tokens), expected)
        assert_decode_steps(ours, ours.init_cache(tokens), tokens, expected, 1e-12)
