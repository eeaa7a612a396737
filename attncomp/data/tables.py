"""JSONL and Parquet sources: two named fields (columns) a row; a dotted name reaches into nested objects.

Hugging Face's WMT datasets store a pair as `{"translation": {"de": ..., "en": ...}}`: read them with
`--src-column translation.en --tgt-column translation.de`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from attncomp.data.text import MAX_LINE_BYTES, Chunk, read_lines
from attncomp.errors import DataError
from attncomp.files import parse_json
from attncomp.native import native

COLUMN_HINT = "name the fields with --src-column and --tgt-column"


def _text(row, name: str, path: Path, number: int) -> str:
    value = row
    for key in name.split("."):
        if not isinstance(value, dict) or key not in value:
            raise DataError(f"{path}:{number}: no field {name!r} ({COLUMN_HINT})")
        value = value[key]
    if not isinstance(value, str):
        raise DataError(f"{path}:{number}: field {name!r} is {type(value).__name__}, not text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:  # JSON's "\ud800": a lone surrogate, which no UTF-8 text holds
        raise DataError(f"{path}:{number}: field {name!r} holds a lone surrogate (U+{ord(value[err.start]):04X} at "
                        f"character {err.start + 1}); this is not UTF-8 text") from None
    return value.strip()


def jsonl_pairs(path: Path, columns: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """(source, target) of every object in a JSONL file; blank lines are skipped."""
    for number, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        row = parse_json(line, f"{path}:{number}", DataError)
        yield _text(row, columns[0], path, number), _text(row, columns[1], path, number)


def _parquet():
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError("reading Parquet needs pyarrow: pip install 'attncomp[parquet]'") from None
    return pa, pc, pq


def _open_parquet(path: Path):
    _, _, pq = _parquet()
    with native(f"{path}: not a readable Parquet file"):  # pyarrow's ArrowException, OSError
        return pq.ParquetFile(path)


def _check_column(schema, name: str, path: Path) -> None:
    """The column (or nested field) exists and holds text."""
    pa, _, _ = _parquet()
    top, *rest = name.split(".")
    if top not in schema.names:
        raise DataError(f"{path} has no column {top!r} (it has {', '.join(schema.names)}; {COLUMN_HINT})")
    kind = schema.field(top).type
    for key in rest:
        if not pa.types.is_struct(kind) or kind.get_field_index(key) < 0:
            raise DataError(f"{path}: column {name!r} does not exist ({COLUMN_HINT})")
        kind = kind.field(key).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise DataError(f"{path}: column {name!r} holds {kind}, not text")


def parquet_rows(path: Path, columns: tuple[str, str]) -> int:
    """The number of rows, from the file's metadata, after checking that both columns hold text."""
    table = _open_parquet(path)
    for name in columns:
        _check_column(table.schema_arrow, name, path)
    return table.metadata.num_rows


def parquet_chunks(path: Path, columns: tuple[str, str], size: int) -> Iterator[Chunk]:
    pa, pc, _ = _parquet()
    table = _open_parquet(path)
    for name in columns:
        _check_column(table.schema_arrow, name, path)
    row = 0
    try:
        for batch in table.iter_batches(batch_size=size, columns=sorted({c.split(".")[0] for c in columns})):
            sides = []
            for name in columns:
                top, *rest = name.split(".")
                values = (pc.struct_field(batch.column(top), rest) if rest else batch.column(top)).to_pylist()
                if None in values:
                    raise DataError(f"{path}: row {row + values.index(None) + 1}: column {name!r} is null, not text")
                long = next((i for i, value in enumerate(values) if len(value) > MAX_LINE_BYTES), None)
                if long is not None:
                    raise DataError(f"{path}: row {row + long + 1}: column {name!r} holds more than "
                                    f"{MAX_LINE_BYTES:,} characters; a sentence must be shorter")
                sides.append([value.strip() for value in values])
            row += batch.num_rows
            yield sides[0], sides[1]
    except (pa.ArrowException, OSError) as err:
        raise DataError(f"{path}: cannot read row {row + 1} and on ({str(err).splitlines()[0]})") from None
