"""The torch.export export: the compiled model's decoding entry points as `torch.export` programs.

    DIR/encode.pt2          encode(src) -> memory                 (encoder-decoder, encoder-only)
    DIR/init_cache.pt2      init_cache(src, memory) -> cache      (decoder-only: init_cache(tokens); a prefix LM's
                                                                   encodes the tokens, its prefix, in one step)
    DIR/decode_step.pt2     decode_step(tokens, cache) -> (logits, cache)
    DIR/spec.attn           the resolved spec, canonical flat text (as stored in the checkpoint)
    DIR/src.model           the source sentencepiece model
    DIR/tgt.model           the target sentencepiece model
    DIR/attncomp.json       format tag and version, spec hash, step, metrics, the programs and their inputs

Each program is `torch.export.export` of the entry point's graph after the default passes (the graph
attncomp itself decodes with: fused attention calls SDPA, which export keeps as one operator), with
the weights inside, saved by `torch.export.save`. Batch, source length and cache length are dynamic
(`torch.export.Dim`); the cache is a flat tuple: the leaves of attncomp.lower.cache's DecodingCache.
`torch.export.load(path).module()` runs a program in plain PyTorch; `load(DIR, trusted=True)` here
gives an object with the compiled model's decoding interface, so `CachedStepper`, `beam_search` and
`Translator` decode through it.

A torch.export directory is code: `torch.export.load` unpickles parts of a program without
`weights_only`, so a crafted `.pt2` runs what it likes. `load` refuses unless the caller says the
directory is trusted, and reads programs only from regular files inside the directory that its
`attncomp.json` (checked by `ExportMeta`) names.
"""

from __future__ import annotations

import hashlib
import json
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

import pydantic
import torch
import torch.utils._pytree as pytree
from torch import nn

from attncomp.checkpoint.safetensors_dir import TORCH_EXPORT_FORMAT as EXPORT_FORMAT
from attncomp.checkpoint.schema import Checkpoint, CheckpointError
from attncomp.errors import UsageError
from attncomp.files import read_json, read_regular, write_atomically
from attncomp.ir import nodes
from attncomp.ir.family import Family, prefix_lm
from attncomp.lower import family_of
from attncomp.lower.cache import KV, DecodingCache, LayerCache
from attncomp.lower.size import load_stored

EXPORT_VERSION = 1
SPEC, META = "spec.attn", "attncomp.json"
TOKENIZER_FILES = {"src": "src.model", "tgt": "tgt.model"}
ENTRIES = ("encode", "init_cache", "decode_step")
MAX_PROGRAM_BYTES = 64 << 30  # a program holds its model's weights: the size limit's 4 GiB estimate, and room
MAX_SIDE_FILE_BYTES = 64 << 20  # spec.attn and the sentencepiece models
UNTRUSTED = ("is a torch.export directory, and loading one runs code (torch.export.load unpickles its "
             "programs without weights_only); load only a directory you trust, with load(DIR, trusted=True)")
EXAMPLE_BATCH, EXAMPLE_SOURCE, EXAMPLE_CACHE = 3, 7, 5  # distinct sizes, none 0 or 1 (export specialises those)


class ExportMeta(pydantic.BaseModel):
    """The fields of `attncomp.json` that `load` reads (`write` adds more, for a reader's information)."""

    model_config = pydantic.ConfigDict(extra="ignore", strict=True)
    format: Literal["attncomp-torch-export"]
    version: Literal[1]
    spec_hash: str
    programs: dict[Literal["encode", "init_cache", "decode_step"], str]

    @pydantic.field_validator("programs")
    @classmethod
    def _inside(cls, programs: dict[str, str]) -> dict[str, str]:
        for file in programs.values():
            if not file or Path(file).name != file or file in (".", ".."):
                raise ValueError(f"program {file!r} is not the name of a file inside the directory")
        return programs


