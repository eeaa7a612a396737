"""What a spec will cost before anything is built: its exact parameter count and their memory.

Counted from the IR alone, term by term as `attncomp/lower/params.py` creates the tensors (tied
weights once), so `check` and `build` can refuse a spec whose parameters alone would not fit before
spending minutes and gigabytes on it. Biases are counted in one place, `_bias`: a new bias key
changes only that function.
"""

from __future__ import annotations

from dataclasses import dataclass

from attncomp.errors import SpecError
from attncomp.ir import nodes

FLOAT32_BYTES = 4
MAX_PARAM_BYTES = 4 << 30  # 4 GiB of float32 parameters (1 Gi parameters); `--force` / force=True passes it


@dataclass(frozen=True)
class Size:
    """A spec's parameters: the count, and bytes as float32 (weights only; training with Adam needs
    about four times as much, plus activations)."""

    params: int

    @property
    def bytes(self) -> int:
        return self.params * FLOAT32_BYTES

    def describe(self) -> str:
        return f"{self.params:,} parameters, {_bytes(self.bytes)} as float32"


def limit_text() -> str:
    return _bytes(MAX_PARAM_BYTES)


def _bytes(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _bias(model: nodes.Model, site: str, width: int) -> int:
    """The bias terms of one projection of `width` outputs at `site` (q, k, v, o, fc1, fc2, or output):
    the one place biases are counted (`model.bias.of(site)`, `model.bias.output`)."""
    has = model.bias.output if site == "output" else model.bias.of(site)
    return width if has else 0


def _linear(model: nodes.Model, site: str, d_in: int, d_out: int) -> int:
    return d_in * d_out + _bias(model, site, d_out)


def _attention(model: nodes.Model, stack: nodes.Stack, d_memory: int, kind: str) -> int:
    h, d = stack.heads, stack.d_model
    count = _linear(model, "q", d, h * stack.d_k)  # q_proj
    count += _linear(model, "k", d_memory, stack.key_value_heads * stack.d_k)  # k_proj
    count += _linear(model, "v", d_memory, stack.key_value_heads * stack.d_v)  # v_proj
    count += _linear(model, "o", h * stack.d_v, d)  # o_proj
    if kind == "additive":
        count += h * stack.d_k  # energy, v_a per head
    return count


def _norm(stack: nodes.Stack) -> int:
    """A LayerNorm has a weight and a bias, an RMSNorm a weight only."""
    return stack.d_model if stack.normalization == "rmsnorm" else 2 * stack.d_model


def _layer(model: nodes.Model, stack: nodes.Stack, d_memory: int | None) -> int:
    d, norm = stack.d_model, _norm(stack)
    count = _attention(model, stack, d, stack.attention.kind) + norm
    if d_memory is not None:
        count += _attention(model, stack, d_memory, stack.cross_attention.kind) + norm  # type: ignore[attr-defined]
    count += _linear(model, "fc1", d, stack.d_ff) + _linear(model, "fc2", stack.d_ff, d)  # ffn.fc1, ffn.fc2
    if stack.gated:
        count += _linear(model, "fc1", d, stack.d_ff)  # ffn.gate, biased as fc1
    count += norm  # ffn_norm
    return count


def _stack(model: nodes.Model, stack: nodes.Stack, d_memory: int | None) -> int:
    count = stack.layers * _layer(model, stack, d_memory)
    if isinstance(model.positions, nodes.Learned):
        count += model.positions.max_len * stack.d_model
    if isinstance(model.positions, nodes.Relative):  # a^K (and a^V) per self-attention
        rows = 2 * model.positions.max_distance + 1
        count += stack.layers * rows * (stack.d_k + (stack.d_v if model.positions.values else 0))
    if stack.final_norm:
        count += _norm(stack)
    if model.embedding_norm:
        count += _norm(stack)  # embed_norm
    return count


def _embeddings(model: nodes.Model) -> int:
    enc, dec = model.encoder, model.decoder
    if model.tie == "all":
        return model.tgt_vocab * model.d_model + _bias(model, "output", model.tgt_vocab) + _head(model)
    count = 0
    if enc is not None:
        count += model.src_vocab * enc.d_model
    if dec is not None:
        count += model.tgt_vocab * dec.d_model
    if model.tie == "none":
        count += model.d_model * model.tgt_vocab  # the output projection
    return count + _bias(model, "output", model.tgt_vocab) + _head(model)


def _head(model: nodes.Model) -> int:
    """The prediction-head transform: dense d x d (+ bias) and a LayerNorm."""
    if not isinstance(model.head, nodes.DenseHead):
        return 0
    d = model.d_model
    return d * d + (d if model.head.bias else 0) + 2 * d


def parameter_count(spec: nodes.Spec) -> int:
    """The exact number of trainable parameters the compiled model will have (tied weights once)."""
    model = spec.model
    count = _embeddings(model)
    if model.encoder is not None:
        count += _stack(model, model.encoder, None)
    if model.decoder is not None:
        d_memory = model.encoder.d_model if model.encoder is not None else None
        count += _stack(model, model.decoder, d_memory)
    return count


def estimate(spec: nodes.Spec) -> Size:
    return Size(parameter_count(spec))


FORCE = "--force (or attncomp.compile(..., force=True)) builds it anyway"


def refuse_if_too_large(spec: nodes.Spec, origin: str | None = None, limit: int | None = None,
                        remedy: str = FORCE) -> Size:
    """The spec's size, or a SpecError when its float32 parameters exceed `limit` bytes (default
    MAX_PARAM_BYTES). `origin` (the spec's file) starts the message, `remedy` ends it."""
    limit = MAX_PARAM_BYTES if limit is None else limit
    size = estimate(spec)
    if size.bytes > limit:
        where = f"{origin}: " if origin else ""
        raise SpecError(f"{where}model {spec.model.name} has {size.describe()}, over the limit of {_bytes(limit)} "
                        f"(building it would take very long and very much memory); {remedy}")
    return size
