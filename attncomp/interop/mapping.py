"""One mapping mechanism for every Hugging Face family: a family is a table entry (`FamilyEntry`), and this
module reads any entry.

An entry says, as data,

    spec        spec key (dotted, inside `model`) -> a config attribute (`Key("hidden_size")`), a function
                of the config, or a constant; the config is transformers' own config class, so its defaults
                and meanings apply (`rope_parameters`, `layer_types`, ...)
    refuse      (test, what has no spec equivalent): a config that needs a choice the language lacks is
                refused in one line naming it
    embeddings  attncomp embedding name -> the HF names that may hold it (tied copies: the first present
                is taken, the others dropped; save_pretrained keeps one of them)
    renames     (regular expression over HF names, attncomp's name); a name no rule and no `dropped`
                pattern matches is an error, so nothing is silently lost
    transforms  named weight transforms applied after renaming, in order (below)

and `convert` turns an HF state dict into attncomp's canonical names with them. Weights keep their
stored dtype; a transform that folds two tensors into one computes in at least float32.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Union

import torch

from attncomp.errors import UsageError
from attncomp.ir import nodes

State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Key:
    """A config attribute, read from transformers' config object (its defaults apply); `cast` makes its
    value the spec's type (float for an eps a config may hold as an int). `back` is the way back: the config
    attribute of a spec value (export of a spec written by hand, `config_values`)."""

    name: str
    cast: Callable[[Any], Any] | None = None

    def __call__(self, config) -> Any:
        value = getattr(config, self.name)
        return self.cast(value) if self.cast is not None and value is not None else value

    def back(self, value: Any) -> dict[str, Any]:
        return {self.name: value}


Value = Union[Key, Callable[[Any], Any], str, int, float, bool]


def _unchanged(state: State, config) -> State:
    return state


@dataclass(frozen=True)
class Transform:
    """A named weight transform: `apply(state, config)` -> state, and `invert` for the export back; `name`
    is what docs/interop.md lists."""

    name: str
    apply: Callable[[State, Any], State]
    invert: Callable[[State, Any], State] = _unchanged


@dataclass(frozen=True)
class FamilyEntry:
    model_type: str  # config.json's model_type
    config_class: str  # transformers' config class
    model_class: str  # transformers' model class whose state dict this maps (tests, export)
    spec: dict[str, Value]
    renames: tuple[tuple[str, str], ...]
    embeddings: Callable[[Any], dict[str, tuple[str, ...]]] = lambda config: {}
    dropped: tuple[str, ...] = ()
    transforms: tuple[Transform, ...] = ()
    refuse: tuple[tuple[Callable[[Any], bool], str], ...] = ()
    prefix: str = ""  # transformers' base_model_prefix: a checkpoint of the bare model leaves it out
    folded: str = ""  # what import folds into other weights, for docs/interop.md
    slow_tokenizer: str | None = None  # transformers' tokenizer class read where DIR has no tokenizer.json
    # "rotate": the decoder input starts with the labels' last token (mBART's shift_tokens_right), not with
    # decoder_start_token_id; a chosen target language (data prepare --tgt-lang) sets the start from it
    shift: str | None = None
    config_of: Callable[[Any], dict] | None = None  # IR model -> config values (export of a spec written by hand)
    # a family whose every spec is another family's too (Phi-3's, Llama's or Mistral's): a spec written by hand
    # exports as it only where --family names it, so that those specs are not all ambiguous
    named_only: bool = False

    @property
    def label(self) -> str:
        return self.config_class.removesuffix("Config")


# --- spec text ---------------------------------------------------------------------------------


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):  # numbers: LongRoPE's factors
        return "[" + ", ".join(_text(float(v)) for v in value) + "]"
    return str(value)


def check(family: FamilyEntry, config) -> None:
    """One line naming everything of this config that the spec language cannot express."""
    problems = [what(config) if callable(what) else what for test, what in family.refuse if test(config)]
    if problems:
        raise UsageError(f"attncomp cannot express this {family.label} model: {'; '.join(problems)} "
                         "(no spec equivalent)")


def spec_text(family: FamilyEntry, config, name: str | None = None, extra: dict[str, Any] | None = None) -> str:
    """The spec of `config`: the model block, dropout as the config has it (train and decode take their
    defaults); `extra` overrides spec keys (Marian's renumbered vocabulary)."""
    check(family, config)
    lines = []
    for key, value in {**family.spec, **(extra or {})}.items():
        value = value(config) if callable(value) else value
        if value is not None:
            lines.append(f"  {key} = {_text(value)}")
    return f"model {name or family.model_type.replace('-', '_')} {{\n" + "\n".join(lines) + "\n}\n"


# --- the way back: a spec's config values (export of a spec written by hand) ---------------------------

STACK_KEYS = ("d_model", "heads", "kv_heads", "d_k", "d_v", "d_ff", "activation", "norm", "normalization",
              "attention", "qk_norm")  # model-level spellings of each stack's keys


def spec_value(model, key: str) -> Any:
    """The model's value of a family's spec key (dotted, as the table writes it): a stack's key written at the
    model level reads the decoder's (else the encoder's); a choice with arguments is its IR node."""
    node: Any = model
    if "." not in key and key in STACK_KEYS:
        node = model.decoder if model.decoder is not None else model.encoder
    for part in key.split("."):
        node = getattr(node, part, None) if node is not None else None
    return node


def config_values(family: FamilyEntry, model) -> dict[str, Any]:
    """The config attributes the family's spec map reads directly (a `Key`, a dropout `rate`, an
    activation table: any value with a `back`), from the model's values of those keys; the family's
    `config_of` gives the rest. One fact in one place: the table says which attribute is which key."""
    values: dict[str, Any] = {}
    for key, value in family.spec.items():
        back = getattr(value, "back", None)
        found = spec_value(model, key) if back is not None else None
        if found is not None:
            values.update(back(found))
    return values


def special_ids(model, *extra: str) -> dict[str, Any]:
    """pad/bos/eos ids of the spec's vocabulary (attncomp.vocab.Specials) as config attributes; `extra`:
    decoder_start_token_id (the vocabulary's start) for an encoder-decoder."""
    vocab = model.vocab
    values = dict(pad_token_id=vocab.pad, bos_token_id=vocab.bos, eos_token_id=vocab.eos)
    if "decoder_start_token_id" in extra:
        values["decoder_start_token_id"] = vocab.start if vocab.start is not None else vocab.bos
    return values


# --- config helpers the tables share -----------------------------------------------------------


def rope(config, fraction: float | None = None) -> str:
    """`rope(base, fraction, scaling)` from transformers' rope_parameters (rope_theta moved there in 5.x)."""
    params = getattr(config, "rope_parameters", None) or {}
    base = float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))
    if fraction is None:
        fraction = float(params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0)))
    parts = [f"base = {base!r}"] + ([f"fraction = {float(fraction)!r}"] if fraction != 1.0 else [])
    scaling = rope_scaling(config, params)
    return f"rope({', '.join(parts + ([f'scaling = {scaling}'] if scaling else []))})"


