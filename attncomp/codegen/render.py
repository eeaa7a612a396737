"""Stage 5: a resolved Spec -> a standalone, readable PyTorch module (jinja2 templates).

The module renders what the optimised graphs compute — scaled dot-product attention through
`F.scaled_dot_product_attention`, additive attention explicitly — with the same parameter names, so
one state dict loads into either. Only identifiers from the IR (validated names, fixed keywords) and
numbers reach code; the spec's own text appears only in comments, made printable line by line.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import jinja2

from attncomp import __version__, ir
from attncomp.ir import nodes
from attncomp.lower.params import embedding_names

TEMPLATES = Path(__file__).with_name("templates")


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False,
    )


def comment_safe(line: str) -> str:
    """Text for a `#` comment: every character printable, so nothing can end the comment."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


def _number(value: float | int) -> str:
    return repr(value) if isinstance(value, float) else str(int(value))


def _stack(model: nodes.Model, name: str) -> dict | None:
    stack = getattr(model, name)
    if stack is None:
        return None
    cross = name == "decoder" and model.encoder is not None
    local = isinstance(stack.attention, nodes.Local)
    pre = stack.norm == "pre"
    kind = "decoder" if name == "decoder" else "encoder"
    sublayers = "masked self-attention, encoder-decoder attention, " if cross else \
        ("masked self-attention, " if kind == "decoder" else "self-attention, ")
    return {
        "name": name, "layer_class": f"{kind.capitalize()}Layer", "stack_class": kind.capitalize(),
        "layer_doc": f"One {kind} layer: {sublayers}then the feed-forward net.",
        "stack_doc": f"N = {stack.layers} identical {kind} layers" + (", then a final LayerNorm." if pre else "."),
        "residual_doc": "x + Dropout(sublayer(LayerNorm(x))): pre-norm." if pre else
        "LayerNorm(x + Dropout(sublayer(x))): post-norm, as in the paper.",
        "self_attn_class": "AdditiveAttention" if stack.attention.kind == "additive" else "Attention",
        "cross_attn_class": "AdditiveAttention" if cross and stack.cross_attention.kind == "additive" else "Attention",
        "d_model": stack.d_model, "d_memory": model.encoder.d_model if cross else stack.d_model,
        "heads": stack.heads, "d_k": stack.d_k, "d_v": stack.d_v, "d_ff": stack.d_ff, "layers": stack.layers,
        "activation": "torch.relu" if stack.activation == "relu" else "F.gelu",
        "pre": pre, "local": local, "window": stack.attention.window if local else 0, "cross": cross,
    }


def _attention_kinds(model: nodes.Model) -> set[str]:
    kinds = {s.attention.kind for s in model.stacks}
    if model.decoder is not None and model.encoder is not None:
        kinds.add(model.decoder.cross_attention.kind)
    return kinds


def _embeddings(model: nodes.Model) -> dict:
    names = embedding_names(model)
    init = []
    if model.tie == "all":
        init.append(f"self.embed = nn.Embedding({model.tgt_vocab}, {model.d_model})  # source = target = output")
    else:
        if model.encoder is not None:
            init.append(f"self.src_embed = nn.Embedding({model.src_vocab}, {model.encoder.d_model})")
        if model.decoder is not None:
            tied = "  # also the output projection" if model.tie == "decoder" else ""
            init.append(f"self.tgt_embed = nn.Embedding({model.tgt_vocab}, {model.decoder.d_model}){tied}")
    if model.tie == "none":
        init.append(f"self.output = nn.Linear({model.d_model}, {model.tgt_vocab}, bias=False)")
    tied = names["output"] != "output"
    return {
        "embedding_init": init, "src_table": names["src"], "tgt_table": names["tgt"], "tied_output": tied,
        "logits_expr": f"F.linear(hidden, self.{names['output']}.weight)" if tied else "self.output(hidden)",
    }


def _entry_doc(model: nodes.Model) -> list[str]:
    if model.encoder is not None and model.decoder is not None:
        return ["    forward(src, tgt_in) -> logits        encode(src) -> memory",
                "    init_cache(src, memory) -> cache      decode_step(tokens, cache) -> (logits, cache)"]
    if model.decoder is not None:
        return ["    forward(tokens) -> logits    init_cache(tokens) -> cache",
                "    decode_step(tokens, cache) -> (logits, cache)"]
    return ["    forward(src) -> logits    encode(src) -> memory"]


def _title(model: nodes.Model) -> str:
    if model.encoder is not None and model.decoder is not None:
        return f"The `{model.name}` model: an encoder-decoder Transformer"
    if model.decoder is not None:
        return f"The `{model.name}` model: a decoder-only Transformer language model"
    return f"The `{model.name}` model: an encoder-only Transformer"


def render(spec: nodes.Spec, source: str, path: str) -> str:
    """The generated module's text."""
    m = spec.model
    kinds = _attention_kinds(m)
    p_residual = m.dropout.residual
    stacks = [s for s in (_stack(m, "encoder"), _stack(m, "decoder")) if s is not None]
    p_emb = m.dropout.embedding
    context = {
        "version": __version__, "path": comment_safe(path), "hash": ir.spec_hash(spec), "title": _title(m),
        "source_lines": [comment_safe(line) for line in source.splitlines()],
        "resolved_lines": ir.to_text(spec).splitlines(), "entry_doc": _entry_doc(m),
        "uses_sinusoidal": isinstance(m.positions, nodes.Sinusoidal), "uses_band": any(s["local"] for s in stacks),
        "uses_sdpa": bool(kinds & {"scaled_dot", "local"}), "uses_additive": "additive" in kinds,
        "attention_bias_arg": "" if m.bias.attention else ", bias=False",
        "ffn_bias_arg": "" if m.bias.ffn else ", bias=False",
        "activation_names": "/".join(sorted({s.activation for s in m.stacks})),
        "stacks": stacks, "encoder": stacks[0] if m.encoder is not None else None,
        "decoder": stacks[-1] if m.decoder is not None else None,
        "p_attention": _number(m.dropout.attention), "p_activation": _number(m.dropout.activation),
        "norm_eps": _number(m.norm_eps), "learned_positions": isinstance(m.positions, nodes.Learned),
        "max_len": m.positions.max_len if isinstance(m.positions, nodes.Learned) else 0,
        "has_positions": not isinstance(m.positions, nodes.NoPositions), "scale_embeddings": m.scale_embeddings,
        "embedding_dropout": f"F.dropout(x, {_number(p_emb)}, self.training)" if p_emb else "x",
        "residual_dropout": lambda var: f"F.dropout({var}, {_number(p_residual)}, self.training)" if p_residual else var,
        **_embeddings(m),
    }
    return _environment().get_template("model.py.j2").render(context)


def _relative(path: Path) -> Path:
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def output_path(spec_path: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """generated/<path under specs/>.py for a spec inside a specs/ folder; else <out_dir>/<stem>.py."""
    spec_path = Path(spec_path)
    if out_dir is not None:
        return Path(out_dir) / f"{spec_path.stem}.py"
    parts = spec_path.resolve().parts
    if "specs" in parts:
        at = len(parts) - 1 - parts[::-1].index("specs")
        root = Path(*parts[:at])
        return _relative(root / "generated" / Path(*parts[at + 1 :]).with_suffix(".py"))
    return Path("generated") / f"{spec_path.stem}.py"


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
