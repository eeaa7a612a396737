"""Follow `extends` chains: a spec file -> the list of files it is made of, base first.

Paths in `extends` are relative to the file that names them. A missing file, a directory, a cycle
or an absurdly long chain is an error located at the `extends` line that caused it.
"""

from __future__ import annotations

import os
from pathlib import Path

from attncomp.errors import Span, SpecError
from attncomp.syntax import ast
from attncomp.syntax.parse import decode_source, parse

MAX_CHAIN = 32
MAX_BYTES = 1 << 20  # a spec is a few lines; a megabyte is certainly the wrong file


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def read_spec_file(path: Path, span: Span | None = None) -> str:
    """The text of a spec file, or a located error saying why it cannot be read."""
    shown = _display(path)
    if not path.exists():
        raise SpecError(f"no such spec file: {shown}", span)
    if path.is_dir():
        raise SpecError(f"{shown} is a directory, not a spec file", span)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise SpecError(f"{shown} is {size} bytes; a spec is expected to be small text", span)
        data = path.read_bytes()
    except OSError as err:
        raise SpecError(f"cannot read {shown}: {err.strerror}", span) from None
    return decode_source(data, shown)


def load_chain(top: ast.File, top_file: Path | None, directory: Path | None) -> list[ast.File]:
    """`top` and every file it extends, base first."""
    chain = [top]
    seen: list[Path] = [top_file.resolve()] if top_file is not None else []
    current = top
    while current.extends is not None:
        ext = current.extends
        if directory is None:
            directory = Path.cwd()
        target = (directory / ext.path).resolve()
        if target in seen:
            names = " -> ".join(_display(p) for p in [*seen, target])
            raise SpecError(f"extends cycle: {names}", ext.span)
        if len(chain) >= MAX_CHAIN:
            raise SpecError(f"extends chain longer than {MAX_CHAIN} files", ext.span)
        seen.append(target)
        text = read_spec_file(target, ext.span)
        current = parse(text, _display(target))
        directory = target.parent
        chain.append(current)
    return list(reversed(chain))


def load_path(path: str | os.PathLike) -> list[ast.File]:
    """Parse a spec file and everything it extends, base first."""
    p = Path(path)
    text = read_spec_file(p)
    top = parse(text, _display(p))
    return load_chain(top, p, p.resolve().parent)


def load_flat(text: str, path: str) -> list[ast.File]:
    """Parse spec text that must stand alone (a checkpoint's canonical spec): `extends` is an error, so
    loading it never reads another file."""
    top = parse(text, path)
    if top.extends is not None:
        raise SpecError("a stored spec must be flat (canonical text), but it names `extends`; "
                        "it was not written by attncomp", top.extends.span)
    return [top]


def load_text(text: str, path: str = "<string>", directory: str | os.PathLike | None = None) -> list[ast.File]:
    """Parse spec text (its `extends` relative to `directory`, default the working directory)."""
    top = parse(text, path)
    return load_chain(top, None, Path(directory) if directory is not None else None)
