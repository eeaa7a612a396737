"""Beam search: hand-computed cases, beam 1 = greedy, cached = uncached decoding."""

from __future__ import annotations

import math

import pytest
import torch

from attncomp import ir
from attncomp.decode.beam import CachedStepper, FullStepper, Stepper, beam_search, length_penalty
from attncomp.lower import lower
from attncomp.vocab import BOS, EOS
from tests.conftest import ROOT
from tests.helpers import batch, small

A, B, C = 5, 6, 7
V = 8


class TableStepper(Stepper):
    """Next-token probabilities looked up by the prefix generated so far (one sentence)."""

    def __init__(self, table: dict[tuple, dict[int, float]], vocab: int = V):
        self.table, self.calls, self.vocab = table, 0, vocab

    def start(self, rows):
        self.prefixes = [() for _ in rows]

    def step(self, tokens):
        self.calls += 1
        self.prefixes = [p if t == BOS else p + (int(t),) for p, t in zip(self.prefixes, tokens.tolist())]
        logits = torch.full((len(self.prefixes), self.vocab), -1e9)
        for row, prefix in enumerate(self.prefixes):
            for token, p in self.table.get(prefix, {EOS: 1.0}).items():
                logits[row, token] = math.log(p)
        return logits

    def select(self, rows):
        self.prefixes = [self.prefixes[i] for i in rows.tolist()]


# "A" then stop: p = 0.5 * 0.7;  "A B" then stop: p = 0.5 * 0.3 * 0.9;  "C": p = 0.4 * 1.0
TABLE = {(): {A: 0.5, C: 0.4, B: 0.1}, (A,): {EOS: 0.7, B: 0.3}, (A, B): {EOS: 0.9, C: 0.1}, (C,): {EOS: 1.0},
         (B,): {EOS: 1.0}}


def _best(alpha, beam=3):
    return beam_search(TableStepper(TABLE), 1, [6], beam=beam, alpha=alpha, nbest=3)[0]


def test_length_penalty_formula():
    assert length_penalty(1, 0.6) == 1.0
    assert length_penalty(7, 1.0) == pytest.approx(2.0)
    assert length_penalty(10, 0.0) == 1.0


def test_ranking_by_hand():
    # log-probabilities: C: log 0.4 = -0.916 (len 2); A: log 0.35 = -1.050 (len 2); A B: log 0.135 = -2.002 (len 3)
    hyps = _best(alpha=0.0)
    assert [h.tokens for h in hyps] == [[C], [A], [A, B]]
    assert hyps[0].logprob == pytest.approx(math.log(0.4), abs=1e-6)
    assert hyps[2].score == pytest.approx(math.log(0.5 * 0.3 * 0.9), abs=1e-6)
    # with alpha = 2 the longer hypothesis is divided by ((5 + 3) / 6)^2 = 1.778, the others by (7/6)^2 = 1.361
    hyps = _best(alpha=2.0)
    assert hyps[2].score == pytest.approx(math.log(0.135) / (8 / 6) ** 2, abs=1e-6)
    assert hyps[0].score == pytest.approx(math.log(0.4) / (7 / 6) ** 2, abs=1e-6)


def test_first_come_stops_when_beam_hypotheses_have_ended():
    stepper = TableStepper(TABLE)
    beam_search(stepper, 1, [50], beam=2, alpha=0.6, stop="first")
    assert stepper.calls == 2  # after step 2, "C" and "A" have ended: no third step, though 50 were allowed


def test_bound_stops_when_no_live_hypothesis_can_win():
    # After step 2 "C" (-0.835) and "A" (-0.957) have ended, but the live "A B" (log 0.15 = -1.897) could
    # still score -1.897 / ((5 + 50) / 6)^0.6 = -0.502 at length 50. After step 3 the live "A B C"
    # (log 0.015 = -4.20) reaches at best -1.11, below the worst finished: the search ends.
    stepper = TableStepper(TABLE)
    hyps = beam_search(stepper, 1, [50], beam=2, alpha=0.6, nbest=2)[0]
    assert stepper.calls == 3
    assert [h.tokens for h in hyps] == [[C], [A]]


D, E = 8, 9
# First-come ends at step 3 with "B", "C", "D" (step 2) and "A E" (step 3) finished, best "B"
# (log 0.25 / (7/6)^0.6 = -1.264). "A E E" (p = 0.54, length 4 with </s>) scores -0.616 / 1.275 = -0.483.
LONG_WINS = {(): {A: 0.6, B: 0.25, C: 0.1, D: 0.05}, (A,): {E: 1.0}, (A, E): {EOS: 0.1, E: 0.9},
             (A, E, E): {EOS: 1.0}}


def test_the_two_rules_return_different_best_hypotheses():
    first = beam_search(TableStepper(LONG_WINS, vocab=10), 1, [10], beam=4, alpha=0.6, stop="first")[0][0]
    bound = beam_search(TableStepper(LONG_WINS, vocab=10), 1, [10], beam=4, alpha=0.6, stop="bound")[0][0]
    assert first.tokens == [B] and first.score == pytest.approx(math.log(0.25) / (7 / 6) ** 0.6, abs=1e-5)
    assert bound.tokens == [A, E, E] and bound.score == pytest.approx(math.log(0.54) / 1.5**0.6, abs=1e-5)


