"""Imports go one way: every module of attncomp/ and cli/ imports only modules of its own layer or of the
layers before it, hidden in a function or not, and no modules import each other in a circle.

The layers, lowest first (a module belongs to the layer of its longest listed prefix). The compiler's
stages are in order (syntax < ir < lower < passes < codegen < compiler); data and checkpoint come
after them and before train and decode; interop and sweep above those; the command line on top.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

LAYERS = [
    ("foundation", ["attncomp", "attncomp.errors", "attncomp.files", "attncomp.native", "attncomp.vocab",
                    "attncomp.progress", "attncomp.optional"]),
    ("syntax", ["attncomp.syntax"]),
    ("ir", ["attncomp.ir"]),
    ("lower", ["attncomp.lower"]),
    ("passes", ["attncomp.passes"]),
    ("codegen", ["attncomp.codegen"]),
    ("compiler", ["attncomp.compiler", "attncomp.report"]),
    ("data and checkpoint", ["attncomp.data", "attncomp.checkpoint"]),
    ("loading", ["attncomp.loading"]),  # attncomp.load: the compiler and a checkpoint
    ("train and decode", ["attncomp.train", "attncomp.decode"]),
    ("interop and sweep", ["attncomp.interop", "attncomp.sweep"]),
    ("cli", ["attncomp.cli"]),
]
RANK = {prefix: rank for rank, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in (("attncomp", "attncomp"), ("cli", "attncomp.cli")):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            found[".".join((package, *parts)).removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _project(name: str) -> str | None:
    """The project module an import of `name` loads (a package's submodule, or the package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function or class) for every import statement of `module`."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    top = {id(node) for node in tree.body}
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for name in names:
            target = _project(name)
            if target is not None and target != module:
                found.append((target, node.lineno, id(node) not in top))
    return found


def layer(module: str) -> int:
    prefix = max((p for p in RANK if module == p or module.startswith(p + ".")), key=len)
    return RANK[prefix]


def test_every_module_has_a_layer():
    assert all(any(m == p or m.startswith(p + ".") for p in RANK) for m in MODULES)


def test_no_import_reaches_a_later_layer():
    wrong = [f"{MODULES[m].relative_to(ROOT)}:{line}: {m} ({LAYERS[layer(m)][0]}) imports {t} "
             f"({LAYERS[layer(t)][0]}){' in a function' if local else ''}"
             for m in MODULES for t, line, local in imports(m) if layer(t) > layer(m)]
    assert not wrong, "imports that reach a later layer:\n" + "\n".join(wrong)


def _is_parent(package: str, module: str) -> bool:
    """A module importing its own package: Python runs the package first in any case."""
    return module.startswith(package + ".")


def test_no_import_circle():
    graph = {m: {t for t, _, _ in imports(m) if not _is_parent(t, m)} for m in MODULES}
    circles, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":  # on the current path: a circle back to it
                circles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in MODULES:
        if module not in state:
            visit(module, [module])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_module_of_attncomp_imports_the_command_line():
    wrong = [f"{m} imports {t}" for m in MODULES if not m.startswith("attncomp.cli")
             for t, _, _ in imports(m) if t.startswith("attncomp.cli")]
    assert not wrong, wrong
