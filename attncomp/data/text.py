"""Reading parallel text: PREFIX.LANG files (plain or .gz) or one TSV file, with located errors."""

from __future__ import annotations

import gzip
import hashlib
import zlib
from pathlib import Path
from typing import Iterator

from attncomp.errors import DataError


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


def _is_tsv(source: str | Path) -> bool:
    name = str(source)
    return name.endswith(".tsv") or name.endswith(".tsv.gz")


def input_files(source: str | Path, src_lang: str, tgt_lang: str) -> list[Path]:
    if _is_tsv(source):
        try:
            if not Path(source).is_file():
                raise DataError(f"{source} is not a regular file" if Path(source).exists() else
                                f"no such file: {source}")
        except (OSError, ValueError) as err:
            raise _stat_error(source, err) from None
        return [Path(source)]
    return [side_path(source, src_lang), side_path(source, tgt_lang)]


def read_parallel(source: str | Path, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """Sentence pairs from PREFIX.{src,tgt}[.gz] or a two-column TSV file."""
    files = input_files(source, src_lang, tgt_lang)
    if len(files) == 1:
        pairs = []
        for number, line in enumerate(read_lines(files[0]), 1):
            columns = line.split("\t")
            if len(columns) != 2:
                raise DataError(f"{files[0]}:{number}: expected 2 tab-separated columns, found {len(columns)}")
            pairs.append((columns[0].strip(), columns[1].strip()))
        return pairs
    src = [line.strip() for line in read_lines(files[0])]
    tgt = [line.strip() for line in read_lines(files[1])]
    if len(src) != len(tgt):
        raise DataError(f"{files[0]} has {len(src)} lines but {files[1]} has {len(tgt)}")
    return list(zip(src, tgt))


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_mono(source: str | Path, lang: str) -> list[tuple[str, str]]:
    """Sentences of one language, PREFIX.LANG[.gz], as (text, text) pairs: both sides of a monolingual
    directory hold the same text."""
    if _is_tsv(source):
        raise DataError(f"{source}: one language (--lang) reads PREFIX.{lang} files, not a TSV file")
    return [(line.strip(), line.strip()) for line in read_lines(side_path(source, lang))]
