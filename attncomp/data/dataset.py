"""A prepared data directory, read through memory maps; every inconsistency is a clear error."""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import numpy as np

from attncomp.data.prepare import FORMAT, MANIFEST
from attncomp.data.tokenizer import Tokenizer, tokenizer_file
from attncomp.errors import DataError
from attncomp.files import read_json


class Side:
    """One side of one split: token ids of every sentence, each ending in </s>.

    Opening a side checks everything a reader relies on, so that a damaged directory is one clear
    error rather than a hang or an IndexError later: the `.idx` file holds sentences + 1 int64
    offsets, starting at 0, strictly increasing (every sentence has at least its </s>), ending at the
    length of the `.bin` file; and no token id reaches the vocabulary size.
    """

    def __init__(self, directory: Path, name: str, dtype: np.dtype, sentences: int, tokens: int, vocab: int):
        self.name = name
        idx, bin_ = directory / f"{name}.idx", directory / f"{name}.bin"
        for path in (idx, bin_):
            if not path.is_file():
                raise DataError(f"data directory {directory} is missing {path.name}; prepare it again")
        if idx.stat().st_size != (sentences + 1) * 8:
            raise DataError(f"{idx} has {idx.stat().st_size} bytes, {MANIFEST} implies {(sentences + 1) * 8} "
                            f"({sentences} sentences); the directory is corrupt: prepare it again")
        if bin_.stat().st_size != tokens * np.dtype(dtype).itemsize:
            raise DataError(f"{bin_} has {bin_.stat().st_size} bytes, {MANIFEST} implies "
                            f"{tokens * np.dtype(dtype).itemsize}; the directory is corrupt: prepare it again")
        self.offsets = np.fromfile(idx, dtype=np.int64)
        _check_offsets(idx, self.offsets, tokens)
        self.tokens = np.memmap(bin_, dtype=dtype, mode="r") if tokens else np.zeros(0, dtype=dtype)
        if tokens and int(self.tokens.max()) >= vocab:
            raise DataError(f"{bin_} holds token id {int(self.tokens.max())}, but the vocabulary has {vocab} "
                            "tokens; the directory is corrupt: prepare it again")

    @cached_property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __getitem__(self, i: int) -> np.ndarray:
        return np.asarray(self.tokens[self.offsets[i] : self.offsets[i + 1]], dtype=np.int64)


def _check_offsets(idx: Path, offsets: np.ndarray, tokens: int) -> None:
    """Offsets start at 0, rise by at least 1 per sentence and end at the token count."""
    problem = None
    if offsets[0] != 0:
        problem = f"the first offset is {offsets[0]}, not 0"
    elif offsets[-1] != tokens:
        problem = f"the last offset is {offsets[-1]}, but the data has {tokens} tokens"
    elif len(offsets) > 1:
        steps = np.diff(offsets)
        if steps.min() < 1:
            at = int(np.argmax(steps < 1))
            problem = f"offset {at + 1} ({offsets[at + 1]}) does not follow offset {at} ({offsets[at]})"
    if problem:
        raise DataError(f"{idx} is corrupt: {problem}; prepare the directory again")


class Split:
    def __init__(self, src: Side, tgt: Side):
        self.src, self.tgt = src, tgt

    def __len__(self) -> int:
        return len(self.src.offsets) - 1


# The manifest's fields a reader uses, and what each must be (checked once, when a directory is opened).
_COUNT, _SIZE, _TEXT, _FILE, _FLAG = "a whole number >= 0", "a whole number >= 8", "text", "a file name", "true/false"
_SOME = "a whole number >= 1"
MANIFEST_FIELDS = {
    "languages.src": _TEXT, "languages.tgt": _TEXT,
    "vocab.shared": _FLAG, "vocab.src_size": _SIZE, "vocab.tgt_size": _SIZE,
    "vocab.src_model": _FILE, "vocab.tgt_model": _FILE,
    "dtype": "uint16 or int32", "splits.train": "a split",
}
SPLIT_FIELDS = ("pairs", "src_tokens", "tgt_tokens")


