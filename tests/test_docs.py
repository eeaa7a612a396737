"""docs/ stays true to the code: every key and choice of the language is documented."""

from __future__ import annotations

import re

from attncomp.ir import nodes
from attncomp.ir.schema import fields_of
from attncomp.ir.canonical import _SCALAR_WRITERS as SCALAR_FORMS
from tests.conftest import ROOT

LANGUAGE = (ROOT / "docs" / "language.md").read_text()


def _all_nodes():
    seen, todo = set(), [nodes.Spec]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for kind in fields_of(cls).values():
            if kind.what in ("block", "choice", "list", "named"):
                todo.extend(kind.members)
    return seen


def test_every_key_is_documented():
    code = " ".join(re.findall(r"`([^`]*)`", LANGUAGE))  # keys appear in code spans and tables
    missing = []
    for cls in _all_nodes() - set(SCALAR_FORMS):  # 10min, src + 50, 65M +- 5% have no keys to write
        for key in fields_of(cls):
            if key != "name" and not re.search(rf"\b{key}\b", code):
                missing.append(f"{cls.__name__}.{key}")
    assert not missing, f"undocumented keys: {missing}"


def test_every_choice_and_value_is_documented():
    missing = []
    for cls in _all_nodes():
        for key, kind in fields_of(cls).items():
            names = [m.model_fields["kind"].default for m in kind.members] if kind.what in ("choice", "list") else \
                list(kind.members) if kind.what == "literal" else []
            missing += [f"{key}={n}" for n in names if not re.search(rf"`{n}[`(]", LANGUAGE)
                        and n not in ("steps", "time", "fixed", "src_plus")]
    assert not missing, f"undocumented values: {missing}"


def test_compiler_doc_table_is_what_the_script_prints():
    import importlib.util

    spec = importlib.util.spec_from_file_location("paper_params", ROOT / "bench" / "paper_params.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = (ROOT / "docs" / "compiler.md").read_text()
    assert "\n".join(module.rows()) in doc


def test_language_error_example_is_the_golden_message():
    """docs/language.md's "Errors" example of a pointer is tests/bad_specs' golden, word for word."""
    golden = (ROOT / "tests" / "bad_specs" / "elsewhere_attention.err").read_text()
    assert golden in LANGUAGE


def test_language_spec_examples_load():
    """Each whole spec docs/language.md shows (a block starting with `model` or `extends`) loads as written; an
    `extends` is read from specs/table3/, where the page's example lives."""
    from attncomp import ir

    blocks = [b for b in re.findall(r"```\n(.*?)```", LANGUAGE, re.S)
              if re.match(r"(#[^\n]*\n)*(model|extends)\b", b)]
    assert len(blocks) >= 3
    for block in blocks:
        ir.load(block, directory=str(ROOT / "specs" / "table3"))
