"""attncomp: a compiler for Transformer models.

Stages, each importing only the ones before it:
syntax (text -> tree) -> ir (tree -> Spec) -> lower (Spec -> fx graphs) -> passes -> codegen.
The runtime (data, train, decode) takes a compiled module and never needs the parser.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """`attncomp.compile`, `attncomp.load` (and submodules) on first use, so `import attncomp` stays light."""
    import importlib

    if name == "compile":
        return importlib.import_module("attncomp.compiler").compile
    if name == "load":
        return importlib.import_module("attncomp.loading").load
    try:
        return importlib.import_module(f"attncomp.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module 'attncomp' has no attribute {name!r}") from None
