"""The body of a generated module: helpers, then classes, printed from a compiled model's graphs.

Helpers are the functions of attncomp.lower.ops the graphs call, copied by inspect.getsource into a
namespace class `ops`, so the generated module and the compiler run one text of them. Globals fx
needs for constants (`inf`, `nan`, `device`) are defined when used.
"""

from __future__ import annotations

import inspect
import re
import textwrap

from attncomp.codegen.entry import print_entry
from attncomp.codegen.modules import Printer
from attncomp.codegen.printer import PrintError, merge_shapes
from attncomp.lower import CompiledModel, ops

CONSTANTS = {"inf": "inf = math.inf", "nan": "nan = math.nan", "device": "device = torch.device"}
ALIASES = {  # fx names functions by the module defining them; these are the same objects, by their usual names
    "torch._C._nn.": "F.", "torch.nn.functional.": "F.", "torch.functional.split(": "torch.split(",
    "torch.functional.einsum(": "torch.einsum(",
}
BUILTIN = {"torch", "getattr", "NoneType", "fx_pytree", "pytree"}


def _methods(model: CompiledModel) -> tuple[dict[str, list[str]], dict]:
    """Layer methods by the path of their ModuleList, entry points under "" (the model)."""
    known: dict[str, dict[str, str]] = {}
    methods: dict[str, dict[str, str]] = {"": {}}
    found: dict = {}
    for entry in model.entry_points:
        text, stacks, names = print_entry(model.graphs[entry], entry, known)
        methods[""][entry] = text
        found.update(names)
        for stack, stacked in stacks.items():
            found.update(stacked.globals)
            texts = methods.setdefault(f"{stack}.layers", {})
            method = stacked.loop.method
            texts[method] = merge_shapes(texts[method], stacked.method_text) if method in texts else stacked.method_text
    return {path: list(texts.values()) for path, texts in methods.items()}, found


def _helpers(found: dict, code: str) -> tuple[str, str]:
    """(code with helper calls as ops.NAME, the preamble defining them and the constants used)."""
    functions = []
    for name, obj in sorted(found.items()):
        if not re.search(rf"\b{re.escape(name)}\b", code):
            continue
        if inspect.isfunction(obj) and obj.__module__ == ops.__name__:
            code = re.sub(rf"\b{re.escape(name)}\b", f"ops.{obj.__name__}", code)
            functions.append(obj)
        elif name not in CONSTANTS and name not in BUILTIN:
            raise PrintError(f"the graphs call {name}, which the generated module cannot define")
    lines = [CONSTANTS[name] for name in CONSTANTS if re.search(rf"(?<![\w.]){name}\b(?! =)", code)]
    if functions:
        doc = '    """Helpers the graphs call, copied verbatim from attncomp/lower/ops.py."""'
        bodies = [textwrap.indent("@staticmethod\n" + inspect.getsource(f).rstrip(), "    ") for f in functions]
        lines.append("\n\nclass ops:\n" + doc + "\n\n" + "\n\n".join(bodies))
    return code, "\n".join(lines)


def print_model(model: CompiledModel, doc: str) -> str:
    """The module's code after its imports."""
    methods, found = _methods(model)
    classes = Printer(methods).model(model, doc)
    classes, preamble = _helpers(found, classes)
    for long, short in ALIASES.items():
        classes = classes.replace(long, short)
    return (preamble + "\n\n\n" if preamble else "") + classes
