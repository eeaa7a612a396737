"""The generated corpus: deterministic, reordered, held-out splits disjoint from train."""

from __future__ import annotations

from attncomp.data import sample_corpus


def test_deterministic_for_a_seed():
    assert sample_corpus.generate(7, 50) == sample_corpus.generate(7, 50)
    assert sample_corpus.generate(7, 50) != sample_corpus.generate(8, 50)


def test_adjectives_follow_nouns_and_verbs_go_last():
    src, tgt = "the big dog sees a cat", None
    pairs = dict(sample_corpus.generate(3, 5000))
    for s, t in pairs.items():
        words, out = s.split(), t.split()
        if " and " in s or any(p in words for p in sample_corpus.PREPOSITIONS):
            continue
        verb = next(w for w in words if w in sample_corpus.VERBS)
        assert out[-1] == sample_corpus.VERBS[verb]
        for i, w in enumerate(words[:-1]):
            if w in sample_corpus.ADJECTIVES and words[i + 1] in sample_corpus.NOUNS:
                noun_at = out.index(sample_corpus.NOUNS[words[i + 1]])
                assert sample_corpus.ADJECTIVES[w] in out[noun_at + 1 :]
        src, tgt = s, t
    assert tgt is not None and src != tgt


def test_held_out_splits_are_disjoint_from_train(tmp_path):
    prefixes = sample_corpus.write_corpus(tmp_path, train_pairs=2000, held_out=100, seed=5)
    read = lambda split: list(zip((tmp_path / f"{split}.src").read_text().splitlines(),  # noqa: E731
                                  (tmp_path / f"{split}.tgt").read_text().splitlines()))
    train = set(read("train"))
    assert len(read("valid")) == len(read("test")) == 100
    assert not train & set(read("valid")) and not train & set(read("test"))
    assert set(prefixes) == {"train", "valid", "test"}