SCALINGS = ("linear", "dynamic", "llama3", "yarn", "longrope")  # the rope_type values with a scaling choice


def _args(kind: str, values: dict) -> str:
    return f"{kind}(" + ", ".join(f"{k} = {_text(v)}" for k, v in values.items()) + ")"


def rope_scaling(config, params: dict) -> str | None:
    """The spec's scaling choice for one rope_parameters dict (None for the default rotation), read with
    transformers' meanings (modeling_rope_utils): dynamic's original length is max_position_embeddings;
    YaRN's factor defaults to max_position_embeddings / original_max_position_embeddings, its betas to
    32 and 1, and its attention factor is mscale / mscale_all_dim's ratio where both are set (unset: the
    spec's default, 0.1 ln(factor) + 1). LongRoPE's factor, where unset, is max_position_embeddings /
    original_max_position_embeddings (Phi-3's), and 1 where that is below 1 (transformers' attention factor
    is 1 for any factor up to 1)."""
    kind = params.get("rope_type", "default")
    if kind == "default":
        return None
    factor = params.get("factor")
    if kind == "linear":
        return _args(kind, {"factor": float(factor)})
    if kind == "dynamic":
        return _args(kind, {"factor": float(factor), "original_max_len": int(config.max_position_embeddings)})
    original = int(params["original_max_position_embeddings"])
    if kind == "llama3":
        return _args(kind, {"factor": float(factor), "low_freq_factor": float(params["low_freq_factor"]),
                            "high_freq_factor": float(params["high_freq_factor"]), "original_max_len": original})
    factor = float(factor) if factor is not None else config.max_position_embeddings / original
    if kind == "longrope":
        values = {"short_factor": params["short_factor"], "long_factor": params["long_factor"],
                  "original_max_len": original, "factor": max(factor, 1.0)}
        if params.get("attention_factor") is not None:
            values["attention_factor"] = float(params["attention_factor"])
        return _args(kind, values)
    values = {"factor": factor, "original_max_len": original, "beta_fast": float(params.get("beta_fast") or 32),
              "beta_slow": float(params.get("beta_slow") or 1)}
    attention = params.get("attention_factor")
    if attention is None and params.get("mscale") and params.get("mscale_all_dim"):
        def mscale(scale: float, m: float) -> float:  # transformers' get_mscale, formula for formula
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
        attention = float(mscale(factor, params["mscale"]) / mscale(factor, params["mscale_all_dim"]))
    if attention is not None:
        values["attention_factor"] = float(attention)
    values["truncate"] = bool(params.get("truncate", True))
    return _args(kind, values)