def is_export(path: str | Path) -> bool:
    """A directory written by `write` (its metadata file names this format)."""
    try:
        meta = read_json(Path(path) / META, what="metadata file", limit=1 << 20)
        return isinstance(meta, dict) and meta.get("format") == EXPORT_FORMAT
    except Exception:  # noqa: BLE001 - whatever the file is, it is not this format's
        return False


# --- writing ----------------------------------------------------------------------------------


def _dims() -> dict[str, torch.export.Dim]:
    Dim = torch.export.Dim
    return {"batch": Dim("batch", min=1), "source": Dim("source", min=1), "cache": Dim("cache", min=0)}


def _cache_shapes(cache: DecodingCache, dims: dict) -> tuple:
    """Dynamic dimensions of each tensor of a cache, in the flat order of its leaves (attncomp.lower.cache)."""
    batch = dims["batch"]
    own, memory = {0: batch, 2: dims["cache"]}, {0: batch, 2: dims["source"]}
    shapes = DecodingCache(
        None if cache.padding_mask is None else {0: batch, 3: dims["source"]},
        tuple(LayerCache(None if layer.self_attn is None else KV(own, own),  # None: a layer reading k, v (share_kv)
                         None if layer.cross_attn is None else KV(memory, memory))
              for layer in cache.layers),
        {0: batch})
    return tuple(pytree.tree_leaves(shapes, is_leaf=lambda x: isinstance(x, dict)))


class FlatCache(nn.Module):
    """An entry point of the compiled model whose cache is a flat tuple of tensors, the leaves of its
    DecodingCache in order: what the exported programs take and return (so they run in plain PyTorch,
    with no attncomp type to know)."""

    def __init__(self, model: nn.Module, entry: str, layout: pytree.TreeSpec):
        super().__init__()
        self.model, self.entry, self.layout = model, entry, layout

    def forward(self, *args):
        if self.entry == "decode_step":
            tokens, flat = args
            logits, cache = self.model.decode_step(tokens, pytree.tree_unflatten(list(flat), self.layout))
            return logits, tuple(pytree.tree_leaves(cache))
        out = getattr(self.model, self.entry)(*args)
        return tuple(pytree.tree_leaves(out)) if self.entry == "init_cache" else out


