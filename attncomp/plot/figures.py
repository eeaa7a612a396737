"""Matplotlib, the `plot` extra: imported when a picture is made, or one line saying how to install it;
and a figure written atomically as SVG, PNG or PDF (no date in the file; SVG ids from a salt, text kept as
text, so an SVG drawn again is the same bytes)."""

from __future__ import annotations

import io
import os
from pathlib import Path

from attncomp import files
from attncomp.errors import UsageError
from attncomp.optional import require

FORMATS = ("svg", "png", "pdf")
METADATA = {"svg": {"Date": None, "Creator": None, "Format": None, "Type": None},
            "pdf": {"CreationDate": None, "ModDate": None}, "png": {}}


def available() -> bool:
    """Whether the `plot` extra (matplotlib) is installed."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


SKIPPED = "matplotlib is not installed (pip install 'attncomp[plot]')"


def matplotlib(for_what: str):
    """matplotlib, or a UsageError line naming the extra. Figures are made as matplotlib.figure.Figure, never
    through pyplot: no GUI backend, no global state."""
    return require("matplotlib", for_what, extra="plot")


def new_figure(for_what: str, width: float, height: float):
    """A figure of `width` x `height` inches, not attached to any GUI (matplotlib.figure.Figure)."""
    matplotlib(for_what)
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def image_format(path: str | os.PathLike) -> str:
    """svg, png or pdf, from the file's suffix; another suffix is a usage error."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise UsageError(f"cannot tell the picture's format from {files.shown_path(path)}: "
                         f"name a .svg, .png or .pdf file")
    return suffix


def figure_bytes(figure, fmt: str, salt: str) -> bytes:
    """The figure as SVG, PNG or PDF bytes; `salt` makes its SVG ids (clip paths, markers) its own, so that two
    figures inlined in one page never share an id."""
    mpl = matplotlib("a picture")
    buffer = io.BytesIO()
    with mpl.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none", "pdf.fonttype": 42}):
        figure.savefig(buffer, format=fmt, metadata=METADATA[fmt], bbox_inches="tight", pad_inches=0.1)
    return buffer.getvalue()


def save_figure(figure, path: str | os.PathLike, salt: str) -> None:
    """The figure written to `path` (its suffix the format) atomically."""
    data = figure_bytes(figure, image_format(path), salt)
    files.write_atomically(path, data)
