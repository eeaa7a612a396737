"""`attncomp import DIR`: a Hugging Face model directory (save_pretrained's layout) -> an attncomp spec and
checkpoint, for every family of attncomp.interop.families, dispatched on config.json's model_type.

    DIR/config.json                          read through the family's transformers config class
    DIR/model.safetensors                    the weights, or
    DIR/model.safetensors.index.json         sharded: its weight_map names the shards (files of DIR)
    DIR/pytorch_model.bin                    a pickle: only with allow_pickle, torch.load(weights_only=True)
    DIR/tokenizer.json                       the tokenizer (Marian: source.spm, target.spm, vocab.json)

Only local files are read; no remote code is run. Weights keep their stored dtype (bf16 stays bf16);
a tensor import folds two into (BERT's token type into positions) is computed in at least float32.
The 4 GiB build guard does not apply: the weights are there, so the spec is checked on the meta device.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from attncomp import ir
from attncomp.errors import AttncompError, UsageError
from attncomp.files import present, read_json
from attncomp.interop import families, hf_tokens, mapping, require

PICKLE_HINT = ("pytorch_model.bin is a pickle, and unpickling a file can run code: convert it to "
               "model.safetensors, or pass --allow-pickle to read it (with torch.load(weights_only=True))")


@dataclass
class Imported:
    spec_text: str  # the spec file written beside the checkpoint
    spec: object  # its ir Spec
    weights: dict[str, torch.Tensor]  # attncomp's canonical names, stored dtypes
    tokenizers: dict[str, bytes]  # "src"/"tgt" -> the tokenizer each side reads
    rows: list[int] | None = None  # attncomp id -> HF id, where they differ (shared vocabulary)
    family: str = ""
    manifest: dict = field(default_factory=dict)  # what the checkpoint's data field records
    side_rows: dict[str, list[int]] = field(default_factory=dict)  # Marian: "src"/"tgt" -> that side's rows


def is_file(path: Path) -> bool:
    """Whether DIR has this file (attncomp.files.present: something else in its place is refused)."""
    return present(path, what="model directory's file")


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split())
    return (text or type(err).__name__)[:200]


def read_config(directory: Path) -> tuple[mapping.FamilyEntry, object]:
    """The family and transformers config object of DIR; anything else is one line saying why not."""
    path = directory / "config.json"
    if not is_file(path):
        raise UsageError(f"{directory} is not a Hugging Face model directory (no config.json)")
    raw = read_json(path, what="JSON file", error=UsageError)
    kind = raw.get("model_type") if isinstance(raw, dict) else None
    if not isinstance(kind, str):
        what = "no model_type" if isinstance(raw, dict) else f"JSON {type(raw).__name__}, not an object"
        raise UsageError(f"{path}: {what}; attncomp imports {', '.join(families.IMPORTED)}")
    if kind in families.REFUSED:
        raise UsageError(f"attncomp cannot import a {kind!r} model: {families.REFUSED[kind]} has no spec equivalent")
    if kind not in families.IMPORTED:
        raise UsageError(f"{path} describes a {kind[:40]!r} model; attncomp imports {', '.join(families.IMPORTED)}")
    family = families.IMPORTED[kind]
    transformers = require("transformers", "attncomp import")
    try:
        config = getattr(transformers, family.config_class).from_dict(raw)
    except Exception as err:  # transformers validates the fields (its own exception classes)
        raise UsageError(f"{path} is not a valid {family.config_class} ({_one_line(err)})") from None
    _check_layer_types(config, path)
    return family, config


LAYER_TYPES = ("full_attention", "sliding_attention")  # the kinds of layer_types the families read


def _check_layer_types(config, path: Path) -> None:
    """Every entry of layer_types is a kind attncomp reads: another (Llama 4's chunked_attention, a linear
    attention) was read as a sliding window; nothing is guessed (docs/interop.md)."""
    kinds = getattr(config, "layer_types", None) or ()
    unknown = next((kind for kind in kinds if kind not in LAYER_TYPES), None)
    if unknown is not None:
        raise UsageError(f"{path}: layer_types has {json.dumps(unknown, default=str)[:60]}, a kind of layer attncomp "
                         f"does not import (it reads {' and '.join(LAYER_TYPES)})")


def spec_of(family: mapping.FamilyEntry, config, directory: Path, name: str | None = None,
            extra: dict | None = None) -> tuple[str, object]:
    """The spec text of a config and its IR; a config the language rejects is one line."""
    try:
        text = mapping.spec_text(family, config, name, extra)
        return text, ir.load_flat(text, f"<{family.model_type} config>")
    except UsageError:
        raise
    except (AttncompError, TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as err:
        # ArithmeticError: a family's value computed from sizes of 0 (a head size of n_embd // 0)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"{directory}/config.json does not give a valid spec: {first[:200]}") from None


# --- weights ---------------------------------------------------------------------------------------


def _safetensors(path: Path, names: set[str] | None = None) -> dict[str, torch.Tensor]:
    """The tensors of one safetensors file (those in `names`, or all), in their stored dtype."""
    safe_open = require("safetensors", "attncomp import").safe_open
    try:
        with safe_open(str(path), framework="pt") as f:
            keys = list(f.keys())
            missing = sorted((names or set()) - set(keys))
            if missing:
                raise UsageError(f"{path} has no tensor {missing[0][:120]!r} (model.safetensors.index.json says so)")
            return {k: f.get_tensor(k) for k in keys if names is None or k in names}
    except UsageError:
        raise
    except Exception as err:  # a bad header, a truncated file: safetensors' own errors
        raise UsageError(f"{path} is not a readable safetensors file ({_one_line(err)})") from None


def _shards(directory: Path) -> dict[str, set[str]]:
    """model.safetensors.index.json's weight_map, grouped by shard (each a plain file name of DIR)."""
    path = directory / "model.safetensors.index.json"
    index = read_json(path, what="JSON file", error=UsageError)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise UsageError(f"{path}: no weight_map (tensor name -> shard file)")
    shards: dict[str, set[str]] = {}
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or "/" in shard or "\\" in shard or shard.startswith(".") or not shard:
            raise UsageError(f"{path}: shard {str(shard)[:80]!r} is not a file name in {directory}")
        shards.setdefault(shard, set()).add(name)
    for shard in shards:
        if not is_file(directory / shard):
            raise UsageError(f"{path} names the shard {shard!r}, which {directory} does not have")
    return shards


