"""`attncomp import DIR`: a Marian/OPUS-MT model directory in the transformers layout -> an attncomp
spec and checkpoint that `attncomp translate` reads.

    DIR/config.json                      MarianConfig (model_type "marian")
    DIR/model.safetensors                the weights (pytorch_model.bin, a pickle, only with allow_pickle)
    DIR/source.spm, DIR/target.spm       sentencepiece models that split text into pieces
    DIR/vocab.json                       piece -> id, one vocabulary for both sides (OPUS-MT)
    DIR/generation_config.json           optional: num_beams (the spec's decode.beam)

The vocabulary is the hard part. attncomp's ids have fixed specials (<pad> 0, <unk> 1, <s> 2, </s> 3,
<sep> 4, attncomp/vocab.py) and its Tokenizer uses a sentencepiece model's own ids; Marian splits
text with source.spm but numbers the pieces by vocab.json (</s> 0, <unk> 1, <pad> last; the decoder
starts from <pad>; no <s>). So each side gets a new sentencepiece model with the same pieces, scores
and normaliser (the same segmentation) renumbered in attncomp's layout:

    0..4   <pad> <unk> <s> </s> <sep>          (Marian rows: pad, unk, decoder start, eos, pad)
    5..    vocab.json's other pieces, in vocab.json's order
    then   pieces of source.spm or target.spm missing from vocab.json (Marian maps them to <unk>:
           their rows are <unk>'s)

Both sides share that numbering (one embedding), and a piece a side's model does not have is
UNUSED there, so it never enters that side's segmentation. The embedding rows are gathered in the
same order (`rows`); <s> gets the decoder start's row, so decoding starts where Marian's does.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

import pydantic
import torch

from attncomp import ir
from attncomp.errors import UsageError
from attncomp.files import read_json
from attncomp.interop import marian, require
from attncomp.vocab import SPECIAL_TOKENS

SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>", "<sep>")  # attncomp's ids 0..4
SIDES = {"src": "source.spm", "tgt": "target.spm"}
# Marian's tensors with an entry per token, gathered into attncomp's order under the names
# marian.RENAMES gives them (embed.weight, output_bias)
BY_VOCABULARY = ("model.shared.weight", "final_logits_bias")
PICKLE_HINT = ("pytorch_model.bin is a pickle, and unpickling a file can run code: convert it to "
               "model.safetensors, or pass --allow-pickle to read it (with torch.load(weights_only=True))")


@dataclass
class Imported:
    spec_text: str  # the spec file written beside the checkpoint
    spec: object  # its ir Spec
    weights: dict[str, torch.Tensor]  # attncomp's canonical names, rows in attncomp's vocabulary order
    tokenizers: dict[str, bytes]  # "src"/"tgt" -> sentencepiece model protos in attncomp's id layout
    rows: list[int]  # attncomp id -> Marian id whose embedding row it takes


def _is_file(path: Path) -> bool:
    """Path.is_file, with a name too long or holding a NUL byte answered as "no" rather than raised."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


_Count = pydantic.conint(strict=True, ge=1)
_Id = Optional[pydantic.conint(strict=True, ge=0)]
_Rate = Optional[pydantic.confloat(ge=0, le=1, allow_inf_nan=False)]


class _Settings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")


class MarianSettings(_Settings):
    """The fields of config.json that attncomp reads, typed (transformers' MarianConfig takes a string or a
    list where a count is due); absent ones take MarianConfig's defaults."""

    model_type: Literal["marian"]
    vocab_size: Optional[_Count] = None
    d_model: Optional[_Count] = None
    encoder_layers: Optional[_Count] = None
    decoder_layers: Optional[_Count] = None
    encoder_attention_heads: Optional[_Count] = None
    decoder_attention_heads: Optional[_Count] = None
    encoder_ffn_dim: Optional[_Count] = None
    decoder_ffn_dim: Optional[_Count] = None
    max_position_embeddings: Optional[_Count] = None
    dropout: _Rate = None
    attention_dropout: _Rate = None
    activation_dropout: _Rate = None
    activation_function: Optional[str] = None
    scale_embedding: Optional[bool] = None
    pad_token_id: _Id = None
    eos_token_id: _Id = None
    decoder_start_token_id: _Id = None
    num_beams: Optional[_Count] = None