def _examples(compiled) -> dict[str, tuple[tuple, tuple]]:
    """Example inputs and their dynamic shapes, per entry point the model has; and the cache's layout."""
    model, dims = compiled.spec.model, _dims()
    family = family_of(model)
    vocab = model.vocab
    top = vocab.size if isinstance(vocab, nodes.Shared) else min(vocab.src, vocab.tgt)  # ids valid on both sides
    specials = model.specials
    ids = torch.arange(EXAMPLE_BATCH * EXAMPLE_SOURCE) % top
    src = torch.where(torch.isin(ids, torch.tensor(specials.ids())), top - 1, ids).view(EXAMPLE_BATCH, EXAMPLE_SOURCE)
    src[0, -2:] = specials.filler  # padding, so the masks are not all-False constants
    seq = {0: dims["batch"], 1: dims["source"]}
    out = {}
    with torch.no_grad():
        if "encode" in family.entry_names and family.segmented(model, "encode"):  # segment ids: 0, then 1
            segments = (torch.arange(EXAMPLE_SOURCE) >= EXAMPLE_SOURCE // 2).long().expand_as(src).contiguous()
            out["encode"] = ((src, segments), (seq, seq))
        elif "encode" in family.entry_names:
            out["encode"] = ((src,), (seq,))
        if not family.decodes:
            return out, None
        if family.source == "encoded":
            memory = compiled.encode(src)
            out["init_cache"] = ((src, memory), (seq, seq))
            cache = compiled.init_cache(src, memory)
        else:
            out["init_cache"] = ((src,), (seq,))
            cache = compiled.init_cache(src)
        tokens = src[:, :1]
        for _ in range(EXAMPLE_CACHE):
            _, cache = compiled.decode_step(tokens, cache)
        flat, layout = pytree.tree_flatten(cache)
        out["decode_step"] = ((tokens, tuple(flat)), ({0: dims["batch"]}, _cache_shapes(cache, dims)))
    return out, layout


def check_supported(spec: nodes.Spec) -> None:
    """Spec choices whose graphs torch.export refuses, as one clear error before a long trace."""
    decoder = spec.model.decoder
    if decoder is not None and any(isinstance(seen.attention, nodes.Local) for _, seen in decoder.layer_plan()):
        raise UsageError("torch.export cannot export decode_step of a decoder with local attention: a windowed "
                         "layer's cache keeps the last `window` keys, a slice whose size depends on whether the "
                         "cache has reached the window, and one exported graph must serve every cache length")


def programs(compiled) -> dict:
    """torch.export programs of the entry points in ENTRIES that an eval-mode compiled model has."""
    check_supported(compiled.spec)
    found = {}
    examples, layout = _examples(compiled)
    for name, (args, shapes) in examples.items():
        module = FlatCache(compiled, name, layout).eval()
        try:
            found[name] = torch.export.export(module, args, dynamic_shapes={"args": shapes})
        except Exception as err:  # torch.export's errors are pages long: its first line says what
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise UsageError(f"torch.export cannot export {name} of model {compiled.spec.model.name}: "
                             f"{first[:200]}") from None
    return found


def write(found: Checkpoint, out: Path) -> list[Path]:
    """Export a loaded checkpoint's model to `out` (created); returns the files written."""
    from attncomp.compiler import compile_spec
    from attncomp.loading import checked_spec

    compiled = compile_spec(checked_spec(found))
    compiled.load_state_dict(found.model)
    exported = programs(compiled.eval())
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, program in exported.items():
        torch.export.save(program, str(out / f"{name}.pt2"))
        written.append(out / f"{name}.pt2")
    header = found.header
    write_atomically(out / SPEC, header.spec)
    for side, name in TOKENIZER_FILES.items():
        write_atomically(out / name, header.tokenizers[side].numpy().tobytes())
    meta = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "attncomp": header.attncomp,
            "torch": torch.__version__, "spec_hash": header.spec_hash, "step": header.step,
            "metrics": dict(header.metrics), "programs": {name: f"{name}.pt2" for name in exported},
            "cache": _cache_layout(compiled.spec.model),
            "special_ids": compiled.spec.model.specials.tokenizer_roles()}
    write_atomically(out / META, json.dumps(meta, indent=2) + "\n")
    return written + [out / SPEC, *(out / n for n in TOKENIZER_FILES.values()), out / META]


def _cache_layout(model: nodes.ModelSpec) -> str:
    family = family_of(model)
    if not family.decodes:
        return ""
    position = "; then the position of the next token (B,) int64"
    n = model.decoder.share_kv
    own = "self-attention keys, values (B, heads, T, d)" + (
        f" (only layers i with i % {n} == 0: share_kv)" if n > 1 else "")
    if family.source == "prompt":
        prefix = "; init_cache(tokens) encodes the tokens as every row's prefix (mask = prefix), in one step, " \
            "and T starts at their length" if prefix_lm(model) else ""
        return f"per decoder layer ({model.decoder.layers}): {own}" + position + prefix
    return (f"source mask (B, 1, 1, S) bool, True = padding; then per decoder layer ({model.decoder.layers}): "
            f"{own}, cross-attention keys, values (B, heads, S, d)" + position)


# --- reading ----------------------------------------------------------------------------------


