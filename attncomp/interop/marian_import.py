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

With one vocabulary both sides share that numbering (one embedding), and a piece a side's model does
not have is UNUSED there, so it never enters that side's segmentation. With separate vocabularies
(`share_encoder_decoder_embeddings = false`: vocab.json for the source, target_vocab.json for the
target, `vocab = separate(...)`, `tie = decoder`) each side is numbered from its own file. The
embedding rows are gathered in the same order (`rows`); <s> gets the decoder start's row, so decoding
starts where Marian's does. The weights are renamed by the Marian entry of attncomp.interop.families.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Literal, Optional

import pydantic
import torch

from attncomp import ir
from attncomp.errors import UsageError
from attncomp.files import read_json
from attncomp.interop import families, hf_import, mapping, require
from attncomp.interop.hf_import import Imported
from attncomp.vocab import SPECIAL_TOKENS

SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>", "<sep>")  # attncomp's ids 0..4
SIDES = {"src": "source.spm", "tgt": "target.spm"}
VOCABULARIES = {"src": "vocab.json", "tgt": "target_vocab.json"}  # separate vocabularies; shared: vocab.json
# attncomp's tensors with a row per token of each side's vocabulary
BY_SIDE = {"src": ("embed.weight", "src_embed.weight"), "tgt": ("embed.weight", "tgt_embed.weight", "output.weight",
                                                                 "output_bias")}
_is_file = hf_import.is_file


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
           "target_vocab.json": pydantic.TypeAdapter(dict[str, pydantic.conint(strict=True, ge=0)]),
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


def separate(config) -> bool:
    return not getattr(config, "share_encoder_decoder_embeddings", True)


def read_config(directory: Path, config=None):
    """The MarianConfig of DIR (read by attncomp.interop.hf_import; its fields typed here too)."""
    if config is None:
        family, config = hf_import.read_config(directory)
        if family is not families.MARIAN:
            raise UsageError(f"{directory}/config.json describes a {family.model_type!r} model, not a Marian one")
    _json(directory / "config.json")
    needed = (*SIDES.values(), "vocab.json", *(("target_vocab.json",) if separate(config) else ()))
    missing = [name for name in needed if not _is_file(directory / name)]
    if missing:
        raise UsageError(f"{directory} is not a Marian model directory in the transformers layout "
                         f"(no {', '.join(missing)})")
    return config


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
    if not _own_pieces(proto):  # an empty file parses as a model without pieces: it could split nothing
        raise UsageError(f"{path} is not a sentencepiece model (it has no pieces to split text into)")
    return proto


def _own_pieces(proto) -> dict[str, tuple[float, int]]:
    """A model's segmenting pieces (NORMAL, USER_DEFINED, BYTE): piece -> (score, type)."""
    kind = _piece_type()
    keep = {kind.NORMAL, kind.USER_DEFINED, kind.BYTE}
    return {p.piece: (p.score, p.type) for p in proto.pieces if p.type in keep}


def layout(vocab: dict[str, int], specials: dict, size: int, extra: list[str],
           name: str = "vocab.json") -> tuple[list[str], list[int]]:
    """attncomp's pieces in id order, and the Marian id each one's row comes from (`size`: Marian's rows)."""
    if not all(isinstance(v, int) and 0 <= v < size for v in specials.values()):
        wrong = ", ".join(f"{k} {v!r}" for k, v in specials.items() if not isinstance(v, int))
        raise UsageError(f"the Marian config and {name} do not give usable special ids ({wrong or specials})")
    if max(vocab.values()) >= size:
        raise UsageError(f"{name} has ids up to {max(vocab.values())}, the model only {size} rows")
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


def generation_settings(directory: Path, config) -> dict:
    """The spec's decode block: num_beams of generation_config.json (else config.json), and
    `stop = first`, transformers' rule (a hypothesis finishes only from the best num_beams candidates
    of a step; with no length penalty the best finished one is then final)."""
    path = directory / "generation_config.json"
    settings = _json(path) if _is_file(path) else {}
    beams = settings.get("num_beams", getattr(config, "num_beams", None))
    return {**({"beam": beams} if isinstance(beams, int) and beams >= 1 else {}), "stop": "first"}


