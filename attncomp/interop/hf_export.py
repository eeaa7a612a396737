"""`attncomp export CKPT --format hf --out DIR`: a checkpoint of an imported Hugging Face family back to a
save_pretrained directory (config.json, model.safetensors, tokenizer.json; Marian's source.spm, target.spm,
vocab.json; M2M100's sentencepiece.bpe.model, vocab.json) that transformers loads.

The family table of attncomp.interop.families is read backwards (attncomp.interop.mapping.origins and
revert): a transformers model of the config is built on the meta device (no memory), its parameter
names are renamed forward to find where each of attncomp's tensors goes, the named transforms are
inverted (QKV fused again, Conv1D transposed back, final_logits_bias reshaped, vocabulary rows put back),
and the model takes the tensors as they are (`assign`), so their dtype is kept; save_pretrained writes
them. The config is the one the import stored; the checkpoint's model must still be the spec of that
config (training changes weights, not the architecture).

Import then export gives back every tensor bit for bit, except what the import folded: BERT, RoBERTa
and XLM-R's positions carry token type 0's row (their token-type table comes back zero), and the
position rows before BART's and RoBERTa's offset come back zero; the logits are the same.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import torch

from attncomp import ir
from attncomp.data.hf_tokenizer import HFTokenizer, is_hf
from attncomp.errors import UsageError
from attncomp.files import parse_json
from attncomp.interop import families, mapping, require
from attncomp.ir.family import prefix_lm


def _imported(found) -> dict | None:
    """The `imported` record of a checkpoint `attncomp import` wrote; None for any other checkpoint."""
    try:
        data = parse_json(found.header.data, "the checkpoint's data", ValueError)
    except ValueError:
        data = {}
    manifest = data.get("imported") if isinstance(data, dict) else None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        return None
    if manifest.get("family") not in families.IMPORTED:
        raise UsageError(f"export --format hf does not write {str(manifest.get('family'))[:40]!r} models")
    if manifest["family"] == "marian" and not isinstance(manifest.get("rows"), dict):
        raise UsageError("this Marian checkpoint was imported before its vocabulary rows were recorded: "
                         "import it again to export it")
    if "exchanged" in str(manifest.get("ids", "")):
        raise UsageError(f"this checkpoint was imported before its spec declared the model's special ids (its "
                         f"{manifest['ids']}): import it again to export it")
    return manifest


def hf_state(family: mapping.FamilyEntry, config, weights: dict[str, torch.Tensor], hf_names: list[str]) -> dict:
    """attncomp's weights under the HF names of `hf_names` (tied names sharing one tensor)."""
    state = mapping.revert(family, config, dict(weights))
    out = {}
    for ours, theirs in mapping.origins(family, config, hf_names).items():
        if ours not in state:
            raise UsageError(f"the checkpoint has no {ours} for the {family.label} tensor {theirs[0]}")
        for name in theirs:
            out[name] = state[ours]
    return out


def _differences(model, expected) -> list[str]:
    """The resolved keys where a spec's model differs from a family's (its name and dropout aside, and the
    special ids of a vocabulary of the same size: the model's own, which its config carries)."""
    from attncomp.ir.canonical import flatten

    if (model.src_vocab, model.tgt_vocab) == (expected.src_vocab, expected.tgt_vocab):
        expected = expected.model_copy(update={"vocab": model.vocab})

    ours, theirs = (flatten(m.model_copy(update={"name": "model", "dropout": expected.dropout}).model_dump(mode="json"))
                    for m in (model, expected))
    return [f"{key} = {ours.get(key)} ({theirs.get(key)} in the family)" for key in sorted(set(ours) | set(theirs))
            if ours.get(key) != theirs.get(key)]


def matching(model, family_name: str | None = None):
    """The family (and its config values) whose spec is this model's: for a spec written by hand."""
    transformers = require("transformers", "export --format hf")
    if family_name is not None and family_name not in families.IMPORTED:
        raise UsageError(f"--family {family_name[:40]!r}: not a family (one of {', '.join(families.IMPORTED)})")
    candidates = [families.IMPORTED[family_name]] if family_name else \
        [family for family in families.IMPORTED.values() if not family.named_only]
    found, reasons = [], []
    for family in candidates:
        if family.config_of is None:
            reasons.append((1000, f"{family.label}: export of a spec written by hand is not built for it"))
            continue
        try:
            values = {**mapping.config_values(family, model), **family.config_of(model)}
            config = getattr(transformers, family.config_class)(**values)
            expected = ir.load_flat(mapping.spec_text(family, config), "<family>").model
        except Exception as err:  # UsageError from config_of, a config class's or the spec's own check
            reasons.append((100, f"{family.label}: {' '.join(str(err).split())[:120]}"))
            continue
        differences = _differences(model, expected)
        if differences:
            reasons.append((len(differences), f"{family.label}: {'; '.join(differences[:3])}"))
        else:
            found.append((family, config))
    if len(found) > 1:
        raise UsageError(f"the spec is a model of several families ({', '.join(f.model_type for f, _ in found)}): "
                         "choose one with --family NAME")
    if not found:
        near = [reason for reason in reasons if reason[0] < 100]
        if near:
            raise UsageError(f"no Hugging Face family has this spec's architecture (closest, {min(near)[1]})")
        if family_name is not None and reasons:  # the one family asked for: why its spec is not this one
            raise UsageError(f"--family {family_name}: not this spec's architecture ({reasons[0][1]})")
        covered = ", ".join(f.label for f in candidates if f.config_of is not None) or "none of these"
        raise UsageError("no Hugging Face family has this spec's architecture: a spec written by hand exports as "
                         f"{covered} where it is that family's spec; others only as `attncomp import` read them")
    return found[0]