def _fits(value, kind: str) -> bool:
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return {
        _COUNT: is_int and value >= 0, _SOME: is_int and value >= 1, _SIZE: is_int and value >= 8, _TEXT: isinstance(value, str) and value != "",
        _FLAG: isinstance(value, bool), "a split": isinstance(value, dict),
        _FILE: isinstance(value, str) and value not in ("", ".", "..") and "/" not in value and "\\" not in value,
        "uint16 or int32": value in ("uint16", "int32"),
    }[kind]


def validate_manifest(manifest, where: str) -> None:
    """Every field a reader uses is present and of the right kind; else one DataError naming the field."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{where} is not an attncomp data manifest")
    if not isinstance(manifest.get("splits"), dict):
        raise DataError(f"{where}: field splits is missing or not an object; prepare the data again")
    fields = dict(MANIFEST_FIELDS)
    for split in manifest["splits"]:
        fields[f"splits.{split}"] = "a split"
        fields.update({f"splits.{split}.{key}": _COUNT for key in SPLIT_FIELDS})
    fields["splits.train.pairs"] = _SOME  # an empty training set would give a batcher nothing to cut, forever
    for name, kind in fields.items():
        value = manifest
        for key in name.split("."):
            if not isinstance(value, dict) or key not in value:
                raise DataError(f"{where}: field {name} is missing; prepare the data again")
            value = value[key]
        if not _fits(value, kind):
            raise DataError(f"{where}: field {name} should be {kind}, found {json.dumps(value)[:60]}; "
                            "prepare the data again")


def _corrupt(path: Path):
    return lambda reason: DataError(f"{path}/{MANIFEST} is corrupt ({reason}); prepare the data again")


class PreparedData:
    """`attncomp data prepare`'s output: manifest, tokenizers and splits."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            found = self.path.is_dir()
        except (OSError, ValueError) as err:  # a name too long, a NUL byte
            raise DataError(f"cannot use {str(path)[:120]!r} as a data directory: "
                            f"{getattr(err, 'strerror', None) or err}") from None
        if not found:
            what = f"{self.path} is a file, not a data directory" if self.path.is_file() else \
                f"no data directory {self.path}"
            raise DataError(f"{what}; make one with `attncomp data prepare` (from text: --train PREFIX --src LANG "
                            "--tgt LANG --out DIR) or `attncomp data sample`")
        if not (self.path / MANIFEST).exists():
            raise DataError(f"{self.path} is not a prepared data directory (no {MANIFEST})")
        self.manifest = read_json(self.path / MANIFEST, what="manifest", error=_corrupt(self.path))
        validate_manifest(self.manifest, f"{self.path}/{MANIFEST}")
        self.dtype = np.dtype(self.manifest["dtype"])

    @property
    def monolingual(self) -> bool:
        """Prepared from one language (`data prepare --lang`): both sides hold the same text."""
        return self.manifest.get("monolingual") is True

    @property
    def vocab(self) -> dict:
        return self.manifest["vocab"]

    def tokenizer(self, side: str) -> Tokenizer:
        """The side's tokenizer: a sentencepiece model, or an imported model's tokenizer.json envelope."""
        return tokenizer_file(self.path / self.vocab[f"{side}_model"])

    def has_split(self, name: str) -> bool:
        return name in self.manifest["splits"]

    def split(self, name: str) -> Split:
        if not self.has_split(name):
            raise DataError(f"{self.path} has no {name} split")
        stats = self.manifest["splits"][name]
        sides = [Side(self.path, f"{name}.{side}", self.dtype, stats["pairs"], stats[f"{side}_tokens"],
                      self.vocab[f"{side}_size"]) for side in ("src", "tgt")]
        return Split(*sides)