class GenerationSettings(_Settings):
    num_beams: Optional[_Count] = None


SCHEMAS = {"config.json": MarianSettings, "generation_config.json": GenerationSettings,
           "vocab.json": pydantic.TypeAdapter(dict[str, pydantic.conint(strict=True, ge=0)])}


def _json(path: Path) -> dict:
    """A file of the directory, read through attncomp.files.read_json and checked by its schema."""
    value = read_json(path, what="JSON file", error=UsageError)
    schema = SCHEMAS[path.name]
    try:
        schema.validate_python(value) if isinstance(schema, pydantic.TypeAdapter) else schema.model_validate(value)
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the top level"
        raise UsageError(f"{path}: {where[:80]}: {first['msg'][:160]}") from None
    return value


def read_config(directory: Path):
    """The MarianConfig of DIR; anything else is one line saying what DIR is not."""
    if not _is_file(directory / "config.json"):
        raise UsageError(f"{directory} is not a Marian model directory (no config.json)")
    raw = read_json(directory / "config.json", what="JSON file", error=UsageError)
    if not isinstance(raw, dict) or raw.get("model_type") != "marian":
        kind = str(raw.get("model_type"))[:40] if isinstance(raw, dict) else "JSON " + type(raw).__name__
        raise UsageError(f"{directory}/config.json describes a {kind!r} model; "
                         "attncomp imports Marian models (model_type 'marian')")
    settings = _json(directory / "config.json")
    missing = [name for name in (*SIDES.values(), "vocab.json") if not _is_file(directory / name)]
    if missing:
        raise UsageError(f"{directory} is not a Marian model directory in the transformers layout "
                         f"(no {', '.join(missing)})")
    transformers = require("transformers", "attncomp import")
    try:
        return transformers.MarianConfig.from_dict(settings)
    except Exception as err:  # transformers validates the fields' types (its own exception classes)
        reason = " ".join(str(err).split())[:200]
        raise UsageError(f"{directory}/config.json is not a valid MarianConfig ({reason})") from None


def read_weights(directory: Path, allow_pickle: bool = False) -> dict[str, torch.Tensor]:
    """Marian's state dict from model.safetensors, or from pytorch_model.bin with `allow_pickle`."""
    if _is_file(directory / "model.safetensors"):
        st = require("safetensors.torch", "attncomp import")
        try:
            return st.load_file(str(directory / "model.safetensors"))
        except Exception as err:  # truncated or not safetensors
            raise UsageError(f"{directory}/model.safetensors is not readable ({str(err).strip()[:160]})") from None
    if _is_file(directory / "pytorch_model.bin"):
        if not allow_pickle:
            raise UsageError(f"{directory} has no model.safetensors; {PICKLE_HINT}")
        try:
            return torch.load(directory / "pytorch_model.bin", map_location="cpu", weights_only=True)
        except Exception as err:
            raise UsageError(f"{directory}/pytorch_model.bin is not readable ({str(err).strip()[:160]})") from None
    raise UsageError(f"{directory} has no weights (model.safetensors or pytorch_model.bin)")


def shared_embedding(state: dict[str, torch.Tensor]) -> torch.Tensor:
    """model.shared.weight, or the tied copy that save_pretrained kept in its place."""
    for name in ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                 "lm_head.weight"):
        if name in state:
            return state[name]
    raise UsageError("the Marian weights have no shared embedding (model.shared.weight)")