def unsupported_scaling(params: dict) -> str | None:
    """What a rope_parameters dict asks that no scaling choice gives, or None."""
    kind = params.get("rope_type", "default")
    if kind != "default" and kind not in SCALINGS:
        return f"rope_type {kind!r} (attncomp's rotary scalings: {', '.join(SCALINGS)})"
    if kind == "longrope":
        for key in ("short_factor", "long_factor"):
            value = params.get(key)
            if not isinstance(value, list) or not value or \
                    any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value):
                return f"rope_type 'longrope' with {key} {json.dumps(value)[:40]} (not a list of numbers)"
    factor = params.get("factor")
    if kind == "default" or factor is None:
        return None
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        return f"rope_type {kind!r} with factor {json.dumps(factor)[:40]} (not a number)"
    return f"rope_type {kind!r} with factor {factor!r} (below 1)" if not factor >= 1 else None


def scaling_parameters(rope, max_len: int = 4096) -> tuple[dict, int]:
    """The way back: (rope_parameters, max_position_embeddings) of a spec's `rope(...)` (config_of)."""
    params: dict = {"rope_type": "default", "rope_theta": rope.base}
    scaling = rope.scaling
    if scaling is None:
        return params, max_len
    params["rope_type"] = scaling.kind
    values = {k: list(v) if isinstance(v, tuple) else v
              for k, v in scaling.model_dump().items() if k != "kind" and v is not None}
    original = values.pop("original_max_len", None)
    if scaling.kind == "dynamic":
        return {**params, **values}, original
    if original is not None:
        values["original_max_position_embeddings"] = original
    if scaling.kind in ("yarn", "longrope"):
        max_len = int(original * scaling.factor)  # transformers checks factor against this ratio
    return {**params, **values}, max_len


def head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def layer_kinds(config) -> set[str]:
    return set(getattr(config, "layer_types", None) or ())


def window(config) -> int | None:
    """Sliding-window attention: HF lets query i see keys j with i - j < W; attncomp's local(window = r)
    in a decoder lets it see i - j <= r; so r = W - 1."""
    size = getattr(config, "sliding_window", None)
    uses = "sliding_attention" in layer_kinds(config) or (
        not layer_kinds(config) and getattr(config, "use_sliding_window", True))
    return size - 1 if size and uses else None


