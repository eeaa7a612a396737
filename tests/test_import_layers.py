"""Imports go one way: every module of attncomp/ and cli/ imports only modules of its own layer or of the
layers before it, hidden in a function or not, and no modules import each other in a circle (bench/'s too).

The layers, lowest first (a module belongs to the layer of its longest listed prefix). The runtime (data,
checkpoint, decode and all of training) sits on the IR, below the compiler: it asks the IR what family a
model is and the model, through its protocol, how to compute its loss, and trains whatever a model factory
makes (issue 41). The one exception is the spec adapter of training (SPEC_ADAPTER: the functions that turn a
spec into a job), which imports the compiler inside those functions only. The compiler's stages follow in
order (lower < passes < codegen < compiler); then loading (attncomp.load: the compiler and a checkpoint, with
the size guard), interop and sweep, and the command line on top.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

# the spec adapter of training: (module, function) whose body alone may import the compiler, lazily
SPEC_ADAPTER = {("attncomp.train.run_job", "spec_job"), ("attncomp.train.warm_start", "meta_model")}
COMPILER = ("attncomp.lower", "attncomp.passes", "attncomp.codegen", "attncomp.compiler", "attncomp.report")
LAYERS = [
    ("foundation", ["attncomp", "attncomp.errors", "attncomp.files", "attncomp.native", "attncomp.vocab",
                    "attncomp.progress", "attncomp.optional", "attncomp.logits", "attncomp.protocol"]),
    ("syntax", ["attncomp.syntax"]),
    ("ir", ["attncomp.ir"]),
    ("data and checkpoint", ["attncomp.data", "attncomp.checkpoint"]),
    ("runtime: training and decoding", ["attncomp.train", "attncomp.decode"]),
    ("plot", ["attncomp.plot"]),  # reads runs; imports no compiler (tests/plot/test_plot.py)
    ("lower", ["attncomp.lower"]),
    ("passes", ["attncomp.passes"]),
    ("codegen", ["attncomp.codegen"]),
    ("compiler", ["attncomp.compiler", "attncomp.report"]),
    ("loading", ["attncomp.loading"]),  # attncomp.load: the compiler and a checkpoint
    ("interop and sweep", ["attncomp.interop", "attncomp.sweep", "attncomp.draw"]),
    ("cli", ["attncomp.cli"]),
]
RANK = {prefix: rank for rank, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes}


def _modules(folders=(("attncomp", "attncomp"), ("cli", "attncomp.cli"))) -> dict[str, Path]:
    found = {}
    for folder, package in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            found[".".join((package, *parts)).removesuffix(".__init__")] = path
    return found


MODULES = _modules()
BENCH = _modules((("bench", "bench"),))  # not layered, but checked for circles
ALL = {**MODULES, **BENCH}


def _project(name: str) -> str | None:
    """The project module an import of `name` loads (a package's submodule, or the package)."""
    while name and name not in ALL:
        name = name.rpartition(".")[0]
    return name or None


def _with_scope(tree: ast.Module):
    """(node, name of the outermost function or class around it, or None) for every node of `tree`."""
    stack = [(node, None) for node in tree.body]
    while stack:
        node, scope = stack.pop()
        yield node, scope
        inner = node.name if scope is None and isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else scope
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))


def imports(module: str, scoped: bool = False) -> list[tuple]:
    """(imported project module, line, inside a function or class) for every import statement of `module`;
    with `scoped`, the name of that outermost function or class (None at module level) fourth."""
    tree = ast.parse(ALL[module].read_text(), str(ALL[module]))
    top = {id(node) for node in tree.body}
    package = module if ALL[module].name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node, scope in _with_scope(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in ALL else base for alias in node.names]
        else:
            continue
        for name in names:
            target = _project(name)
            if target is not None and target != module:
                found.append((target, node.lineno, id(node) not in top) + ((scope,) if scoped else ()))
    return sorted(found, key=lambda row: row[1])


