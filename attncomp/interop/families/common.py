"""What the family tables share: activations, dropout rates, tying, and refusals of rotary scaling and
mixed layers."""

from __future__ import annotations

from dataclasses import dataclass, field

from attncomp.interop.mapping import layer_kinds, rope_scaling, unsupported_scaling

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}  # HF's name -> attncomp's
# decoder stacks also have GELU's tanh approximation (gelu_new and gelu_pytorch_tanh compute the same formula)
DECODER_ACTIVATIONS = {**ACTIVATIONS, "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}


@dataclass(frozen=True)
class activation_of:
    """The spec's activation of a config attribute, through `table` (HF's name -> attncomp's); `back`: the
    HF name of an activation (the table's last name for it: silu, not swish; gelu_pytorch_tanh)."""

    name: str
    table: dict[str, str] = field(default_factory=lambda: ACTIVATIONS)

    def __call__(self, config) -> str | None:
        return self.table.get(getattr(config, self.name))

    def back(self, value: str) -> dict[str, str]:
        names = [hf for hf, ours in self.table.items() if ours == value]
        return {self.name: names[-1]} if names else {}


def bad_activation(name: str, table: dict[str, str] = ACTIVATIONS):
    def test(config) -> bool:
        return getattr(config, name) not in table

    def what(config) -> str:
        value = getattr(config, name)
        tanh = " (GELU's tanh approximation)" if value in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast") \
            and value not in table else ""
        return f"activation {value!r}{tanh}; attncomp has {', '.join(table)}"
    return test, what


class rate:
    """The first of a config's dropout attributes that it has, as a float; `back`: the first attribute of a
    spec's rate."""

    def __init__(self, *names: str):
        self.names = names

    def __call__(self, config) -> float:
        for name in self.names:
            value = getattr(config, name, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
        return 0.0

    def back(self, value: float) -> dict[str, float]:
        return {self.names[0]: value}


def tied(config) -> bool:
    return bool(getattr(config, "tie_word_embeddings", True))


ROPE_SCALING = (lambda c: unsupported_scaling(getattr(c, "rope_parameters", None) or {}) is not None,
                lambda c: unsupported_scaling(getattr(c, "rope_parameters", None) or {}))
MIXED_LAYERS = (lambda c: len(layer_kinds(c)) > 1,
                lambda c: "layers of different attention kinds (layer_types " + "/".join(sorted(layer_kinds(c))) + ")")


def periodic(indices: list[int], layers: int) -> tuple[int, int] | None:
    """(start, every) of a layer kind whose layers are exactly `indices` (start, start + every, ... to the
    end of a stack of `layers`); None where no such pair gives them (or there are none)."""
    if not indices:
        return None
    start = indices[0]
    every = indices[1] - start if len(indices) > 1 else layers
    return (start, every) if indices == list(range(start, layers, every)) else None


def rope_theta(config, layer_type: str) -> float:
    """The rotary base of one layer type, from transformers' per-type rope_parameters."""
    return float(config.rope_parameters[layer_type]["rope_theta"])


PER_TYPE_ROPE_SCALING = (
    lambda c: any(p.get("rope_type", "default") != "default" for p in c.rope_parameters.values()),
    lambda c: "rope_type " + "/".join(sorted({repr(p.get("rope_type")) for p in c.rope_parameters.values()})) +
              " (rotary scaling)")


def _per_type_unsupported(config) -> str | None:
    """The first layer type whose rope_parameters ask what no scaling choice gives (with the type), or None."""
    for layer_type, params in sorted(config.rope_parameters.items()):
        problem = unsupported_scaling(params or {})
        if problem:
            return f"{layer_type}: {problem}"
    return None


PER_TYPE_UNSUPPORTED_SCALING = (lambda c: _per_type_unsupported(c) is not None, _per_type_unsupported)


def per_type_scaling(config, layer_type: str) -> str | None:
    """The spec's scaling choice of one layer type's rope_parameters (None: unscaled)."""
    return rope_scaling(config, config.rope_parameters[layer_type])