def attention(config) -> str:
    r = window(config)
    return f"local(window = {r})" if r is not None else "scaled_dot"


# --- weights ---------------------------------------------------------------------------------------


def _rename(family: FamilyEntry, key: str) -> str | None:
    if any(re.fullmatch(pattern, key) for pattern in family.dropped):
        return None
    for pattern, replacement in family.renames:
        renamed, hits = re.subn(f"^{pattern}$", replacement, key)
        if hits:
            return renamed
    raise UsageError(f"attncomp does not know the {family.label} tensor {key[:120]!r}")


def _known(family: FamilyEntry, key: str, aliases: set[str]) -> bool:
    return key in aliases or any(re.fullmatch(p, key) for p in family.dropped) or \
        any(re.fullmatch(p, key) for p, _ in family.renames)


def normalized(family: FamilyEntry, config, hf: State) -> State:
    """Names as transformers loads them: TF-era `gamma`/`beta` are weight/bias, and a checkpoint of the bare
    model (GPT-2's `h.0...`, no `transformer.`) gets the base-model prefix back."""
    aliases = {name for names in family.embeddings(config).values() for name in names}
    out = {}
    for key, tensor in hf.items():
        key = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key))
        if family.prefix and not _known(family, key, aliases) and _known(family, f"{family.prefix}.{key}", aliases):
            key = f"{family.prefix}.{key}"
        out[key] = tensor
    return out


def convert(family: FamilyEntry, config, hf: State) -> State:
    """An HF state dict -> attncomp's canonical names: embeddings, renames, then the transforms."""
    hf = normalized(family, config, hf)
    out: State = {}
    taken: set[str] = set()
    for ours, candidates in family.embeddings(config).items():
        found = [name for name in candidates if name in hf]
        if not found:
            raise UsageError(f"the {family.label} weights have no {candidates[0]}")
        out[ours] = hf[found[0]]
        taken.update(candidates)
    for key, tensor in hf.items():
        if key in taken:
            continue
        name = _rename(family, key)
        if name is not None:
            out[name] = tensor
    for transform in family.transforms:
        try:
            out = transform.apply(out, config)
        except (RuntimeError, IndexError, ValueError) as err:  # a tensor of another shape than its config's
            text = " ".join(str(err).split())[:200] or type(err).__name__
            raise UsageError(f"the {family.label} weights do not fit the spec of its config ({transform.name}: "
                             f"{text})") from None
    return out


def _wide(*tensors: torch.Tensor) -> torch.dtype:
    """The dtype a fold computes in: the widest of its inputs, at least float32."""
    return torch.promote_types(torch.float32, torch.promote_types(*(t.dtype for t in tensors))) \
        if len(tensors) > 1 else torch.promote_types(torch.float32, tensors[0].dtype)


def transpose(pattern: str) -> Transform:
    """GPT-2's Conv1D stores (in, out): nn.Linear's weight is its transpose."""
    def apply(state: State, config) -> State:
        return {k: (v.t().contiguous() if re.fullmatch(pattern, k) else v) for k, v in state.items()}
    return Transform(f"transpose {pattern}", apply, apply)


