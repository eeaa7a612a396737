"""Reading text files as a stream of chunks, with located errors; the sources they make up are
attncomp.data.sources. A source is one of:

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

import glob
import gzip
import hashlib
import zlib
from itertools import islice
from pathlib import Path
from typing import Iterable, Iterator

from attncomp.errors import DataError, printable

Chunk = tuple[list[str], list[str]]  # (source sentences, target sentences), the same length
# a corpus is read more than once (counted and checked, sampled for sentencepiece, encoded): a stream cannot be
NOT_REGULAR = ("is not a regular file (a pipe or a device): data prepare reads a corpus more than once (to count, "
               "sample and encode it), so write the stream to a file first")
MAX_LINE_BYTES = 1 << 20  # a line (a sentence, a pair, a JSONL row) longer than this is refused, with its number


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _bounded(path: Path, f) -> Iterator[bytes]:
    """The lines of an open binary file, each read with at most MAX_LINE_BYTES + 1 bytes in memory: a longer one
    is a located error (one 100 MB line took 6 GB in sentencepiece's encoding, and bad_alloc under a limit)."""
    number = 0
    while line := f.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(line) > MAX_LINE_BYTES:
            raise DataError(f"{printable(str(path))}:{number}: a line of more than {MAX_LINE_BYTES:,} bytes; a "
                            "sentence, pair or row must be shorter: split or remove it")
        yield line


def read_lines(path: Path) -> Iterator[str]:
    """Lines of a UTF-8 text file (.gz too), without their newline; bad bytes are a located error."""
    try:
        with _open(path) as f:
            yield from read_lines_of(path, _bounded(path, f))
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"cannot read {path}: {err}") from None


def _decoded_chunks(path: Path, size: int) -> Iterator[tuple[int, str]]:
    """(number of lines, their text) of a UTF-8 text file (.gz too), `size` lines at a time, with
    read_lines's located errors: decoded a chunk at a time, several times faster than line by line."""
    number = 0  # lines before this chunk
    try:
        with _open(path) as f:
            lines = _bounded(path, f)
            while raw := list(islice(lines, size)):
                data = b"".join(raw)
                try:
                    if b"\0" in data:
                        raise ValueError
                    text = data.decode("utf-8")
                except ValueError:  # UnicodeDecodeError too: find the line, and say where
                    list(read_lines_of(path, raw, number))
                    raise
                yield len(raw), text
                number += len(raw)
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"cannot read {path}: {err}") from None


def count_lines(path: Path) -> int:
    """The lines of a text file, all checked as read_lines checks them."""
    return sum(lines for lines, _ in _decoded_chunks(path, 10_000))


def read_chunks(path: Path, size: int, strip: bool = True) -> Iterator[list[str]]:
    """The lines of a UTF-8 text file (.gz too), `size` at a time, stripped of surrounding white space (or,
    with `strip` False, of a final carriage return only); the same lines and errors as read_lines."""
    for count, text in _decoded_chunks(path, size):
        lines = text.split("\n")[:count]
        yield [line.strip() for line in lines] if strip else [line.rstrip("\r") for line in lines]


def raw_chunks(path: Path, size: int) -> Iterator[list[bytes]]:
    """The lines of a text file (.gz too) as bytes, newline included, `size` at a time, unchecked: for a
    second pass over a file that count_lines has checked, which decodes only the lines it keeps."""
    try:
        with _open(path) as f:
            lines = _bounded(path, f)
            while raw := list(islice(lines, size)):
                yield raw
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"cannot read {path}: {err}") from None


def read_lines_of(path: Path, raw: Iterable[bytes], before: int = 0) -> Iterator[str]:
    """Decoded lines of `raw`, numbered from `before` + 1 in errors."""
    for number, line in enumerate(raw, before + 1):
        if b"\0" in line:
            column = line.index(b"\0") + 1
            raise DataError(f"{path}:{number}: a NUL byte at column {column}; this is binary data, not text")
        try:
            yield line.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as err:
            raise DataError(f"{path}:{number}: not UTF-8 text (byte 0x{line[err.start]:02x} at column "
                            f"{err.start + 1})") from None


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
            raise DataError(f"{printable(str(candidate))} is a directory, not a text file" if candidate.is_dir()
                            else f"{printable(str(candidate))} {NOT_REGULAR}")
    raise DataError(f"no {base} or {base}.gz (a --train/--valid/--test PREFIX names PREFIX.{lang} files)"
                    f"{_what_was_meant(Path(prefix))}")


def _what_was_meant(prefix: Path) -> str:
    """'; ...' for the usual slips: one side's file given as the prefix (`--train train.en`, as a Trainer's
    --train_file), or files whose suffixes are not --src/--tgt's (the sample corpus's src and tgt by default)."""
    stem = prefix.with_suffix("") if prefix.suffix == ".gz" else prefix
    if stem.suffix and prefix.is_file():
        return (f"; {prefix.name} is one side's file: give the prefix without {stem.suffix}, "
                "and --src/--tgt its suffixes")
    try:
        suffixes = sorted({p.name[len(prefix.name) + 1:].removesuffix(".gz")
                           for p in prefix.parent.glob(f"{glob.escape(prefix.name)}.*") if p.is_file()})
    except OSError:
        return ""
    shown = ",".join(suffixes[:6]) + (",..." if len(suffixes) > 6 else "")
    return f"; there are {prefix.name}.{{{shown}}}: name the suffixes with --src and --tgt (or --lang)" if suffixes else ""


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror}") from None
    return digest.hexdigest()