def _vocabulary(path: Path) -> dict[str, int]:
    vocab = _json(path)
    if not vocab or not all(isinstance(i, int) and i >= 0 for i in vocab.values()):
        raise UsageError(f"{path}: not a vocabulary (piece -> non-negative integer id)")
    return vocab


def _extra(protos, vocab: dict[str, int]) -> list[str]:
    """Pieces the sentencepiece models segment with that the vocabulary lacks (they read as <unk>)."""
    extra: list[str] = []
    for proto in protos:
        extra += [p for p in _own_pieces(proto) if p not in vocab and p not in SPECIAL_PIECES and p not in extra]
    return extra


def _layouts(directory: Path, config, protos: dict) -> dict[str, tuple[list[str], list[int]]]:
    """Each side's pieces and rows: one numbering for a shared vocabulary, one per file for separate ones."""
    if not separate(config):
        vocab = _vocabulary(directory / "vocab.json")
        unk = vocab.get("<unk>", getattr(config, "unk_token_id", None))
        specials = {"pad": config.pad_token_id, "eos": config.eos_token_id, "start": config.decoder_start_token_id,
                    "unk": unk}
        both = layout(vocab, specials, config.vocab_size, _extra(protos.values(), vocab))
        return {"src": both, "tgt": both}
    out = {}
    for side, name in VOCABULARIES.items():
        vocab = _vocabulary(directory / name)
        size = config.vocab_size if side == "src" else (config.decoder_vocab_size or config.vocab_size)
        pad = vocab.get("<pad>", config.pad_token_id) if side == "src" else config.pad_token_id
        specials = {"pad": pad, "eos": vocab.get("</s>", config.eos_token_id) if side == "src" else config.eos_token_id,
                    "start": pad if side == "src" else config.decoder_start_token_id, "unk": vocab.get("<unk>")}
        out[side] = layout(vocab, specials, size, _extra([protos[side]], vocab), name)
    return out


def import_directory(directory: str | Path, allow_pickle: bool = False, config=None) -> Imported:
    """Read DIR and map it onto attncomp: spec, weights in attncomp's row order, tokenizers."""
    directory = Path(directory)
    config = read_config(directory, config)
    if not isinstance(config.vocab_size, int) or config.vocab_size < 1:
        raise UsageError(f"{directory}/config.json: vocab_size {config.vocab_size!r} is not a positive integer")
    mapping.check(families.MARIAN, config)
    state = hf_import.read_weights(directory, allow_pickle)
    protos = {side: _spm_proto(directory / name) for side, name in SIDES.items()}
    layouts = _layouts(directory, config, protos)
    weights = mapping.convert(families.MARIAN, config, state)
    for side, (_, rows) in layouts.items():
        sizes = {"src": config.vocab_size, "tgt": config.decoder_vocab_size or config.vocab_size}
        for name in BY_SIDE[side]:
            if name in weights and (side == "tgt" or name != "embed.weight"):
                if weights[name].shape[0] != (config.vocab_size if name == "embed.weight" else sizes[side]):
                    raise UsageError(f"Marian's {name} has shape {tuple(weights[name].shape)}, not a row per token "
                                     f"of its {sizes[side]}")
                weights[name] = weights[name].index_select(0, torch.tensor(rows))
    src, tgt = len(layouts["src"][0]), len(layouts["tgt"][0])
    vocab = f"separate({src}, {tgt})" if separate(config) else f"shared({src})"
    text, _ = hf_import.spec_of(families.MARIAN, config, directory, "marian", {"vocab": vocab})
    decode = generation_settings(directory, config)
    text += "decode { " + "  ".join(f"{k} = {v}" for k, v in decode.items()) + " }\n"
    spec = ir.load_flat(text, "<marian config>")
    hf_import.check_weights(spec, weights, "Marian")
    tokenizers = {side: renumbered(protos[side], layouts[side][0]) for side in SIDES}
    rows = layouts["tgt"][1] if not separate(config) else None
    manifest = {"family": "marian", "marian": str(directory), "config": read_json(directory / "config.json",
                                                                                  what="JSON file", error=UsageError),
                "rows": {side: rows for side, (_, rows) in layouts.items()}}
    return Imported(text, spec, weights, tokenizers, rows, "marian", manifest,
                    side_rows={side: rows for side, (_, rows) in layouts.items()})


write = hf_import.write
