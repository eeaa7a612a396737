"""A prepared data directory, read through memory maps; every inconsistency is a clear error."""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import numpy as np

from attncomp.data.prepare import FORMAT, MANIFEST
from attncomp.data.tokenizer import Tokenizer
from attncomp.errors import DataError


class Side:
    """One side of one split: token ids of every sentence, each ending in </s>."""

    def __init__(self, directory: Path, name: str, dtype: np.dtype, sentences: int, tokens: int):
        self.name = name
        idx, bin_ = directory / f"{name}.idx", directory / f"{name}.bin"
        for path in (idx, bin_):
            if not path.is_file():
                raise DataError(f"data directory {directory} is missing {path.name}; prepare it again")
        self.offsets = np.fromfile(idx, dtype=np.int64)
        if len(self.offsets) != sentences + 1 or (sentences and self.offsets[-1] != tokens):
            raise DataError(f"{idx} does not match {MANIFEST} ({len(self.offsets) - 1} sentences, "
                            f"manifest says {sentences}); the directory is corrupt: prepare it again")
        if bin_.stat().st_size != tokens * np.dtype(dtype).itemsize:
            raise DataError(f"{bin_} has {bin_.stat().st_size} bytes, {MANIFEST} implies "
                            f"{tokens * np.dtype(dtype).itemsize}; the directory is corrupt: prepare it again")
        self.tokens = np.memmap(bin_, dtype=dtype, mode="r") if tokens else np.zeros(0, dtype=dtype)

    @cached_property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __getitem__(self, i: int) -> np.ndarray:
        return np.asarray(self.tokens[self.offsets[i] : self.offsets[i + 1]], dtype=np.int64)


class Split:
    def __init__(self, src: Side, tgt: Side):
        self.src, self.tgt = src, tgt

    def __len__(self) -> int:
        return len(self.src.offsets) - 1


class PreparedData:
    """`attncomp data prepare`'s output: manifest, tokenizers and splits."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise DataError(f"no data directory {self.path}; make one with `attncomp data prepare` "
                            "or `attncomp data sample`")
        try:
            self.manifest = json.loads((self.path / MANIFEST).read_text())
        except FileNotFoundError:
            raise DataError(f"{self.path} is not a prepared data directory (no {MANIFEST})") from None
        except (OSError, ValueError):
            raise DataError(f"{self.path}/{MANIFEST} is corrupt; prepare the data again") from None
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != FORMAT:
            raise DataError(f"{self.path}/{MANIFEST} is not an attncomp data manifest")
        self.dtype = np.dtype(self.manifest["dtype"])

    @property
    def vocab(self) -> dict:
        return self.manifest["vocab"]

    def tokenizer(self, side: str) -> Tokenizer:
        return Tokenizer.from_file(self.path / self.vocab[f"{side}_model"])

    def has_split(self, name: str) -> bool:
        return name in self.manifest["splits"]

    def split(self, name: str) -> Split:
        if not self.has_split(name):
            raise DataError(f"{self.path} has no {name} split")
        stats = self.manifest["splits"][name]
        sides = [Side(self.path, f"{name}.{side}", self.dtype, stats["pairs"], stats[f"{side}_tokens"])
                 for side in ("src", "tgt")]
        return Split(*sides)
