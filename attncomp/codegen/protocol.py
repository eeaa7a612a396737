"""The generated Model's answer to the runtime's model protocol (attncomp.protocol): what training, evaluation and
decoding ask of a model, as class attributes that end the Model class (two lines: base.py stays nanoGPT's size),
so a generated module trains with `attncomp.train.run` through a model factory as the compiled model does."""

from __future__ import annotations

from attncomp.lower import CompiledModel, embedding_names


def _literal(value) -> str:
    """A constant as the generated code writes it (double quotes, as the printer does)."""
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_literal, value)) + ("," if len(value) == 1 else "") + ")"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def protocol_block(model: CompiledModel) -> str:
    """The lines that end the generated Model class (indented as its body)."""
    arch = model.spec.model
    weight = f"self.{embedding_names(arch)['output']}.weight"
    bias = "self.output_bias" if arch.bias.output else "None"
    first = (f"    family, loss_inputs, d_model = {_literal(model.family)}, {_literal(model.loss_inputs)}, "
             f"{model.d_model}")
    return "\n".join([
        "",
        "",
        first,
        f"    logit_scale, logit_softcap, output_projection = {float(model.logit_scale)!r}, "
        f"{model.logit_softcap!r}, lambda self: ({weight}, {bias})",
    ])
