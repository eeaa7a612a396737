"""A split's inputs: text file pairs PREFIX.SRC / PREFIX.TGT (plain or gzipped), a TSV file, or a JSONL
or Parquet file with named fields (attncomp.data.tables), each read `size` pairs at a time."""

from __future__ import annotations

from itertools import islice, zip_longest
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from attncomp.data.tables import jsonl_pairs, parquet_chunks, parquet_rows
from attncomp.data.text import NOT_REGULAR, Chunk, _stat_error, count_lines, raw_chunks, read_chunks, side_path
from attncomp.errors import DataError, printable


def _kind(source: str | Path) -> str:
    name = str(source)
    for kind, suffixes in (("tsv", (".tsv", ".tsv.gz")), ("jsonl", (".jsonl", ".jsonl.gz")),
                           ("parquet", (".parquet",))):
        if name.endswith(suffixes):
            return kind
    return "prefix"


def _one_file(source: str | Path) -> Path:
    if "\0" in str(source):
        raise DataError(f"a path cannot contain NUL: {str(source)!r}")
    try:
        if not Path(source).is_file():
            raise DataError(f"{printable(str(source))} {NOT_REGULAR}" if Path(source).exists()
                            else f"no such file: {printable(str(source))}")
    except (OSError, ValueError) as err:
        raise _stat_error(source, err) from None
    return Path(source)


def _chunked(pairs: Iterator[tuple[str, str]], size: int) -> Iterator[Chunk]:
    while block := list(islice(pairs, size)):
        yield [p[0] for p in block], [p[1] for p in block]


class Source:
    """One input of a split; see the module docstring for the kinds."""

    def __init__(self, source: str | Path, langs: tuple[str, str], columns: tuple[str, str], mono: bool = False):
        """`langs`: the suffixes of PREFIX files; `columns`: the fields of JSONL and Parquet rows."""
        self.name, self.kind, self.mono = str(source), _kind(source), mono
        self.columns = (columns[0], columns[0]) if mono else columns
        if mono and self.kind == "tsv":
            raise DataError(f"{source}: one language (--lang) reads PREFIX.{langs[0]}, JSONL or Parquet, "
                            "not a TSV file")
        if self.kind == "prefix":
            self.files = [side_path(source, lang) for lang in (langs[:1] if mono else langs)]
        else:
            self.files = [_one_file(source)]

    def count(self) -> int:
        """The number of pairs, after reading everything once (so that bad input fails here, early)."""
        if self.kind == "parquet":
            return parquet_rows(self.files[0], self.columns)
        if self.kind == "prefix" and not self.mono:
            counts = [count_lines(path) for path in self.files]
            if counts[0] != counts[1]:
                raise DataError(f"{self.files[0]} has {counts[0]} lines but {self.files[1]} has {counts[1]}")
            return counts[0]
        if self.kind == "prefix":
            return count_lines(self.files[0])
        return sum(len(chunk[0]) for chunk in self.chunks(10_000))

    def chunks(self, size: int) -> Iterator[Chunk]:
        """The pairs, stripped of surrounding white space, `size` at a time."""
        if self.kind == "prefix":
            if self.mono:
                return ((lines, lines) for lines in read_chunks(self.files[0], size))
            return self._side_chunks(size)
        if self.kind == "tsv":
            return self._tsv_chunks(size)
        if self.kind == "jsonl":
            return _chunked(jsonl_pairs(self.files[0], self.columns), size)
        return parquet_chunks(self.files[0], self.columns, size)

    def picked(self, size: int, choose: Callable[[int], np.ndarray]) -> Iterator[Chunk]:
        """The pairs `choose` keeps, read `size` at a time: `choose(n)` is a boolean mask over the next n pairs.
        The same pairs as `chunks` gives, stripped alike; a text file decodes only the lines kept (a sample
        of the training text reads all of it, and keeps a fraction)."""
        if self.kind != "prefix":
            for src, tgt in self.chunks(size):
                kept = np.flatnonzero(choose(len(src)))
                yield [src[i] for i in kept], [tgt[i] for i in kept]
            return
        sides = zip_longest(*(raw_chunks(path, size) for path in self.files), fillvalue=[])
        for raw in sides:
            kept = np.flatnonzero(choose(len(raw[0])))
            lines = [[side[i].decode("utf-8").strip() for i in kept] for side in raw]
            yield (lines[0], lines[0]) if self.mono else (lines[0], lines[1])

    def _side_chunks(self, size: int) -> Iterator[Chunk]:
        sides = (read_chunks(path, size) for path in self.files)
        for src, tgt in zip_longest(*sides, fillvalue=[]):
            if len(src) != len(tgt):  # count() says how many each has; this is for a caller that did not ask
                raise DataError(f"{self.files[0]} and {self.files[1]} have different numbers of lines")
            yield src, tgt

    def _tsv_chunks(self, size: int) -> Iterator[Chunk]:
        number = 0
        for lines in read_chunks(self.files[0], size, strip=False):
            src, tgt = [], []
            for number, line in enumerate(lines, number + 1):
                columns = line.split("\t")
                if len(columns) != 2:
                    raise DataError(f"{self.files[0]}:{number}: expected 2 tab-separated columns, "
                                    f"found {len(columns)}")
                src.append(columns[0].strip())
                tgt.append(columns[1].strip())
            yield src, tgt