def layer(module: str) -> int:
    prefix = max((p for p in RANK if module == p or module.startswith(p + ".")), key=len)
    return RANK[prefix]


def test_every_module_has_a_layer():
    assert all(any(m == p or m.startswith(p + ".") for p in RANK) for m in MODULES)


def _adapter(module: str, scope: str | None, target: str) -> bool:
    """An import the spec adapter may make: the compiler, inside one of SPEC_ADAPTER's functions."""
    return (module, scope) in SPEC_ADAPTER and target.startswith(COMPILER)


def test_no_import_reaches_a_later_layer():
    wrong = [f"{MODULES[m].relative_to(ROOT)}:{line}: {m} ({LAYERS[layer(m)][0]}) imports {t} "
             f"({LAYERS[layer(t)][0]}){' in a function' if local else ''}"
             for m in MODULES for t, line, local, scope in imports(m, scoped=True)
             if layer(t) > layer(m) and not _adapter(m, scope, t)]
    assert not wrong, "imports that reach a later layer:\n" + "\n".join(wrong)


def test_the_spec_adapter_is_where_it_is_said_to_be():
    """Each SPEC_ADAPTER function exists and imports the compiler (an exemption that no longer applies goes)."""
    for module, function in SPEC_ADAPTER:
        assert any(scope == function and t.startswith(COMPILER) for t, _, _, scope in imports(module, scoped=True))


def test_only_the_spec_adapter_loading_sweep_interop_and_the_cli_compile():
    """Outside the compiler's own stages, the modules that import it (at module level or in a function) are
    loading, sweep, interop, the drawing command's page (attncomp.draw) and the command line, and the spec
    adapter's functions."""
    allowed = (*COMPILER, "attncomp.loading", "attncomp.sweep", "attncomp.interop", "attncomp.draw", "attncomp.cli")
    wrong = [f"{MODULES[m].relative_to(ROOT)}:{line}: {m} imports {t}" for m in MODULES
             for t, line, _, scope in imports(m, scoped=True)
             if t.startswith(COMPILER) and not m.startswith(allowed) and not _adapter(m, scope, t)]
    assert not wrong, "\n".join(wrong)


def _is_parent(package: str, module: str) -> bool:
    """A module importing its own package: Python runs the package first in any case."""
    return module.startswith(package + ".")


def test_no_import_circle():
    graph = {m: {t for t, *_ in imports(m) if not _is_parent(t, m)} for m in ALL}
    circles, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":  # on the current path: a circle back to it
                circles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in ALL:
        if module not in state:
            visit(module, [module])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_module_of_attncomp_imports_the_command_line():
    wrong = [f"{m} imports {t}" for m in MODULES if not m.startswith("attncomp.cli")
             for t, _, _ in imports(m) if t.startswith("attncomp.cli")]
    assert not wrong, wrong


RUNTIME = ("attncomp.data", "attncomp.checkpoint", "attncomp.decode", "attncomp.train")


def test_the_runtime_never_imports_the_compiler():
    """Data, checkpoints, decoding and training (its step, loss, runner, validation, ...) run a model through its
    protocol: no import of the lowering or the compiler, at module level or in a function (issue 41), but in
    the spec adapter's functions."""
    wrong = [f"{MODULES[m].relative_to(ROOT)}:{line}: {m} imports {t}" for m in MODULES
             if m == "attncomp" or m.startswith(RUNTIME) for t, line, _, scope in imports(m, scoped=True)
             if t.startswith(COMPILER) and not _adapter(m, scope, t)]
    assert not wrong, "\n".join(wrong)


def test_importing_the_runtime_loads_no_compiler():
    """Every runtime module imported in a fresh interpreter (the train package and run_job included): neither
    attncomp.lower nor attncomp.compiler is in sys.modules afterwards."""
    names = sorted(m for m in MODULES if m.startswith(RUNTIME))
    code = (f"import importlib, sys\nfor name in {names!r}:\n    importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m.startswith(('attncomp.lower', 'attncomp.compiler'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]" and len(names) > 40
