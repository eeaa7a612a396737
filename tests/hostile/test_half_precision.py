"""`translate` and `eval` with `--dtype float16|bfloat16` (13c4359): a model whose activations overflow
float16 (its largest value is 65504) gives NaN logits. Before, beam search ranked the NaN first (topk's
order), ended every hypothesis unfinished and returned none: `translate` died with an internal error
(IndexError, exit 70), `--nbest 2` printed nothing and exited 0, `--sample` handed torch.multinomial a NaN
probability (RuntimeError, exit 70). Now each is one error line naming the step and what to try, and
nothing is written. Each test failed on the behaviour before the fix."""

from __future__ import annotations

import math

import pytest
import torch

from attncomp import checkpoint
from attncomp.decode.beam import NaNScores, Stepper, beam_search
from attncomp.decode.sampling import Sampling, sample
from tests.conftest import ROOT

CHECKPOINT = ROOT / "tests/fixtures/legacy/checkpoint.pt"


@pytest.fixture(scope="module")
def loud(tmp_path_factory):
    """The legacy tiny checkpoint with every weight times 300: finite and decodable in float32 and
    bfloat16, its activations past float16's range."""
    found = checkpoint.read(CHECKPOINT)
    for name, tensor in found.model.items():
        if tensor.is_floating_point():
            found.model[name] = tensor * 300
    path = tmp_path_factory.mktemp("loud") / "loud.pt"
    checkpoint.save(found, path)
    return path


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    path = tmp_path_factory.mktemp("lines") / "in.txt"
    path.write_text("a b c\nd e\n")
    return path


class _NaN(Stepper):
    def start(self, rows):
        self.rows = len(rows)

    def step(self, tokens):
        logits = torch.zeros(self.rows, 8)
        logits[0, 5] = math.nan
        return logits

    def select(self, rows):
        self.rows = len(rows)


@pytest.mark.parametrize("search", ["beam", "sample"])
def test_nan_scores_stop_the_search_with_their_step(search):
    with pytest.raises(NaNScores, match="NaN at output step 1"):
        if search == "beam":
            beam_search(_NaN(), 1, [5], beam=2, alpha=0.0, nbest=2)
        else:
            sample(_NaN(), 1, [5], 2, 0.0, Sampling())


@pytest.mark.parametrize("options", [[], ["--nbest", "2", "--beam", "2"], ["--sample"], ["--stream"]])
def test_float16_overflow_is_one_error_line(options, loud, lines, tmp_path, sandbox):
    out = [] if "--stream" in options else ["--output", str(tmp_path / "out.txt")]
    outcome = sandbox.run(["translate", str(loud), "--input", str(lines), "--device", "cpu", "--dtype", "float16",
                           *options, *out], timeout=90)
    assert outcome.code == 2 and not outcome.problems(), outcome.summary()
    assert "NaN at output step 1" in outcome.stderr and "--dtype bfloat16 or float32" in outcome.stderr
    assert not (tmp_path / "out.txt").exists() and outcome.stdout == ""


def test_eval_float16_overflow_is_one_error_line_and_writes_nothing(loud, lines, tmp_path, sandbox):
    outcome = sandbox.run(["eval", str(loud), "--src", str(lines), "--ref", str(lines), "--device", "cpu",
                           "--dtype", "float16", "--output", str(tmp_path / "hyp.txt")], timeout=90)
    assert outcome.code == 2 and not outcome.problems(), outcome.summary()
    assert "NaN at output step 1" in outcome.stderr and not (tmp_path / "hyp.txt").exists()


def test_the_same_checkpoint_decodes_in_bfloat16(loud, lines, sandbox):
    """bfloat16 has float32's range: the loud model decodes (one line per input line)."""
    outcome = sandbox.run(["translate", str(loud), "--input", str(lines), "--device", "cpu", "--dtype", "bfloat16",
                           "--beam", "2"], timeout=90)
    assert outcome.code == 0 and len(outcome.stdout.splitlines()) == 2, outcome.summary()
