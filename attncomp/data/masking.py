"""BERT's masked-language-model corruption (Devlin et al. 2019, section 3.1 and appendix A.1).

Of a sentence's non-special tokens, each is chosen with probability `rate` (15%); a chosen token is
replaced by <mask> with probability `mask` (80%), by a random non-special token with probability
`random` (10%), and kept otherwise (10%). The loss reads the chosen positions only: the target is
the original token there and <pad> (ignored) everywhere else.

The special tokens are the ones the spec's vocabulary declares (attncomp.vocab.Specials.ids): they are
never chosen nor drawn as random replacements. The mask token is its `mask`; attncomp's own vocabularies
have five special tokens, <pad> <unk> <s> </s> <sep>, and a sixth would shift every piece id of every
prepared directory and checkpoint. An encoder-only model reads `text </s>` and never sees <sep>, which only
joins source and target for a decoder-only model, so their masked-LM uses <sep>'s id as <mask> (the
vocabulary's default `mask`); an imported BERT declares its own [MASK].

The draws are a hash of (seed, sentence index, position), not a random stream: a sentence is
corrupted the same way whatever batch, worker or resumed run reads it (BERT's static masking), and
validation loss is comparable from one evaluation to the next.
"""

from __future__ import annotations

import numpy as np

from attncomp.vocab import DEFAULT, IGNORE, Specials

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: uint64 -> well-mixed uint64 (arithmetic wraps)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def uniforms(seed: int, sentences: np.ndarray, positions: np.ndarray, stream: int) -> np.ndarray:
    """Uniform [0, 1) draws, one per (sentence, position) pair (broadcast), a function of the seed."""
    with np.errstate(over="ignore"):
        key = (np.uint64(seed) * _GOLDEN + np.uint64(stream)) ^ _mix(sentences.astype(np.uint64) * _GOLDEN)
        x = _mix(key + _mix(positions.astype(np.uint64) + _GOLDEN))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53


def ordinary(tokens: np.ndarray, specials: Specials = DEFAULT) -> np.ndarray:
    """Which of `tokens` are not special (the ones masked-LM may choose)."""
    return np.isin(tokens, specials.ids(), invert=True)


def draw(u: np.ndarray, vocab: int, specials: Specials = DEFAULT) -> np.ndarray:
    """Uniform [0, 1) -> a non-special id of a vocabulary of `vocab`: the k-th of them is k plus the number
    of special ids s_i (sorted, i from 0) with s_i - i <= k (attncomp's: k + 5)."""
    special = np.asarray([t for t in specials.ids() if t < vocab], dtype=np.int64)
    k = (u * (vocab - len(special))).astype(np.int64)
    return k + np.searchsorted(special - np.arange(len(special)), k, side="right")


def chosen(seed: int, rate: float, sentences: np.ndarray, tokens: np.ndarray, specials: Specials = DEFAULT
           ) -> np.ndarray:
    """Which positions of `tokens` (B, T; row i is sentence `sentences[i]`) the loss reads."""
    cols = np.arange(tokens.shape[1])[None, :]
    return ordinary(tokens, specials) & (uniforms(seed, sentences[:, None], cols, 0) < rate)


def corrupt(seed: int, rate: float, mask: float, random: float, vocab: int, sentences: np.ndarray,
            tokens: np.ndarray, specials: Specials = DEFAULT) -> tuple[np.ndarray, np.ndarray]:
    """(the model's input, the targets: the original token where chosen, else IGNORE)."""
    cols = np.arange(tokens.shape[1])[None, :]
    rows = sentences[:, None]
    picked = chosen(seed, rate, sentences, tokens, specials)
    how = uniforms(seed, rows, cols, 1)
    replacement = draw(uniforms(seed, rows, cols, 2), vocab, specials)
    inputs = np.where(picked & (how < mask), specials.mask, tokens)
    inputs = np.where(picked & (how >= mask) & (how < mask + random), replacement, inputs)
    return inputs, np.where(picked, tokens, IGNORE)


def chosen_counts(seed: int, rate: float, side, chunk: int = 1 << 16, after: np.ndarray | None = None,
                  specials: Specials = DEFAULT) -> np.ndarray:
    """How many positions of each sentence of a data side the loss reads (the batcher's target tokens);
    `after` (per sentence): the side's tokens sit at positions after that many others (a pair's second
    sentence)."""
    lengths = side.lengths
    counts = np.zeros(len(lengths), dtype=np.int64)
    for start in range(0, len(lengths), chunk):
        idx = np.arange(start, min(start + chunk, len(lengths)))
        first, n = side.offsets[idx], lengths[idx]
        sentence = np.repeat(idx, n)
        position = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        if after is not None:
            position = position + np.repeat(after[idx], n)
        flat = np.asarray(side.tokens[first[0] : first[0] + int(n.sum())], dtype=np.int64)
        hit = ordinary(flat, specials) & (uniforms(seed, sentence, position, 0) < rate)
        counts[idx] = np.bincount(sentence - start, weights=hit, minlength=len(idx)).astype(np.int64)
    return counts