def write(found, out: Path, family_name: str | None = None) -> list[Path]:
    """Write DIR; returns the files written."""
    transformers = require("transformers", "export --format hf")
    stored = ir.load_flat(found.header.spec, "<checkpoint>").model
    if prefix_lm(stored):
        raise UsageError("export --format hf cannot write a prefix LM (decoder { mask = prefix }): every Hugging Face "
                         "decoder-only family attends causally over the whole input; export --format torch-export")
    manifest = _imported(found)
    if manifest is None:  # a spec written by hand: the family whose spec it is
        family, config = matching(stored, family_name)
        manifest = {"family": family.model_type, "tokenizer": "tokenizer.model"}
        if family is families.MARIAN:  # its rows are attncomp's ids: vocab.json in attncomp's numbering
            manifest["rows"] = {"src": list(range(stored.src_vocab)), "tgt": list(range(stored.tgt_vocab))}
    else:
        family = families.IMPORTED[manifest["family"]]
        if family_name is not None and family_name != family.model_type:
            raise UsageError(f"--family {family_name[:40]!r}: the checkpoint is an imported {family.model_type} model")
        try:
            config = getattr(transformers, family.config_class).from_dict(manifest["config"])
        except Exception as err:
            raise UsageError(f"the stored {family.config_class} does not load ({' '.join(str(err).split())[:160]})") \
                from None
        expected = ir.load_flat(mapping.spec_text(family, config), "<stored config>").model
        if family is families.MARIAN:  # its vocabulary is the renumbered one
            expected = expected.model_copy(update={"vocab": stored.vocab})
        changed = _differences(stored, expected)
        if changed:
            raise UsageError(f"the checkpoint's model is no longer the spec of its {family.label} config "
                             f"({changed[0]}): export --format hf writes the architecture that was imported")
    dtype = Counter(t.dtype for t in found.model.values()).most_common(1)[0][0]
    weights = {k: v.to(dtype) for k, v in found.model.items()}
    if family is families.MARIAN:
        weights = _marian_rows(weights, manifest["rows"], config)
    with torch.device("meta"):
        model = getattr(transformers, family.model_class)(config)
    names = list(model.state_dict())
    state = {name: tensor.to(dtype) if tensor.is_floating_point() else tensor  # a computed table too
             for name, tensor in hf_state(family, config, weights, names).items()}
    missing = [n for n in names if n not in state]
    if missing:
        raise UsageError(f"export --format hf has nothing for the {family.label} tensor {missing[0]}")
    model.load_state_dict(state, strict=True, assign=True)
    model.config.dtype = dtype
    if isinstance(manifest.get("generation"), dict) and getattr(model, "generation_config", None) is not None:
        try:  # the imported generation_config.json (forced language, end tokens), as it was
            model.generation_config = transformers.GenerationConfig.from_dict(manifest["generation"])
        except Exception as err:  # transformers validates the fields (its own exception types)
            raise UsageError(f"the stored generation config does not load ({' '.join(str(err).split())[:160]})") \
                from None
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    if family is families.MARIAN:
        _marian_tokenizer(found, manifest["rows"], config, out)
    else:
        tokenizer = found.header.tokenizers["tgt"].numpy().tobytes()
        if is_hf(tokenizer):  # an imported tokenizer, in the envelope that says how attncomp reads it
            files = HFTokenizer.from_bytes(tokenizer).files()
        elif manifest.get("tokenizer") == "tokenizer.model":  # a spec written by hand: attncomp's sentencepiece
            files = {"tokenizer.model": tokenizer, **spm_tokenizer_files(tokenizer, stored)}
        else:
            files = {}
        for name, data in files.items():
            (out / name).write_bytes(data)
    return sorted(out.iterdir())


# --- a spec written by hand: attncomp's sentencepiece model as a tokenizer.json -----------------------


