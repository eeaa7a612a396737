"""Reading parallel text as a stream of chunks, with located errors.

A source is one of:

- PREFIX, naming PREFIX.SRC and PREFIX.TGT (each plain or .gz), line i of one translating line i of the other;
- a two-column TSV file (.tsv or .tsv.gz);
- a JSONL file (.jsonl or .jsonl.gz), one JSON object a line, the two texts in named fields;
- a Parquet file (.parquet), the two texts in named columns (needs pyarrow: `pip install attncomp[parquet]`).

A field or column name may be a dotted path into nested objects (`translation.en`, as Hugging Face's WMT
datasets store pairs). Every source yields its pairs in chunks of at most `size` pairs, so that nothing
holds a whole corpus; `count` checks the whole source (bad bytes, differing line counts, missing fields)
before anything long starts.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from itertools import islice
from pathlib import Path
from typing import Iterator

from attncomp.errors import DataError

Chunk = tuple[list[str], list[str]]  # (source sentences, target sentences), the same length


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_lines(path: Path) -> Iterator[str]:
    """Lines of a UTF-8 text file (.gz too), without their newline; bad bytes are a located error."""
    try:
        with _open(path) as f:
            for number, raw in enumerate(f, 1):
                if b"\0" in raw:
                    column = raw.index(b"\0") + 1
                    raise DataError(f"{path}:{number}: a NUL byte at column {column}; "
                                    "this is binary data, not text")
                try:
                    yield raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as err:
                    raise DataError(f"{path}:{number}: not UTF-8 text (byte 0x{raw[err.start]:02x} at column "
                                    f"{err.start + 1})") from None
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"cannot read {path}: {err}") from None


def _stat_error(path: str | Path, err: Exception) -> DataError:
    text = str(path) if len(str(path)) <= 120 else f"{str(path)[:60]}...{str(path)[-40:]}"
    return DataError(f"cannot use {text!r}: {getattr(err, 'strerror', None) or err}")


def side_path(prefix: str | Path, lang: str) -> Path:
    """PREFIX.LANG or PREFIX.LANG.gz, whichever exists."""
    if "\0" in str(prefix):
        raise DataError(f"a path cannot contain NUL: {str(prefix)!r}")
    try:
        return _side_path(prefix, lang)
    except (OSError, ValueError) as err:  # a name too long, a NUL byte
        raise _stat_error(f"{prefix}.{lang}", err) from None


def _side_path(prefix: str | Path, lang: str) -> Path:
    base = Path(f"{prefix}.{lang}")
    for candidate in (base, Path(f"{base}.gz")):
        if candidate.is_file():
            return candidate
    for candidate in (base, Path(f"{base}.gz")):
        if candidate.exists():
            raise DataError(f"{candidate} is {'a directory' if candidate.is_dir() else 'not a regular file'}, "
                            "not a text file")
    raise DataError(f"no {base} or {base}.gz (a --train/--valid/--test PREFIX names PREFIX.{lang} files)")


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
            raise DataError(f"{source} is not a regular file" if Path(source).exists() else f"no such file: {source}")
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
            from attncomp.data.tables import parquet_rows

            return parquet_rows(self.files[0], self.columns)
        if self.kind == "prefix" and not self.mono:
            counts = [sum(1 for _ in read_lines(path)) for path in self.files]
            if counts[0] != counts[1]:
                raise DataError(f"{self.files[0]} has {counts[0]} lines but {self.files[1]} has {counts[1]}")
            return counts[0]
        return sum(len(chunk[0]) for chunk in self.chunks(10_000))

    def chunks(self, size: int) -> Iterator[Chunk]:
        """The pairs, stripped of surrounding white space, `size` at a time."""
        if self.kind == "prefix":
            if self.mono:
                lines = (line.strip() for line in read_lines(self.files[0]))
                return _chunked(((line, line) for line in lines), size)
            return _chunked(self._side_pairs(), size)
        if self.kind == "tsv":
            return _chunked(self._tsv_pairs(), size)
        from attncomp.data.tables import jsonl_pairs, parquet_chunks

        if self.kind == "jsonl":
            return _chunked(jsonl_pairs(self.files[0], self.columns), size)
        return parquet_chunks(self.files[0], self.columns, size)

    def _side_pairs(self) -> Iterator[tuple[str, str]]:
        src, tgt = (read_lines(path) for path in self.files)
        number = 0
        for number, (s, t) in enumerate(zip(src, tgt), 1):
            yield s.strip(), t.strip()
        for path, rest in ((self.files[0], src), (self.files[1], tgt)):
            if next(rest, None) is not None:  # checked by count() first; here for any caller that did not
                raise DataError(f"{path} has more lines than the other side ({number} + more)")

    def _tsv_pairs(self) -> Iterator[tuple[str, str]]:
        for number, line in enumerate(read_lines(self.files[0]), 1):
            columns = line.split("\t")
            if len(columns) != 2:
                raise DataError(f"{self.files[0]}:{number}: expected 2 tab-separated columns, found {len(columns)}")
            yield columns[0].strip(), columns[1].strip()


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror}") from None
    return digest.hexdigest()