def split_qkv(layout: str, groups: Callable[[Any], int] | None = None) -> Transform:
    """`...qkv_proj.{weight,bias}` -> q_proj, k_proj, v_proj. Layouts: `concat` ([q; k; v] along the output,
    GPT-2's c_attn; with `groups`, k and v are `groups(config)` heads wide, Phi-3's qkv_proj), `per_head`
    ((heads, 3, d_k): each head's q, k, v together, GPT-NeoX's and BLOOM's query_key_value),
    `grouped` ((groups, heads / groups + 2, d_k): each kv group's queries, then its key and value, Falcon's
    query_key_value; `groups(config)` is the number of kv heads)."""
    def parts_of(tensor: torch.Tensor, config) -> list[torch.Tensor]:
        rest = tensor.shape[1:]
        if layout == "concat" and groups is None:
            return list(tensor.chunk(3, dim=0))
        if layout == "concat":  # q of heads * d_k rows, then k and v of groups(config) * d_k rows each (Phi-3's)
            kv = groups(config) * (tensor.shape[0] // (config.num_attention_heads + 2 * groups(config)))
            return list(tensor.split([tensor.shape[0] - 2 * kv, kv, kv], dim=0))
        if layout == "grouped":
            g = groups(config)
            q = config.num_attention_heads // g
            blocks = tensor.reshape(g, q + 2, -1, *rest)
            return [blocks[:, :q].reshape(-1, *rest), blocks[:, q].reshape(-1, *rest),
                    blocks[:, q + 1].reshape(-1, *rest)]
        heads = config.num_attention_heads
        grouped = tensor.reshape(heads, 3, -1, *rest)
        return [grouped[:, i].reshape(-1, *rest) for i in range(3)]

    def fuse(parts: list[torch.Tensor], config) -> torch.Tensor:
        rest = parts[0].shape[1:]
        if layout == "concat":
            return torch.cat(parts, dim=0)
        if layout == "grouped":
            g = groups(config)
            q = config.num_attention_heads // g
            blocks = [parts[0].reshape(g, q, -1, *rest), parts[1].reshape(g, 1, -1, *rest),
                      parts[2].reshape(g, 1, -1, *rest)]
            return torch.cat(blocks, dim=1).reshape(-1, *rest)
        heads = config.num_attention_heads
        return torch.stack([p.reshape(heads, -1, *rest) for p in parts], dim=1).reshape(-1, *rest)

    def apply(state: State, config) -> State:
        out = {}
        for key, tensor in state.items():
            head, sep, leaf = key.rpartition(".qkv_proj.")
            if not sep:
                out[key] = tensor
                continue
            parts = parts_of(tensor, config)
            for name, part in zip("qkv", parts):
                out[f"{head}.{name}_proj.{leaf}"] = part.contiguous()
        return out

    def invert(state: State, config) -> State:
        out = {}
        for key, tensor in state.items():
            head, sep, leaf = key.rpartition(".self_attn.q_proj.")
            if sep:
                head = head + ".self_attn"
                parts = [state[f"{head}.{name}_proj.{leaf}"] for name in "qkv"]
                out[f"{head}.qkv_proj.{leaf}"] = fuse(parts, config).contiguous()
            elif not re.search(r"\.self_attn\.[kv]_proj\.", key):
                out[key] = tensor
        return out
    return Transform(f"split fused QKV ({layout})", apply, invert)


def rename_module(placeholder: str, target: Callable[[Any], str | None]) -> Transform:
    """A layer module whose attncomp name depends on the config: `decoder.layers.N.<placeholder>.*` ->
    `decoder.layers.N.<target(config)>.*` (Falcon's input_layernorm is the one `norm` of a parallel block,
    `self_attn_norm` of a sequential one); None: the config has no such module."""
    def swap(state: State, old: str | None, new: str | None) -> State:
        if not old or not new:
            return state
        pattern = re.compile(rf"^(decoder\.layers\.\d+)\.{re.escape(old)}\.")
        return {pattern.sub(rf"\1.{new}.", k): v for k, v in state.items()}

    def apply(state: State, config) -> State:
        return swap(state, placeholder, target(config))

    def invert(state: State, config) -> State:
        return swap(state, target(config), placeholder)
    return Transform(f"rename {placeholder} by the config", apply, invert)


def slice_rows(name: str, offset: Callable[[Any], int]) -> Transform:
    """Drop a learned position table's first rows (BART's offset 2; RoBERTa's padding_idx + 1)."""
    def apply(state: State, config) -> State:
        if name in state:
            state[name] = state[name][offset(config):]
        return state

    def invert(state: State, config) -> State:  # the rows import dropped come back as zeros
        if name in state:
            table = state[name]
            state[name] = torch.cat([table.new_zeros(offset(config), *table.shape[1:]), table])
        return state
    return Transform(f"slice position offset of {name}", apply, invert)


def add_row(target: str, source: str, rows: Callable[[Any], int], row: int = 0) -> Transform:
    """Fold row `row` of `source` into every row of `target` and drop `source` (BERT's token type 0)."""
    def apply(state: State, config) -> State:
        table, extra = state[target], state.pop(source)
        dtype = _wide(table, extra)
        state[target] = (table.to(dtype) + extra[row].to(dtype))
        return state

    def invert(state: State, config) -> State:  # the folded table stays; the other table is zero
        table = state[target]
        state[source] = table.new_zeros(rows(config), table.shape[-1])
        return state
    return Transform(f"fold {source} row {row} into {target}", apply, invert)


def drop(name: str, when: Callable[[Any], bool], compute: Callable[[Any], torch.Tensor] | None = None) -> Transform:
    """A tensor attncomp computes instead where the config says so (DistilBERT's sinusoidal table)."""
    def apply(state: State, config) -> State:
        if when(config):
            state.pop(name, None)
        return state

    def invert(state: State, config) -> State:
        if when(config) and compute is not None:
            state[name] = compute(config)
        return state
    return Transform(f"drop {name} where computed", apply, invert)


def flatten(name: str) -> Transform:
    """Marian's and BART's final_logits_bias is (1, V); attncomp's output_bias is (V,)."""
    def apply(state: State, config) -> State:
        if name in state:
            state[name] = state[name].reshape(-1)
        return state

    def invert(state: State, config) -> State:
        if name in state:
            state[name] = state[name].reshape(1, -1)
        return state
    return Transform(f"flatten {name}", apply, invert)


def fill(names: Callable[[Any], dict[str, tuple[float, int]]]) -> Transform:
    """Constant tensors HF does not store (a non-affine norm is one with weight 1, bias 0)."""
    def apply(state: State, config) -> State:
        dtype = next(iter(state.values())).dtype
        for name, (value, width) in names(config).items():
            state[name] = torch.full((width,), value, dtype=dtype)
        return state

    def invert(state: State, config) -> State:  # a constant trained away from its value has nowhere to go
        for name, (value, _) in names(config).items():
            tensor = state.pop(name, None)
            if tensor is not None and not bool((tensor == value).all()):
                raise UsageError(f"{name} is no longer {value:g} everywhere: the Hugging Face model has no such "
                                 "parameter (it is a constant there)")
        return state
    return Transform("fold constants", apply, invert)


def vocabulary(size: int, specials) -> str:
    """`shared(size, pad = ..., ...)`: a shared vocabulary declaring the model's own special ids (attncomp.
    vocab.Specials), each role written only where it is not the spec's default."""
    roles = []
    for role in nodes.ROLES:
        value = getattr(specials, role)
        derived = {"mask": specials.sep, "start": specials.bos}  # what an unset mask and start mean
        default = derived[role] if role in derived else nodes.Shared.model_fields[role].default
        if value != default:
            roles.append(f"{role} = {'none' if value is None else value}")
    return f"shared({', '.join([str(size), *roles])})"


# --- the way back (export) ---------------------------------------------------------------------------


def origins(family: FamilyEntry, config, hf_names: list[str]) -> dict[str, list[str]]:
    """attncomp's name before the transforms -> the HF names it comes from (several for a tied group):
    the renames and aliases of `convert`, read backwards over the names a transformers model has."""
    out: dict[str, list[str]] = {}
    taken: set[str] = set()
    for ours, candidates in family.embeddings(config).items():
        out[ours] = [name for name in candidates if name in hf_names]
        taken.update(candidates)
    for key in hf_names:
        if key not in taken:
            name = _rename(family, key)
            if name is not None:
                out.setdefault(name, []).append(key)
    return out


def revert(family: FamilyEntry, config, state: State) -> State:
    """attncomp's state dict -> names before the transforms (each transform inverted, last first)."""
    state = dict(state)
    for transform in reversed(family.transforms):
        state = transform.invert(state, config)
    return state


# --- transforms of the families added with layer kinds and T5's buckets (issue 27) --------------------


def split_rows(part: str, into: tuple[str, ...]) -> Transform:
    """A fused projection `...<part>.weight` (or bias) whose output rows are `into`'s parts in order, each
    as wide: ModernBERT's Wi is GeGLU's activated input then its multiplier (attncomp's gate, then fc1)."""
    def apply(state: State, config) -> State:
        out = {}
        for key, tensor in state.items():
            head, sep, leaf = key.rpartition(f".{part}.")
            if not sep:
                out[key] = tensor
                continue
            for name, chunk in zip(into, tensor.chunk(len(into), dim=0)):
                out[f"{head}.{name}.{leaf}"] = chunk.contiguous()
        return out

    def invert(state: State, config) -> State:
        out = {}
        for key, tensor in state.items():
            head, sep, leaf = key.rpartition(f".{into[0]}.")
            if sep:
                out[f"{head}.{part}.{leaf}"] = torch.cat([state[f"{head}.{name}.{leaf}"] for name in into]).contiguous()
            elif not any(f".{name}." in key for name in into[1:]):
                out[key] = tensor
        return out
    return Transform(f"split {part} into {', '.join(into)}", apply, invert)


def output_of(embed: str, tied: Callable[[Any], bool]) -> Transform:
    """T5's lm_head in transformers 5: tied to the shared embedding unless the file holds one that differs.
    Where the spec ties them (`tie = all`) an lm_head the file has must be the embedding (else one line);
    where it does not (`tie = inputs`), an lm_head the file lacks is the embedding's copy."""
    def apply(state: State, config) -> State:
        head = state.pop("output.weight", None)
        if tied(config):
            if head is not None and not torch.equal(head, state[embed]):
                raise UsageError("the weights hold an lm_head.weight that differs from shared.weight, and the "
                                 "config ties them (no tie_word_embeddings = false)")
        else:
            state["output.weight"] = state[embed].clone() if head is None else head
        return state

    def invert(state: State, config) -> State:
        if tied(config):
            state["output.weight"] = state[embed]
        return state
    return Transform("lm_head: the embedding where tied", apply, invert)


def pairs_to_halves(names: tuple[str, ...], heads: Callable[[Any], int], rotated: Callable[[Any], int]) -> Transform:
    """GPT-J rotates pairs of neighbouring dims (2i, 2i + 1) of the first r = `rotated(config)` dims of each
    head (rotate_every_two); attncomp's rope rotates (i, i + r/2) (rotate_half) at the same frequency. The
    output rows of each head of the projections ending with `names` (q_proj, k_proj) are reordered so that
    pair i's dims become i and i + r/2: the even dims first, then the odd ones, the unrotated dims after.
    q and k take the same order, so q . k is unchanged. The inverse (export) is the inverse permutation;
    both only move rows, so every tensor comes back bit for bit."""
    def order(config, size: int) -> torch.Tensor:
        r = rotated(config)
        width = size // heads(config)
        return torch.tensor(list(range(0, r, 2)) + list(range(1, r, 2)) + list(range(r, width)))

    def permute(state: State, config, inverse: bool) -> State:
        out = {}
        for key, tensor in state.items():
            if key.rpartition(".")[0].endswith(names):
                index = order(config, tensor.shape[0])
                if inverse:
                    index = torch.argsort(index)
                rest = tensor.shape[1:]
                tensor = tensor.reshape(heads(config), -1, *rest)[:, index].reshape(tensor.shape).contiguous()
            out[key] = tensor
        return out

    return Transform("rotary pairs to halves", lambda state, config: permute(state, config, False),
                     lambda state, config: permute(state, config, True))
