"""Sampling (temperature, top-k, top-p) and streaming translation."""

from __future__ import annotations

import math

import pytest
import torch

from attncomp.decode.sampling import Sampling, filter_logits, sample
from attncomp.vocab import EOS
from tests.decode.test_beam import A, B, C, TableStepper

TABLE = {(): {A: 0.6, B: 0.3, C: 0.1}, (A,): {EOS: 1.0}, (B,): {EOS: 1.0}, (C,): {EOS: 1.0}}


def test_top_k_keeps_the_k_most_likely():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    kept = torch.isfinite(filter_logits(logits, Sampling(top_k=2)))
    assert kept.tolist() == [[False, True, False, True]]


def test_top_p_keeps_the_fewest_tokens_reaching_p():
    logits = torch.tensor([[0.6, 0.3, 0.1]]).log()
    assert torch.isfinite(filter_logits(logits, Sampling(top_p=0.5))).tolist() == [[True, False, False]]
    assert torch.isfinite(filter_logits(logits, Sampling(top_p=0.85))).tolist() == [[True, True, False]]
    assert torch.isfinite(filter_logits(logits, Sampling(top_p=1.0))).all()


def test_samples_follow_the_distribution_and_score_under_the_model():
    hyps = sample(TableStepper(TABLE), 1, [3], count=400, alpha=0.0, sampling=Sampling(seed=1))[0]
    firsts = [h.tokens[0] for h in hyps]
    assert abs(firsts.count(A) / 400 - 0.6) < 0.08 and firsts.count(C) > 0
    assert all(h.logprob == pytest.approx(math.log(TABLE[()][h.tokens[0]])) for h in hyps)
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_top_k_one_is_greedy_and_seeds_repeat():
    greedy = sample(TableStepper(TABLE), 1, [3], count=5, alpha=0.6, sampling=Sampling(top_k=1))[0]
    assert all(h.tokens == [A] for h in greedy)
    first = sample(TableStepper(TABLE), 1, [3], count=20, alpha=0.6, sampling=Sampling(seed=7))[0]
    again = sample(TableStepper(TABLE), 1, [3], count=20, alpha=0.6, sampling=Sampling(seed=7))[0]
    assert [h.tokens for h in first] == [h.tokens for h in again]


def test_end_is_forced_at_the_maximum_length():
    endless = {(): {A: 1.0}, (A,): {A: 1.0}, (A, A): {A: 1.0}}
    hyps = sample(TableStepper(endless), 1, [3], count=2, alpha=0.0, sampling=Sampling())[0]
    assert [h.tokens for h in hyps] == [[A, A], [A, A]]


def test_a_tiny_temperature_keeps_the_best_token():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(2))
    filtered = filter_logits(logits, Sampling(temperature=1e-40, top_p=0.9))
    assert torch.equal(filtered.argmax(-1), logits.argmax(-1))
    assert torch.isfinite(filtered.max(-1).values).all()
    assert torch.equal(torch.multinomial(filtered.softmax(-1), 1).squeeze(-1), logits.argmax(-1))  # was a crash