def spm_tokenizer_files(proto_bytes: bytes, model) -> dict[str, bytes]:
    """tokenizer.json (the `tokenizers` library's reading of the sentencepiece model, through transformers'
    SpmConverter: its normalizer, pre-tokenizer and pieces, so it encodes text to sentencepiece's ids) and
    tokenizer_config.json (PreTrainedTokenizerFast, whatever the family, which AutoTokenizer loads; the special
    tokens are the pieces at the spec's declared ids). Every family's own tokenizer class reads a vocabulary
    of its own kind (GPT-2's byte-level BPE, BERT's WordPiece, T5's numbering), not attncomp's."""
    pb = require("sentencepiece.sentencepiece_model_pb2", "export --format hf")
    convert = require("transformers.convert_slow_tokenizer", "export --format hf")
    tokenizers = require("tokenizers", "export --format hf")
    proto = pb.ModelProto()
    proto.ParseFromString(proto_bytes)
    pieces = [p.piece for p in proto.pieces]
    vocab = {piece: i for i, piece in enumerate(pieces)} if proto.trainer_spec.model_type == 2 else \
        [(p.piece, p.score) for p in proto.pieces]  # BPE: pieces by id (merges from their scores); unigram: scores
    tokenizer = convert.SpmConverter.build_tokenizer_from_spm_proto(proto, vocab)
    if tokenizer is None:
        raise UsageError("export --format hf: the tokenizer's sentencepiece model is neither BPE nor unigram")
    roles = {"pad": model.vocab.pad, "unk": model.vocab.unk, "bos": model.vocab.bos, "eos": model.vocab.eos,
             "sep": model.vocab.sep, "mask": getattr(model.vocab, "mask", None)}
    named = {f"{role}_token": pieces[i] for role, i in roles.items() if i is not None and 0 <= i < len(pieces)}
    tokenizer.add_special_tokens([tokenizers.AddedToken(piece, special=True) for piece in dict.fromkeys(named.values())])
    config = {"tokenizer_class": "PreTrainedTokenizerFast", **named}
    return {"tokenizer.json": tokenizer.to_str().encode("utf-8"),
            "tokenizer_config.json": json.dumps(config, ensure_ascii=False, indent=2).encode("utf-8")}


# --- Marian: the vocabulary back in Marian's numbering -----------------------------------------------


def _marian_inverse(rows: list[int], size: int) -> list[int]:
    """Marian id -> the attncomp id whose row it takes back. Several attncomp ids share a Marian row (pad
    is also <sep>, and the decoder start is <s>): <s> first, as the row decoding starts from."""
    inverse: list[int | None] = [None] * size
    for a in [2, *range(len(rows))]:
        if 0 <= rows[a] < size and inverse[rows[a]] is None:
            inverse[rows[a]] = a
    if None in inverse or len(rows) < 5:
        raise UsageError("the recorded Marian vocabulary rows do not cover its vocabulary")
    return inverse  # type: ignore[return-value]


def _marian_rows(weights: dict, rows: dict, config) -> dict:
    sizes = {"src": config.vocab_size, "tgt": config.decoder_vocab_size or config.vocab_size}
    if getattr(config, "share_encoder_decoder_embeddings", True):
        sizes["src"] = sizes["tgt"] = config.vocab_size
    sides = {"embed.weight": "tgt", "src_embed.weight": "src", "tgt_embed.weight": "tgt", "output.weight": "tgt",
             "output_bias": "tgt"}
    for name, side in sides.items():
        if name in weights:
            index = torch.tensor(_marian_inverse(rows[side], sizes[side]))
            weights[name] = weights[name].index_select(0, index)
    return weights


def _vocabulary(proto_bytes: bytes, rows: list[int]) -> dict[str, int]:
    """vocab.json back: each piece's Marian id; the pieces import added as <unk> are left out."""
    pb = require("sentencepiece.sentencepiece_model_pb2", "export --format hf")
    proto = pb.ModelProto()
    proto.ParseFromString(proto_bytes)
    pieces = [p.piece for p in proto.pieces]
    vocab = {"</s>": rows[3], "<unk>": rows[1], "<pad>": rows[0]}
    vocab.update({pieces[a]: rows[a] for a in range(5, len(rows)) if rows[a] != rows[1]})
    for a in (2, 4):  # <s> and <sep> where they have rows of their own (a spec written by hand: attncomp's ids)
        if rows[a] not in vocab.values():
            vocab[pieces[a]] = rows[a]
    return dict(sorted(vocab.items(), key=lambda item: item[1]))


def _marian_tokenizer(found, rows: dict, config, out: Path) -> None:
    """source.spm and target.spm (attncomp's renumbered models segment as the originals did; Marian reads
    only their pieces), vocab.json (and target_vocab.json), tokenizer_config.json."""
    separate = not getattr(config, "share_encoder_decoder_embeddings", True)
    protos = {side: found.header.tokenizers[side].numpy().tobytes() for side in ("src", "tgt")}
    (out / "source.spm").write_bytes(protos["src"])
    (out / "target.spm").write_bytes(protos["tgt"])
    (out / "vocab.json").write_text(json.dumps(_vocabulary(protos["src"], rows["src"]), ensure_ascii=False),
                                    encoding="utf-8")
    if separate:
        (out / "target_vocab.json").write_text(json.dumps(_vocabulary(protos["tgt"], rows["tgt"]),
                                                          ensure_ascii=False), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "MarianTokenizer",
                                                           "separate_vocabs": separate}), encoding="utf-8")
