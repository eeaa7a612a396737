"""Stage 1: spec text -> syntax tree, with `extends` chains followed."""

from attncomp.syntax.load import load_flat, load_path, load_text
from attncomp.syntax.parse import parse, parse_override

__all__ = ["load_flat", "load_path", "load_text", "parse", "parse_override"]
