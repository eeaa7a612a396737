"""`attncomp import DIR`: a Hugging Face model directory -> an Imported model, by family: Marian through
attncomp.interop.marian_import (its sentencepiece tokenizers), every other family through
attncomp.interop.hf_import."""

from __future__ import annotations

from pathlib import Path

from attncomp.interop import families, hf_import, marian_import
from attncomp.interop.hf_import import Imported

write = hf_import.write


def import_directory(directory: str | Path, allow_pickle: bool = False) -> Imported:
    directory = Path(directory)
    family, config = hf_import.read_config(directory)
    if family is families.MARIAN:
        return marian_import.import_directory(directory, allow_pickle, config)
    return hf_import.import_directory(directory, allow_pickle)