class RandomTreeStepper(Stepper):
    """A random next-token distribution over `tokens` real tokens and </s> for every prefix, seeded by it."""

    def __init__(self, seed: int, tokens: int):
        self.seed, self.allowed = seed, [EOS, *range(5, 5 + tokens)]

    def logp(self, prefix: tuple) -> torch.Tensor:
        g = torch.Generator().manual_seed(hash((self.seed, prefix)) % (1 << 62))
        logits = torch.full((5 + len(self.allowed),), -1e9)
        logits[self.allowed] = 3 * torch.randn(len(self.allowed), generator=g)
        return torch.log_softmax(logits, -1)

    def start(self, rows):
        self.prefixes = [() for _ in rows]

    def step(self, tokens):
        self.prefixes = [p if t == BOS else p + (int(t),) for p, t in zip(self.prefixes, tokens.tolist())]
        return torch.stack([self.logp(p) for p in self.prefixes])

    def select(self, rows):
        self.prefixes = [self.prefixes[i] for i in rows.tolist()]


def _exhaustive(stepper: RandomTreeStepper, max_len: int, alpha: float) -> tuple[float, list[int]]:
    """The best (score, tokens) over every sequence of at most max_len tokens, </s> (forced last) included."""
    best, frontier = (-math.inf, []), [((), 0.0)]
    for length in range(1, max_len + 1):
        grown = []
        for prefix, logprob in frontier:
            logp = stepper.logp(prefix)
            end = logprob + float(logp[EOS])
            best = max(best, (end / length_penalty(length, alpha), list(prefix)))
            grown += [(prefix + (t,), logprob + float(logp[t])) for t in stepper.allowed[1:]]
        frontier = grown
    return best


@pytest.mark.parametrize("tokens, max_len", [(3, 4), (2, 6)])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_bound_finds_what_exhaustive_search_finds(tokens, max_len, alpha):
    # beam 32 keeps every prefix of these trees alive (at most 27 or 32 of them), so no pruning hides
    # the best sequence: only stopping too early could miss it.
    for seed in range(6):
        stepper = RandomTreeStepper(seed, tokens)
        (hyp,) = beam_search(stepper, 1, [max_len], beam=32, alpha=alpha)[0]
        score, best = _exhaustive(stepper, max_len, alpha)
        assert hyp.tokens == best and hyp.score == pytest.approx(score, abs=1e-5)


def test_end_is_forced_at_the_maximum_length():
    looping = {(A,) * n: {A: 0.9, EOS: 0.1} for n in range(10)}
    (hyp,) = beam_search(TableStepper(looping), 1, [4], beam=1, alpha=0.0)[0:1][0]
    assert len(hyp.tokens) <= 3  # </s> is the 4th token at the latest


@pytest.mark.parametrize("stop", ["bound", "first"])
def test_beam_one_is_greedy_under_every_stop_rule(stop):
    # the argmax is A (0.6), then B (0.5), then </s>: greedy gives "A B" (log 0.3). The ending ranked
    # second at the first step (</s>, log 0.4) scores higher, but greedy decoding never chose it.
    table = {(): {A: 0.6, EOS: 0.4}, (A,): {B: 0.5, C: 0.3, EOS: 0.2}, (A, B): {EOS: 1.0}}
    (hyp,) = beam_search(TableStepper(table), 1, [6], beam=1, alpha=0.0, stop=stop)[0]
    assert hyp.tokens == [A, B] and hyp.logprob == pytest.approx(math.log(0.3))


def _models():
    cases = {"base": [], "lm": None, "local_decoder": ["model.decoder.attention=local(window = 2)"],
             "additive_pre": ["model.attention=additive", "model.cross_attention=additive", "model.norm=pre"]}
    for name, overrides in cases.items():
        path = ROOT / ("specs/examples/lm.attn" if overrides is None else "specs/base.attn")
        spec = small(ir.load(path, overrides or []))
        model = lower(spec).double().eval()
        from attncomp.passes import optimise

        yield name, spec, optimise(model)


@pytest.mark.parametrize("name, spec, model", list(_models()), ids=lambda x: x if isinstance(x, str) else "")
def test_cached_decoding_equals_uncached(name, spec, model):
    src, _ = batch(spec, b=3, s=6)
    src[:, -1] = EOS
    src[src == 0] = 9  # equal lengths (a decoder-only batch has equal prompt lengths)
    cached = beam_search(CachedStepper(model, src), 3, [8, 8, 8], beam=3, alpha=0.6, nbest=3)
    full = beam_search(FullStepper(model, src), 3, [8, 8, 8], beam=3, alpha=0.6, nbest=3)
    for a, b in zip(cached, full):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert all(abs(x.score - y.score) < 1e-6 for x, y in zip(a, b))


def test_beam_one_is_greedy():
    spec = small(ir.load(ROOT / "specs/base.attn"))
    model = lower(spec).double().eval()
    src, _ = batch(spec, b=2, s=7)
    (h0,), (h1,) = beam_search(CachedStepper(model, src), 2, [6, 6], beam=1, alpha=0.6)
    for row, hyp in enumerate((h0, h1)):
        prefix = torch.tensor([[BOS]])
        tokens = []
        for _ in range(5):  # greedy by hand with the full forward pass; the 6th token is a forced </s>
            logits = model(src[row : row + 1], prefix)[0, -1]
            logits[[0, 2, 4]] = -math.inf  # never <pad>, <s>, <sep>
            token = int(logits.argmax())
            if token == EOS:
                break
            tokens.append(token)
            prefix = torch.cat([prefix, torch.tensor([[token]])], 1)
        assert hyp.tokens == tokens