@dataclass
class ExportedModel:
    """The exported programs behind the compiled model's decoding interface (spec, encode, init_cache,
    decode_step), so attncomp.decode's CachedStepper, beam_search and Translator run over them."""

    spec: nodes.Spec
    entries: dict[str, Callable]
    tokenizers: dict[str, bytes] = field(default_factory=dict)
    programs: dict = field(default_factory=dict)  # the ExportedPrograms by entry point (e.g. for AOTInductor)

    def __getattr__(self, name: str):
        if name in ENTRIES and name in self.__dict__.get("entries", {}):
            return self.entries[name]
        raise AttributeError(name)

    def eval(self) -> "ExportedModel":  # Translator calls it; the programs were exported in eval mode
        return self

    @property
    def family(self) -> str:
        """The model protocol's family (attncomp.protocol), which decoding asks: the spec's."""
        return family_of(self.spec.model).name

    @property
    def loss_inputs(self) -> tuple[str, ...]:
        """The protocol's inputs of `hidden` (which decoding asks to tell a prefix LM: its init_cache encodes the
        prompt's prefix in one step): the spec's family's, and `prefix` with `mask = prefix`."""
        arch = self.spec.model
        return family_of(arch).entry("hidden").inputs + (("prefix",) if Family.prefixed(arch, "hidden") else ())

    def translator(self, beam: int | None = None, **options):
        """A Translator over the programs with the spec's decode settings (beam, alpha, max_len)."""
        from attncomp.data.tokenizer import tokenizer_of
        from attncomp.decode.translate import Translator

        decode = self.spec.decode
        return Translator(self, tokenizer_of(self.tokenizers["src"]), tokenizer_of(self.tokenizers["tgt"]),
                          beam=beam or decode.beam, alpha=options.pop("alpha", decode.length_penalty),
                          max_len=decode.max_len, progress=options.pop("progress", False), **options)


def _no_grad(module: torch.nn.Module) -> Callable:
    def run(*args):
        with torch.no_grad():
            return module(*args)

    return run


def _read_meta(directory: Path) -> ExportMeta:
    raw = read_json(directory / META, what="metadata file", limit=1 << 20, error=CheckpointError)
    if not isinstance(raw, dict) or raw.get("format") != EXPORT_FORMAT:
        raise CheckpointError(f"{directory / META}: not an attncomp torch.export export")
    if raw.get("version") != EXPORT_VERSION:
        raise CheckpointError(f"{directory / META}: version {str(raw.get('version'))[:40]!r}; this attncomp reads "
                              f"version {EXPORT_VERSION}")
    try:
        return ExportMeta.model_validate(raw)
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise CheckpointError(f"{directory / META}: field {where!r}: {first['msg'][:160]}") from None


def load(directory: str | Path, *, trusted: bool = False) -> ExportedModel:
    """The programs of an export directory as callables (no attncomp graph is built), with its spec.

    Loading runs the directory's code (see the module's docstring): `trusted=True` says it may."""
    directory = Path(directory)
    if not trusted:
        raise UsageError(f"{directory} {UNTRUSTED}")
    meta = _read_meta(directory)
    try:
        spec_text = read_regular(directory / SPEC, limit=MAX_SIDE_FILE_BYTES, what="spec file",
                                 error=CheckpointError).decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(f"{directory / SPEC} is not UTF-8 text") from None
    tokenizers = {side: read_regular(directory / name, limit=MAX_SIDE_FILE_BYTES, what="sentencepiece model",
                                     error=CheckpointError) for side, name in TOKENIZER_FILES.items()}
    if hashlib.sha256(spec_text.encode("utf-8")).hexdigest() != meta.spec_hash:
        raise CheckpointError(f"{directory / SPEC} does not match the spec hash in {directory / META}")
    programs = {}
    for name, file in meta.programs.items():
        if (directory / file).resolve().parent != directory.resolve():  # a link to a file elsewhere
            raise CheckpointError(f"{directory / META}: field 'programs.{name}': {file!r} leads outside {directory}")
        data = read_regular(directory / file, limit=MAX_PROGRAM_BYTES, what="torch.export program",
                            error=CheckpointError)
        try:
            programs[name] = torch.export.load(io.BytesIO(data))
        except Exception as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise CheckpointError(f"{directory / file} is not a readable torch.export program ({first[:160]})") from None
    weights = {name: t for program in programs.values() for name, t in program.state_dict.items()}
    spec = load_stored(spec_text, f"{directory / SPEC}", stored=sum(t.numel() for t in weights.values()))
    entries = {name: _no_grad(program.module()) for name, program in programs.items()}
    return ExportedModel(spec, entries, tokenizers, programs)
