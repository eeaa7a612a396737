"""Updates of tokens, not sentences, that do not depend on the number of workers."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attncomp.data.batching import Batcher, lm_batch, translation_batch
from attncomp.data.dataset import PreparedData, Split
from attncomp.errors import DataError
from attncomp.vocab import BOS, DEFAULT, EOS, IGNORE, PAD, SEP, Specials


def _lengths(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(3, 40, n), rng.integers(3, 40, n)


def test_every_sentence_once_per_epoch_within_the_token_budget():
    src, tgt = _lengths()
    batcher = Batcher(src, tgt, tokens_per_update=600, seed=1, world=1, max_tokens_per_worker=10_000)
    updates = batcher.epoch(0)
    seen = np.concatenate(updates)
    assert sorted(seen.tolist()) == list(range(500))
    assert all(tgt[u].sum() <= 600 + 40 for u in updates)  # a cut never splits a sentence
    assert np.mean([tgt[u].sum() for u in updates]) > 450


@pytest.mark.parametrize("longer", ["source", "target"])
def test_both_sides_of_every_update_stay_under_the_cap(longer):
    # "approximately 25000 source tokens and 25000 target tokens": whichever side is longer fills first
    short, long = _lengths(seed=3)
    long = short + long  # every sentence pair has one side longer than the other
    src, tgt = (long, short) if longer == "source" else (short, long)
    updates = Batcher(src, tgt, tokens_per_update=600, seed=1, world=1, max_tokens_per_worker=10_000).epoch(0)
    assert sorted(np.concatenate(updates).tolist()) == list(range(500))
    assert all(src[u].sum() <= 600 and tgt[u].sum() <= 600 for u in updates)
    filled = src if longer == "source" else tgt
    assert np.mean([filled[u].sum() for u in updates]) > 500  # the longer side fills its updates


def test_updates_are_the_same_for_any_number_of_workers():
    src, tgt = _lengths()
    one = Batcher(src, tgt, 600, seed=1, world=1, max_tokens_per_worker=300)
    four = Batcher(src, tgt, 600, seed=1, world=4, max_tokens_per_worker=600)
    for a, b in zip(one.updates(), four.updates()):
        assert np.concatenate(a.parts).tolist() == np.concatenate(b.parts).tolist()  # split differently
        assert a.target_tokens == b.target_tokens
        assert len(b.parts) % 4 == 0
        if a.epoch == 2:
            break


def test_workers_take_disjoint_shares():
    src, tgt = _lengths()
    update = next(Batcher(src, tgt, 600, seed=1, world=4, max_tokens_per_worker=100).updates())
    shares = [np.concatenate(update.mine(r, 4)) for r in range(4)]
    assert len(update.parts) % 4 == 0 and all(len(s) for s in shares)
    assert sorted(np.concatenate(shares).tolist()) == sorted(np.concatenate(update.parts).tolist())


def test_accumulation_keeps_micro_batches_under_the_worker_budget():
    src, tgt = _lengths()
    batcher = Batcher(src, tgt, 2000, seed=1, world=1, max_tokens_per_worker=256)
    for update in batcher.epoch(0)[:5]:
        for part in batcher.parts(update):
            longest = max(src[part].max(), tgt[part].max()) + 1
            assert longest * len(part) <= 256 + longest


def test_seeded_shuffle_differs_by_epoch_and_seed_and_resumes_in_place():
    src, tgt = _lengths()
    batcher = Batcher(src, tgt, 600, seed=1, world=1, max_tokens_per_worker=10_000)
    assert [u.tolist() for u in batcher.epoch(0)] == [u.tolist() for u in batcher.epoch(0)]
    assert [u.tolist() for u in batcher.epoch(0)] != [u.tolist() for u in batcher.epoch(1)]
    other = Batcher(src, tgt, 600, seed=2, world=1, max_tokens_per_worker=10_000)
    assert [u.tolist() for u in batcher.epoch(0)] != [u.tolist() for u in other.epoch(0)]
    stream = batcher.updates()
    for _ in range(7):
        expected = next(stream)
    resumed = next(batcher.updates(expected.epoch, expected.index))
    assert [p.tolist() for p in resumed.parts] == [p.tolist() for p in expected.parts]


def test_an_update_smaller_than_the_world_leaves_some_shares_empty():
    batcher = Batcher(np.array([3, 4, 5]), np.array([30, 40, 50]), 10, seed=1, world=4, max_tokens_per_worker=100)
    for update in batcher.epoch(0):  # a budget of 10 tokens: one sentence per update
        parts = batcher.parts(update)
        assert len(parts) == 4 and sum(len(p) for p in parts) == 1
    with pytest.raises(ValueError, match="no usable sentences"):
        Batcher(np.array([3]), np.array([3]), 10, 1, 1, 10, keep=np.array([False]))


def test_batches_are_right_padded_and_shifted(sample_data):
    split = PreparedData(sample_data).split("train")
    batch = translation_batch(split, np.array([0, 1, 2]))
    assert (batch["tgt_in"][:, 0] == BOS).all()
    assert batch["tgt_in"].shape == batch["tgt_out"].shape
    n = int((batch["tgt_out"][0] != IGNORE).sum())
    assert batch["tgt_out"][0, n - 1] == EOS and (batch["tgt_in"][0, 1:n] == batch["tgt_out"][0, : n - 1]).all()
    lm = lm_batch(split, np.array([0]))
    seq = lm["tgt_out"][0]
    assert (seq == SEP).sum() == 1 and seq[-1] == EOS and lm["tokens"][0, 0] == BOS


def _one_by_one(rows: list[np.ndarray], fill: int = PAD) -> torch.Tensor:
    """The obvious way: pad each row in turn (what the vectorised collation must equal)."""
    out = torch.full((len(rows), max(len(r) for r in rows)), fill, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.from_numpy(np.asarray(r, dtype=np.int64))
    return out


def test_collation_equals_padding_each_sentence_in_turn(sample_data):
    split = PreparedData(sample_data).split("train")
    rng = np.random.default_rng(0)
    for size in (1, 2, 7, 64):
        indices = rng.choice(len(split), size, replace=False)
        src, tgt = [split.src[i] for i in indices], [split.tgt[i] for i in indices]
        batch = translation_batch(split, indices)
        assert torch.equal(batch["src"], _one_by_one(src))
        assert torch.equal(batch["tgt_out"], _one_by_one(tgt, IGNORE))  # padded targets: no token id
        assert torch.equal(batch["tgt_in"], _one_by_one([np.concatenate(([BOS], t[:-1])) for t in tgt]))
        seqs = [np.concatenate((s[:-1], [SEP], t)) for s, t in zip(src, tgt)]  # source <sep> target </s>
        lm = lm_batch(split, indices)
        assert torch.equal(lm["tgt_out"], _one_by_one(seqs, IGNORE))
        assert torch.equal(lm["tokens"], _one_by_one([np.concatenate(([BOS], q[:-1])) for q in seqs]))
        # a vocabulary of its own ids (BART's: <pad> 1, decoder start </s> 2; GPT-2's: no <pad>, <s> 50)
        bart = Specials(pad=1, unk=3, bos=0, eos=2, sep=None, start=2)
        batch = translation_batch(split, indices, bart)
        assert torch.equal(batch["src"], _one_by_one(src, 1))
        assert torch.equal(batch["tgt_in"], _one_by_one([np.concatenate(([2], t[:-1])) for t in tgt], 1))
        gpt2 = Specials(pad=None, unk=50, bos=50, eos=EOS, sep=7, start=50)  # the data's </s>: <sep> replaces it
        lm = lm_batch(split, indices, gpt2)
        seqs = [np.concatenate((s[:-1], [7], t)) for s, t in zip(src, tgt)]
        assert torch.equal(lm["tgt_out"], _one_by_one(seqs, IGNORE))
        assert torch.equal(lm["tokens"], _one_by_one([np.concatenate(([50], q[:-1])) for q in seqs], 0))


def _side(name: str, rows: list[list[int]]) -> SimpleNamespace:
    """A side as attncomp.data.dataset.Side reads one: the rows' tokens end to end, and their offsets."""
    offsets = np.cumsum([0, *map(len, rows)])
    return SimpleNamespace(name=name, tokens=np.array(sum(rows, []), dtype=np.uint16), offsets=offsets,
                           lengths=np.diff(offsets))


def test_a_source_that_does_not_end_in_eos_is_refused_not_cut():
    """Before: `source <sep> target` overwrote each source's last token with <sep>, </s> or not, so a source
    without </s> (data prepared for another vocabulary, or none declared) silently lost its last word."""
    split = Split(_side("train.src", [[5, 6, EOS], [7, 8, 9]]), _side("train.tgt", [[10, EOS], [11, EOS]]))
    assert lm_batch(split, np.array([0]))["tgt_out"].tolist() == [[5, 6, SEP, 10, EOS]]
    with pytest.raises(DataError, match=rf"^source sentence 1 of train\.src ends in token 9, not the vocabulary's "
                                        rf"</s> \(eos = {EOS}\): a decoder-only model reads a pair as"):
        lm_batch(split, np.array([0, 1]))
    with pytest.raises(DataError, match="but the spec's vocabulary declares no eos"):
        lm_batch(split, np.array([0]), replace(DEFAULT, eos=None))