def read_weights(directory: Path, allow_pickle: bool = False) -> dict[str, torch.Tensor]:
    """The HF state dict of DIR: safetensors (one file or sharded), or a pickle only when allowed."""
    if is_file(directory / "model.safetensors.index.json"):
        state: dict[str, torch.Tensor] = {}
        for shard, names in _shards(directory).items():
            state.update(_safetensors(directory / shard, names))
        return state
    if is_file(directory / "model.safetensors"):
        return _safetensors(directory / "model.safetensors")
    if is_file(directory / "pytorch_model.bin"):
        if not allow_pickle:
            raise UsageError(f"{directory} has no model.safetensors; {PICKLE_HINT}")
        try:
            state = torch.load(directory / "pytorch_model.bin", map_location="cpu", weights_only=True)
        except Exception as err:
            raise UsageError(f"{directory}/pytorch_model.bin is not readable ({_one_line(err)})") from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise UsageError(f"{directory}/pytorch_model.bin is not a state dict (name -> tensor)")
        return state
    raise UsageError(f"{directory} has no weights (model.safetensors, model.safetensors.index.json, "
                     "or pytorch_model.bin)")


def check_weights(spec, weights: dict[str, torch.Tensor], what: str) -> None:
    """Every tensor the spec's model has, of its shape, and no other: on the meta device (no memory)."""
    from attncomp.compiler import compile_spec

    expected = {k: tuple(v.shape) for k, v in compile_spec(spec, passes=(), device="meta").state_dict().items()}
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    if missing or extra:
        which = f"no {missing[0]}" if missing else f"an unexpected {extra[0]}"
        raise UsageError(f"the {what} weights do not fit the spec of its config: {which}")
    for name, shape in expected.items():
        if tuple(weights[name].shape) != shape:
            raise UsageError(f"the {what} weights do not fit the spec of its config: {name} has shape "
                             f"{tuple(weights[name].shape)}, the spec needs {shape}")
        if not weights[name].is_floating_point():
            raise UsageError(f"the {what} weights: {name} is {weights[name].dtype}, not floating point")


# --- the import --------------------------------------------------------------------------------------


def import_directory(directory: str | Path, allow_pickle: bool = False) -> Imported:
    """Read DIR and map it onto attncomp: every family but Marian, which attncomp.interop.importing
    sends to attncomp.interop.marian_import (it reads Marian's own tokenizers). The spec's vocabulary
    declares the model's own special ids, so no vocabulary rows move."""
    directory = Path(directory)
    family, config = read_config(directory)
    if family is families.MARIAN:
        raise UsageError(f"{directory}: a Marian model is imported by attncomp.interop.importing")
    _, plain = spec_of(family, config, directory)  # which stacks it has
    tokenizer, specials = hf_tokens.tokenizer_record(directory, family, config, plain.model.encoder is None,
                                                     family.label, plain.model.decoder is None)
    text, spec = spec_of(family, config, directory, extra={"vocab": mapping.vocabulary(config.vocab_size, specials)})
    weights = mapping.convert(family, config, read_weights(directory, allow_pickle))
    check_weights(spec, weights, family.label)
    manifest = {"family": family.model_type, "tokenizer": hf_tokens.tokenizer_name(directory, family),
                "ids": "Hugging Face's", "config": read_json(directory / "config.json", what="JSON file",
                                                             error=UsageError)}
    generation = hf_tokens.generation_config(directory)
    if generation is not None:  # export writes it back
        manifest["generation"] = generation
    return Imported(text, spec, weights, {"src": tokenizer, "tgt": tokenizer}, None, family.model_type, manifest)


def write(imported: Imported, out: Path, source: Path) -> list[Path]:
    """OUT/model.attn and OUT/checkpoint.pt (an "average" checkpoint, which translate and eval read)."""
    from attncomp import __version__, checkpoint

    tokenizers = {side: torch.frombuffer(bytearray(b), dtype=torch.uint8) for side, b in imported.tokenizers.items()}
    header = checkpoint.Header(attncomp=__version__, kind="average", spec=ir.to_text(imported.spec),
                               spec_hash=ir.spec_hash(imported.spec), tokenizers=tokenizers,
                               data=json.dumps({"imported": {**imported.manifest, "from": str(source)}}),
                               step=0, position=(0, 0), metrics={})
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.attn").write_text(imported.spec_text, encoding="utf-8")
    checkpoint.save(checkpoint.Checkpoint(header, model=dict(imported.weights)), out / "checkpoint.pt")
    return [out / "model.attn", out / "checkpoint.pt"]
