"""Follow `extends` chains: a spec file -> the list of files it is made of, base first.

Paths in `extends` are relative to the file that names them. A missing file, a directory, a cycle
or an absurdly long chain is an error located at the `extends` line that caused it. A spec may read
only regular files of at most MAX_BYTES bytes (attncomp.files.read_regular): a named pipe, a device
(/dev/zero, /dev/urandom) or a socket is refused before it is read, and the limit holds on the bytes
actually read. A file torch.save wrote (a checkpoint given where its spec was meant) is refused as a checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path

from attncomp import files
from attncomp.errors import Span, SpecError, printable
from attncomp.files import os_reason, shown_path
from attncomp.syntax import ast
from attncomp.syntax.parse import decode_source, parse

MAX_CHAIN = 32
MAX_BYTES = 1 << 20  # a spec is a few lines; a megabyte is certainly the wrong file


def _display(path: Path) -> str:
    return shown_path(path)


def _check_path(path: Path, shown: str, span: Span | None) -> None:
    if "\x00" in str(path):
        raise SpecError(f"the spec path {shown} contains a NUL byte", span)


def read_spec_file(path: Path, span: Span | None = None) -> str:
    """The text of a spec file, or a located error saying why it cannot be read."""
    path = Path(path)
    shown = _display(path)
    _check_path(path, shown, span)
    if path.suffix != ".attn" and not os.path.lexists(path) and os.path.isfile(f"{path}.attn"):
        raise SpecError(f'no such spec file: {shown} (did you mean "{shown}.attn"?)', span)
    try:
        data = files.read_regular(path, limit=MAX_BYTES, what="spec file", error=lambda m: SpecError(m, span))
    except SpecError:
        if _saved_by_torch(_head(path)):  # a checkpoint over MAX_BYTES: say so rather than its size
            raise _checkpoint_error(shown, span) from None
        raise
    if _saved_by_torch(data[:4]):
        raise _checkpoint_error(shown, span)
    return decode_source(data, shown)


def _saved_by_torch(head: bytes) -> bool:
    """Whether a file starts as torch.save writes: a zip archive, or a pickle (the legacy format)."""
    return head.startswith(b"PK\x03\x04") or head.startswith(b"\x80")


def _head(path: Path) -> bytes:
    """The first bytes of a file that was found to be regular (b'' when it cannot be read now; never blocks)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return b""
    try:
        return os.read(fd, 4)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _checkpoint_error(shown: str, span: Span | None) -> SpecError:
    return SpecError(f"{shown} is a checkpoint (a file torch.save wrote), not a spec: `attncomp translate` decodes "
                     f"with it, `attncomp train SPEC --init {shown}` starts a run from its weights", span)


def _resolve(directory: Path, name: str, span: Span) -> Path:
    shown = printable(name)
    if "\x00" in name:
        raise SpecError(f'the extends path "{shown}" contains a NUL byte', span)
    try:
        return (directory / name).resolve()
    except (OSError, RuntimeError) as err:  # ENAMETOOLONG, a symlink loop
        reason = os_reason(err) if isinstance(err, OSError) else "a symbolic link loop"
        raise SpecError(f'cannot resolve the extends path "{shown}": {reason}', span) from None


def load_chain(top: ast.File, top_file: Path | None, directory: Path | None) -> list[ast.File]:
    """`top` and every file it extends, base first."""
    chain = [top]
    seen: list[Path] = [top_file.resolve()] if top_file is not None else []
    current = top
    while current.extends is not None:
        ext = current.extends
        if directory is None:
            directory = Path.cwd()
        target = _resolve(directory, ext.path, ext.span)
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
    try:
        resolved = p.resolve()
    except (OSError, RuntimeError) as err:
        raise SpecError(f"cannot resolve {_display(p)}: {err}") from None
    return load_chain(top, resolved, resolved.parent)


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