def _piece_type():
    """sentencepiece's piece kinds (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE)."""
    pb = require("sentencepiece.sentencepiece_model_pb2", "attncomp import")
    return pb.ModelProto.SentencePiece


def _spm_proto(path: Path):
    pb = require("sentencepiece.sentencepiece_model_pb2", "attncomp import")
    proto = pb.ModelProto()
    try:
        proto.ParseFromString(path.read_bytes())
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None
    except Exception:  # protobuf's DecodeError
        raise UsageError(f"{path} is not a sentencepiece model") from None
    return proto


def _own_pieces(proto) -> dict[str, tuple[float, int]]:
    """A model's segmenting pieces (NORMAL, USER_DEFINED, BYTE): piece -> (score, type)."""
    kind = _piece_type()
    keep = {kind.NORMAL, kind.USER_DEFINED, kind.BYTE}
    return {p.piece: (p.score, p.type) for p in proto.pieces if p.type in keep}


def layout(vocab: dict[str, int], config, extra: list[str]) -> tuple[list[str], list[int]]:
    """attncomp's pieces in id order, and the Marian id each one's row comes from."""
    unk = vocab.get("<unk>", getattr(config, "unk_token_id", None))
    specials = {"pad": config.pad_token_id, "eos": config.eos_token_id,
                "start": config.decoder_start_token_id, "unk": unk}
    if not all(isinstance(v, int) and 0 <= v < config.vocab_size for v in specials.values()):
        wrong = ", ".join(f"{k} {v!r}" for k, v in specials.items() if not isinstance(v, int))
        raise UsageError(f"the Marian config and vocab.json do not give usable special ids ({wrong or specials})")
    if max(vocab.values()) >= config.vocab_size:
        raise UsageError(f"vocab.json has ids up to {max(vocab.values())}, the model only {config.vocab_size} rows")
    rows = [specials["pad"], specials["unk"], specials["start"], specials["eos"], specials["pad"]]
    taken = {specials["pad"], specials["unk"], specials["eos"]}
    body = [p for p, i in sorted(vocab.items(), key=lambda item: item[1])
            if i not in taken and p not in SPECIAL_PIECES]
    pieces = list(SPECIAL_PIECES) + body + extra
    return pieces, rows + [vocab[p] for p in body] + [specials["unk"]] * len(extra)


def renumbered(proto, pieces: list[str]) -> bytes:
    """`proto` with its pieces in the order `pieces` (attncomp's specials first); a piece it does not
    segment with is UNUSED, so the segmentation is the original's."""
    own = _own_pieces(proto)
    kinds = _piece_type()
    new = copy.deepcopy(proto)
    del new.pieces[:]
    for k, piece in enumerate(pieces):
        if k < SPECIAL_TOKENS:
            kind = kinds.UNKNOWN if piece == "<unk>" else kinds.CONTROL
            new.pieces.add(piece=piece, score=0.0, type=kind)
        else:
            score, kind = own.get(piece, (0.0, kinds.UNUSED))
            new.pieces.add(piece=piece, score=score, type=kind)
    spec = new.trainer_spec
    spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id = 0, 1, 2, 3
    spec.pad_piece, spec.unk_piece, spec.bos_piece, spec.eos_piece = SPECIAL_PIECES[:4]
    spec.vocab_size = len(pieces)
    return new.SerializeToString()


def _renamed(key: str) -> str | None:
    """attncomp's name for a tensor of Marian's, or None where marian.RENAMES drops it."""
    for pattern, replacement in marian.RENAMES:
        renamed, hits = re.subn(f"^{pattern}", replacement, key)
        if hits:
            return renamed
    return None


def generation_settings(directory: Path, config) -> dict:
    """The spec's decode block: num_beams of generation_config.json (else config.json), and
    `stop = first`, transformers' rule (a hypothesis finishes only from the best num_beams candidates
    of a step; with no length penalty the best finished one is then final)."""
    path = directory / "generation_config.json"
    settings = _json(path) if _is_file(path) else {}
    beams = settings.get("num_beams", getattr(config, "num_beams", None))
    return {**({"beam": beams} if isinstance(beams, int) and beams >= 1 else {}), "stop": "first"}


