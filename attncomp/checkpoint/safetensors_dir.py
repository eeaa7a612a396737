"""The safetensors export: a directory a model loads from without unpickling anything.

    DIR/model.safetensors   the weights (canonical state-dict names), safetensors format
    DIR/spec.attn           the resolved spec, canonical flat text (as stored in the checkpoint)
    DIR/src.model           the source sentencepiece model
    DIR/tgt.model           the target sentencepiece model
    DIR/attncomp.json       format tag and version, spec hash, step, metrics, the data manifest

`read` turns such a directory back into a checked `Checkpoint` (kind "average"), so
`attncomp.compile(DIR)`, `translate DIR` and `eval DIR` treat it as any checkpoint. Only JSON, text,
sentencepiece protobufs and safetensors are read: no pickle anywhere.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from attncomp.checkpoint.schema import FORMAT, VERSION, Checkpoint, CheckpointError, Header, check_model, header_from
from attncomp.files import check_regular, parse_json, read_json, read_regular, write_atomically
from attncomp.optional import require

EXPORT_FORMAT = "attncomp-safetensors"
TORCH_EXPORT_FORMAT = "attncomp-torch-export"  # attncomp.interop.torch_export's directories: not read here
EXPORT_VERSION = 1
WEIGHTS, SPEC, META = "model.safetensors", "spec.attn", "attncomp.json"
TOKENIZER_FILES = {"src": "src.model", "tgt": "tgt.model"}
MAX_SIDE_FILE_BYTES = 64 << 20  # attncomp.json, spec.attn and each sentencepiece model


def is_export(path: str | Path) -> bool:
    """A directory written by `write` (it has the metadata file)."""
    try:
        return Path(path).is_dir() and (Path(path) / META).is_file()
    except (OSError, ValueError):  # spec text handed to compile: a name too long, a NUL byte
        return False


def write(found: Checkpoint, out: Path) -> list[Path]:
    """Export a loaded checkpoint to `out` (created); returns the files written."""
    st = require("safetensors.torch", "--format safetensors")
    out.mkdir(parents=True, exist_ok=True)
    header = found.header
    weights = {name: t.detach().to("cpu").contiguous().clone() for name, t in found.model.items()}
    meta = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "attncomp": header.attncomp,
            "spec_hash": header.spec_hash, "step": header.step, "metrics": dict(header.metrics),
            "averaged": list(header.averaged), "data": parse_json(header.data, "the checkpoint's data")}
    written = [out / WEIGHTS, out / SPEC, out / META]
    write_atomically(out / WEIGHTS, st.save(weights, metadata={"format": EXPORT_FORMAT}))
    write_atomically(out / SPEC, header.spec)
    for side, name in TOKENIZER_FILES.items():
        write_atomically(out / name, header.tokenizers[side].numpy().tobytes())
        written.append(out / name)
    write_atomically(out / META, json.dumps(meta, indent=2) + "\n")
    return written


def _read_text(path: Path) -> str:
    try:
        return read_regular(path, limit=MAX_SIDE_FILE_BYTES, what="spec file", error=CheckpointError).decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(f"{path} is not UTF-8 text") from None


def _meta(directory: Path) -> dict:
    meta = read_json(directory / META, what="metadata file", limit=MAX_SIDE_FILE_BYTES, error=CheckpointError)
    if isinstance(meta, dict) and meta.get("format") == TORCH_EXPORT_FORMAT:
        raise CheckpointError(f"{directory} is a torch.export export: its programs load with "
                              "attncomp.interop.torch_export.load, not as a checkpoint")
    if not isinstance(meta, dict) or meta.get("format") != EXPORT_FORMAT:
        raise CheckpointError(f"{directory / META}: not an attncomp safetensors export")
    if meta.get("version") != EXPORT_VERSION:
        raise CheckpointError(f"{directory / META}: version {meta.get('version')!r}; this attncomp reads "
                              f"version {EXPORT_VERSION}")
    return meta


def _weights(path: Path, model: bool) -> dict:
    st = require("safetensors.torch", f"reading {path}")
    check_regular(path, what="safetensors file", error=CheckpointError)  # safetensors maps it by name
    try:
        if not model:  # names and shapes only: the header's check sees a non-empty dict, the size guard counts
            from safetensors import safe_open  # an optional dependency, here since require() above

            with safe_open(str(path), framework="pt") as f:
                return {name: torch.empty(f.get_slice(name).get_shape(), device="meta") for name in f.keys()}
        return st.load_file(str(path))
    except Exception as err:  # missing, truncated or not safetensors
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{path} is not a readable safetensors file ({reason[:160]})") from None


def read(directory: str | Path, *, model: bool = True) -> Checkpoint:
    """The exported model as a checked Checkpoint (every field, the spec hash, finite weights)."""
    directory = Path(directory)
    meta = _meta(directory)
    spec = _read_text(directory / SPEC)
    if hashlib.sha256(spec.encode("utf-8")).hexdigest() != meta.get("spec_hash"):
        raise CheckpointError(f"{directory / SPEC} does not match the spec hash in {directory / META}")
    tokenizers = {}
    for side, name in TOKENIZER_FILES.items():
        data = read_regular(directory / name, limit=MAX_SIDE_FILE_BYTES, what="sentencepiece model",
                            error=CheckpointError)
        if not data:
            raise CheckpointError(f"{directory / name} is empty: not a sentencepiece model")
        tokenizers[side] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    payload = {"format": FORMAT, "version": VERSION, "attncomp": meta.get("attncomp"), "kind": "average",
               "spec": spec, "spec_hash": meta.get("spec_hash"), "tokenizers": tokenizers,
               "data": json.dumps(meta.get("data", {})), "step": meta.get("step"), "position": [0, 0],
               "metrics": meta.get("metrics", {}), "sharded": False, "averaged": meta.get("averaged", [])}
    header: Header = header_from(directory, payload)
    weights = check_model(directory / WEIGHTS, _weights(directory / WEIGHTS, model), values=model)
    return Checkpoint(header, model=weights if model else {}, path=directory,
                      stored=sum(t.numel() for t in weights.values()))
