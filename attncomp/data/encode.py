"""Encoding chunks of pairs into token arrays, on one core or several, and appending them to disk.

`encode_chunks` keeps at most two chunks per worker in flight and yields the results in the order
of the input, so that the written arrays are the same byte for byte whatever the number of workers,
and memory holds a few chunks, never the corpus. Workers are processes, each with its own
sentencepiece models; with one worker everything runs in this process. They are forked where the
system can (Linux): a spawned worker would import the caller's main module again, and a script that
calls `prepare` without an `if __name__ == "__main__"` guard would then hang.
"""

from __future__ import annotations

import gc
import signal
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Iterator

import numpy as np

from attncomp.data.text import Chunk
from attncomp.data.tokenizer import process_context, tokenizer_of
from attncomp.errors import AttncompError


@dataclass(frozen=True)
class Encoding:
    """What a worker needs: the models, the token dtype, and the length filter (training pairs only)."""

    src_model: bytes
    tgt_model: bytes
    dtype: str
    same_text: bool = False  # one language: the target is the source
    max_len: int | None = None  # None: keep every pair (valid and test splits)
    max_ratio: float = 9.0


@dataclass
class Encoded:
    """One chunk's kept pairs: each side's token ids (every sentence ending in </s>) and lengths."""

    src_ids: np.ndarray
    src_lengths: np.ndarray
    tgt_ids: np.ndarray
    tgt_lengths: np.ndarray
    dropped: int


class ChunkEncoder:
    """Turns one chunk of text pairs into token arrays, dropping the training pairs the length filter refuses."""

    def __init__(self, encoding: Encoding):
        self.encoding = encoding
        self.src = tokenizer_of(encoding.src_model)
        self.tgt = self.src if encoding.tgt_model == encoding.src_model else tokenizer_of(encoding.tgt_model)

    def __call__(self, chunk: Chunk) -> Encoded:
        src = self.src.encode_source(chunk[0])
        tgt = src if self.encoding.same_text else self.tgt.encode_with_eos(chunk[1])
        src_lengths, tgt_lengths = _lengths(src), _lengths(tgt)
        keep = self._keep(src_lengths, tgt_lengths)
        if not keep.all():
            src, tgt = [src[i] for i in np.flatnonzero(keep)], [tgt[i] for i in np.flatnonzero(keep)]
            src_lengths, tgt_lengths = src_lengths[keep], tgt_lengths[keep]
        src_ids = self._flat(src, src_lengths)
        tgt_ids = src_ids if self.encoding.same_text else self._flat(tgt, tgt_lengths)
        return Encoded(src_ids, src_lengths, tgt_ids, tgt_lengths, int((~keep).sum()))

    def _keep(self, src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
        """Training pairs with a side longer than max_len (</s> included), an empty side, or lengths that
        differ by more than max_ratio are dropped."""
        if self.encoding.max_len is None:
            return np.ones(len(src), dtype=bool)
        longer, shorter = np.maximum(src, tgt), np.minimum(src, tgt)
        return (longer <= self.encoding.max_len) & (longer <= self.encoding.max_ratio * shorter) & (shorter > 1)

    def _flat(self, ids: list[list[int]], lengths: np.ndarray) -> np.ndarray:
        return np.fromiter(chain.from_iterable(ids), dtype=self.encoding.dtype, count=int(lengths.sum()))


def _lengths(ids: list[list[int]]) -> np.ndarray:
    return np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))


_worker: ChunkEncoder | None = None


def _start_worker(encoding: Encoding) -> None:
    global _worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent stops the pool
    _worker = ChunkEncoder(encoding)


def _encode_in_worker(chunk: Chunk) -> Encoded:
    return _worker(chunk)


def encode_chunks(chunks: Iterator[Chunk], encoding: Encoding, workers: int) -> Iterator[Encoded]:
    """The chunks encoded, in order, by `workers` processes (this one alone when 1)."""
    if workers == 1:
        encoder = ChunkEncoder(encoding)
        yield from map(encoder, chunks)
        return
    # a forked worker's garbage collector would otherwise touch every object inherited from this
    # process (torch's modules, in the command line), copying their pages into its own memory
    gc.freeze()
    pool = ProcessPoolExecutor(workers, mp_context=process_context(),
                               initializer=_start_worker, initargs=(encoding,))
    pending: deque = deque()
    try:
        for chunk in chunks:
            pending.append(pool.submit(_encode_in_worker, chunk))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool:
        raise AttncompError("an encoding worker died (out of memory?); try fewer --workers") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        gc.unfreeze()


class SideWriter:
    """Appends sentences to NAME.bin (token ids) and NAME.idx (int64 offsets, starting with 0) as they come."""

    def __init__(self, directory: Path, name: str):
        self.bin = open(directory / f"{name}.bin", "wb")
        self.idx = open(directory / f"{name}.idx", "wb")
        np.zeros(1, dtype=np.int64).tofile(self.idx)
        self.tokens = self.sentences = 0

    def write(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        ids.tofile(self.bin)
        (self.tokens + np.cumsum(lengths)).tofile(self.idx)
        self.tokens += int(lengths.sum())
        self.sentences += len(lengths)

    def close(self) -> None:
        self.bin.close()
        self.idx.close()
