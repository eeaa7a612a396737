"""Stage 2: syntax trees -> the typed, verified IR; canonical text, JSON and hash.

`load` imports the parser when called, so the runtime can use the IR's types without it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from attncomp.ir import nodes
from attncomp.ir.canonical import diff, recipe_text, spec_hash, to_json, to_text
from attncomp.ir.nodes import Spec
from attncomp.ir.verify import verify


def looks_like_text(source: str | os.PathLike) -> bool:
    """A spec given inline (has a brace or a newline) rather than a file path."""
    return isinstance(source, str) and ("{" in source or "\n" in source)


def load(source: str | os.PathLike, overrides: Sequence[str] = (), directory: str | None = None) -> Spec:
    """A spec file path or spec text (+ `key=value` overrides) -> a resolved, verified Spec."""
    from attncomp.ir.build import build  # the parser, only when a spec is read (the module's docstring)
    from attncomp.syntax import load_path, load_text, parse_override  # likewise

    if looks_like_text(source):
        files = load_text(str(source), directory=directory)
    else:
        files = load_path(Path(source))
    return verify(build(files, [parse_override(o) for o in overrides]))


def load_flat(text: str, origin: str, overrides: Sequence[str] = ()) -> Spec:
    """Canonical spec text stored in an artifact (a checkpoint, an export) -> a Spec, reading no other
    file: `extends` is refused. `origin` names the artifact in errors. Those that build an artifact's
    model use attncomp.lower.size.load_stored (attncomp.loading.checked_spec), which also holds the spec to the
    size limit."""
    from attncomp.ir.build import build  # the parser, only when a spec is read (the module's docstring)
    from attncomp.syntax import load_flat as parse_flat, parse_override  # likewise

    return verify(build(parse_flat(text, origin), [parse_override(o) for o in overrides]))


def load_recipe(source: str | os.PathLike, overrides: Sequence[str] = ()) -> nodes.Recipe:
    """A recipe file path or recipe text (train and decode blocks only, + `key=value` overrides) -> a Recipe."""
    from attncomp.ir.build import build_recipe  # the parser, only when a recipe is read
    from attncomp.syntax import load_path, load_text, parse_override

    files = load_text(str(source)) if looks_like_text(source) else load_path(Path(source))
    return build_recipe(files, [parse_override(o) for o in overrides])


__all__ = ["Spec", "diff", "load", "load_flat", "load_recipe", "nodes", "recipe_text", "spec_hash", "to_json",
           "to_text", "verify"]