def spec_text(config, vocab_size: int, decode: dict, name: str = "marian") -> str:
    """marian.spec_text with attncomp's vocabulary size, plus a decode block of the model's settings."""
    resized = copy.deepcopy(config)
    resized.vocab_size = vocab_size
    text = marian.spec_text(resized, name)
    return text + "decode { " + "  ".join(f"{k} = {v}" for k, v in decode.items()) + " }\n"


def import_directory(directory: str | Path, allow_pickle: bool = False) -> Imported:
    """Read DIR and map it onto attncomp: spec, weights in attncomp's row order, tokenizers."""
    directory = Path(directory)
    config = read_config(directory)
    if not isinstance(config.vocab_size, int) or config.vocab_size < 1:
        raise UsageError(f"{directory}/config.json: vocab_size {config.vocab_size!r} is not a positive integer")
    marian.check_supported(config)
    state = read_weights(directory, allow_pickle)
    vocab = _json(directory / "vocab.json")
    if not vocab or not all(isinstance(i, int) and i >= 0 for i in vocab.values()):
        raise UsageError(f"{directory}/vocab.json: not a vocabulary (piece -> non-negative integer id)")
    protos = {side: _spm_proto(directory / name) for side, name in SIDES.items()}
    extra: list[str] = []
    for proto in protos.values():
        extra += [p for p in _own_pieces(proto) if p not in vocab and p not in SPECIAL_PIECES and p not in extra]
    pieces, rows = layout(vocab, config, extra)
    embedding = shared_embedding(state)
    state = {k: v for k, v in state.items() if k != "model.shared.weight"}
    state["model.shared.weight"] = embedding
    weights = {k: v.float() for k, v in marian.state_dict(state).items()}
    for name in filter(None, map(_renamed, BY_VOCABULARY)):
        tensor = weights[name]
        if config.vocab_size not in tensor.shape:
            raise UsageError(f"Marian's {name} has shape {tuple(tensor.shape)}, not a row per token of its "
                             f"{config.vocab_size}")
        weights[name] = tensor.index_select(list(tensor.shape).index(config.vocab_size), torch.tensor(rows))
    text = spec_text(config, len(pieces), generation_settings(directory, config))
    return Imported(text, ir.load(text), weights, {side: renumbered(p, pieces) for side, p in protos.items()}, rows)


def write(imported: Imported, out: Path, source: Path) -> list[Path]:
    """OUT/model.attn and OUT/checkpoint.pt (an "average" checkpoint, which translate and eval read)."""
    from attncomp import __version__, checkpoint, compile as compile_spec

    model = compile_spec(imported.spec, passes=())
    try:
        model.load_state_dict(imported.weights)  # every tensor present, every shape right
    except RuntimeError as err:
        lines = str(err).splitlines()
        first = lines[min(1, len(lines) - 1)].strip()
        raise UsageError(f"the Marian weights do not fit the spec of its config: {first}") from None
    tokenizers = {side: torch.frombuffer(bytearray(b), dtype=torch.uint8) for side, b in imported.tokenizers.items()}
    header = checkpoint.Header(attncomp=__version__, kind="average", spec=ir.to_text(imported.spec),
                               spec_hash=ir.spec_hash(imported.spec), tokenizers=tokenizers,
                               data=json.dumps({"imported": {"marian": str(source)}}), step=0, position=(0, 0),
                               metrics={})
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.attn").write_text(imported.spec_text, encoding="utf-8")
    checkpoint.save(checkpoint.Checkpoint(header, model=dict(imported.weights)), out / "checkpoint.pt")
    return [out / "model.attn", out / "checkpoint.pt"]
