"""One meaning per class name: no two classes of attncomp/ and cli/ share a name, and no IR node is named
like a class of the compiled model (the units the lowering makes: `Model`, `Encoder`, `EncoderLayer`, ...)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict

from attncomp.lower.attention import NAMES
from tests.conftest import ROOT


def _classes() -> dict[str, list[str]]:
    found = defaultdict(list)
    for folder in ("attncomp", "cli"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    found[node.name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_class_name_means_two_things():
    twice = {name: where for name, where in _classes().items() if len(where) > 1}
    assert not twice, twice


def test_no_class_shares_a_name_with_a_compiled_unit():
    units = set(NAMES.values())
    for path in (ROOT / "attncomp" / "lower").glob("*.py"):
        units |= set(re.findall(r'Unit\(\s*f?"(?:\{\w+\})?(\w+)"', path.read_text()))  # f"{prefix}EncoderLayer"
        units |= set(re.findall(r'Unit\(\s*\w+,\s*"(\w+)"', path.read_text()))
        units |= set(re.findall(r'\bname: str = "([A-Z]\w+)"', path.read_text()))  # feed_forward's own name
        units |= set(re.findall(r'ctx\.unit\([^\n]*,\s*"([A-Z]\w+)"\)', path.read_text()))  # its experts' names
    assert {"Model", "Encoder", "EncoderLayer", "FeedForward", "Expert", "SharedExpert"} <= units
    shared = {name: where for name, where in _classes().items() if name in units}
    assert not shared, shared
