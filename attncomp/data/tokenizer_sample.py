"""The tokenizer's training sample: a seeded, uniform choice of pairs, made as the text streams by.

Sentencepiece keeps every sentence it trains on in memory; a corpus of 36M pairs would not fit. So
`data prepare` trains it on a sample: `size` sentences (all of them when the text has fewer), chosen
uniformly without replacement for a seed, and written to a file without holding the corpus. The
choice is made chunk by chunk: how many of the remaining picks fall in the next chunk follows the
hypergeometric law, and which ones is a uniform choice inside the chunk, so that every set of `size`
pairs is equally likely, exactly `size` are chosen, and only one chunk's mask is ever in memory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attncomp.data.sources import Source
from attncomp.progress import Progress


class Choice:
    """Choose `size` of `total` items uniformly without replacement, in order, a chunk at a time."""

    def __init__(self, total: int, size: int, seed: int):
        self.rng = np.random.default_rng(seed)
        self.left, self.needed = total, min(size, total)

    def take(self, n: int) -> np.ndarray:
        """The chosen items among the next `n`, as a boolean mask."""
        n = min(n, self.left)
        if self.needed == 0 or n == 0:
            picks = 0
        elif self.needed == self.left:  # every item left is chosen
            picks = n
        elif n == self.left:
            picks = self.needed
        else:
            picks = int(self.rng.hypergeometric(self.needed, self.left - self.needed, n))
        mask = np.zeros(n, dtype=bool)
        mask[self.rng.choice(n, picks, replace=False)] = True
        self.left -= n
        self.needed -= picks
        return mask


def write_sample(sources: list[Source], total: int, pairs: int, files: dict[str, Path], seed: int,
                 chunk: int) -> int:
    """Write the sentences of `pairs` of the `total` pairs in `sources` to `files` ({"src": path, "tgt":
    path}: one file for a shared vocabulary, none for "tgt" with one language); empty sentences are
    left out. Returns the number of sentences written."""
    choice = Choice(total, pairs, seed)
    outputs = {path: open(path, "w", encoding="utf-8") for path in set(files.values())}
    written = 0
    try:
        with Progress(total, "sample for sentencepiece", "pairs", summary=False) as bar:
            def take(n: int) -> np.ndarray:
                bar.update(n)
                return choice.take(n)

            for source in sources:
                for src, tgt in source.picked(chunk, take):
                    for side, lines in (("src", src), ("tgt", tgt)):
                        if side in files:
                            chosen = [line for line in lines if line]
                            outputs[files[side]].writelines(line + "\n" for line in chosen)
                            written += len(chosen)
    finally:
        for output in outputs.values():
            output.close()
    return written
