"""bench/padding.py: padding of the runner's updates for each sort order."""

from __future__ import annotations

import numpy as np

from attncomp.data.batching import SORT_ORDERS, Batcher
from bench import padding


def test_padding_by_sort_order_on_the_sample_corpus(sample_data, capsys):
    results = padding.main([str(sample_data), "--tokens", "2000"])
    assert set(results) == set(SORT_ORDERS)
    assert all(0.0 <= pad < 1.0 and 0.0 <= dense <= 1.0 for pad, dense in results.values())
    assert results["longer"][0] <= results["target"][0]  # the runner's order pads least of these
    assert "| longer |" in capsys.readouterr().out


def test_padding_fraction_by_hand():
    src, tgt = np.array([2, 4, 3, 3]), np.array([1, 1, 2, 2])
    pad, dense = padding.padding(src, tgt, [np.array([0, 1]), np.array([2, 3])])
    # update 1: src 2+4 of 8, tgt 1+1 of 2; update 2: src 6 of 6, tgt 4 of 4 -> 18 real of 20
    assert abs(pad - 0.1) < 1e-12 and dense == 0.5


def test_every_sort_order_covers_each_sentence_once():
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 50, 500), rng.integers(1, 50, 500)
    for sort in SORT_ORDERS:
        updates = Batcher(src, tgt, 600, 1, 1, 1 << 20, sort=sort).epoch(0)
        assert sorted(np.concatenate(updates).tolist()) == list(range(500)), sort
