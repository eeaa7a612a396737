"""Print the compiled model's module tree as classes, so parameter names (and the state dict) match.

Leaves are written as their constructors (any module of torch.nn without children: nn.Linear,
nn.LayerNorm, nn.Embedding, ...; a bare nn.Parameter); every other module becomes a class named after where it sits (`self_attn` ->
SelfAttention, an item of `encoder.layers` -> EncoderLayer), which also receives the methods the
printer made for it. The same name with a different body gets its parent's name in front.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from torch import nn

NAMES = {"self_attn": "SelfAttention", "cross_attn": "CrossAttention", "ffn": "FeedForward",
         "encoder": "Encoder", "decoder": "Decoder"}


class ModuleError(ValueError):
    """A module the printer cannot write (an internal error)."""


@dataclass
class ClassText:
    name: str
    doc: str
    init: list[str]
    methods: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"class {self.name}(nn.Module):", f'    """{self.doc}"""', "", "    def __init__(self):",
                 "        super().__init__()", *("        " + line for line in self.init)]
        return "\n".join(lines + [m.rstrip() for m in self.methods for m in ("", m)]) + "\n"


def _leaf(module: nn.Module) -> str | None:
    """`nn.Name(args)` for a module of torch.nn without children, read back from its attributes:
    required arguments by position, the others by keyword where they differ from the default. So
    a norm or an embedding the lowering starts to use is printed with no change here."""
    cls = type(module)
    if cls.__module__.split(".")[:2] != ["torch", "nn"] or isinstance(module, nn.ModuleList) or \
            next(module.children(), None) is not None:
        return None
    args = []
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name in ("self", "device", "dtype") or name.startswith("_") or param.kind in (param.VAR_POSITIONAL,
                                                                                           param.VAR_KEYWORD):
            continue
        if name == "bias" and not isinstance(getattr(module, "bias", None), bool):
            value = module.bias is not None  # a Parameter or None on the module, a bool in the signature
        elif hasattr(module, name):
            value = getattr(module, name)
        else:
            raise ModuleError(f"cannot read {cls.__name__}'s argument {name} back from the module")
        if param.default is inspect.Parameter.empty:
            args.append(repr(value))
        elif value != param.default:
            args.append(f"{name}={value!r}")
    return f"nn.{cls.__name__}({', '.join(args)})"


def _camel(name: str) -> str:
    return NAMES.get(name) or "".join(part.capitalize() for part in name.split("_"))


class Printer:
    """Collects the classes of one model, children before parents."""

    def __init__(self, methods: dict[str, list[str]]):
        self.classes: dict[str, ClassText] = {}
        self.methods = methods  # dotted path of a module ("encoder.layers") -> methods of its class

    def _class(self, module: nn.Module, name: str, path: str, parent: str, doc: str) -> str:
        init = []
        for pname, param in module.named_parameters(recurse=False):
            init.append(f"self.{pname} = nn.Parameter(torch.empty({tuple(param.shape)!r}))")
        for cname, child in module.named_children():
            init.append(f"self.{cname} = {self.expression(child, cname, f'{path}.{cname}'.lstrip('.'), name)}")
        text = ClassText(name, doc, init, self.methods.get(path, []))
        found = self.classes.get(name)
        if found is not None and found.text() != text.text():
            name = text.name = f"{parent}{name}"
            found = self.classes.get(name)
            if found is not None and found.text() != text.text():
                raise ModuleError(f"two different modules would be printed as class {name}")
        self.classes[name] = text
        return name

    def expression(self, module: nn.Module, attr: str, path: str, parent: str) -> str:
        leaf = _leaf(module)
        if leaf is not None:
            return leaf
        if isinstance(module, nn.ModuleList):
            item = f"{parent}Layer" if attr == "layers" else _camel(attr) + "Item"
            names = {self._class(m, item, path, parent, f"One of {parent}'s {len(module)} identical {attr}.")
                     for m in module}
            if len(names) != 1:
                raise ModuleError(f"the items of {path} differ")
            return f"nn.ModuleList({names.pop()}() for _ in range({len(module)}))"
        name = self._class(module, _camel(attr), path, parent, f"The parameters of `{attr}`.")
        return f"{name}()"

    def model(self, root: nn.Module, doc: str) -> str:
        """Every class, the root last as `Model`."""
        self._class(root, "Model", "", "", doc)
        return "\n\n".join(c.text() for c in self.classes.values())
