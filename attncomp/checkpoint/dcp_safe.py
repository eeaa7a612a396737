"""DCP's reader and load planners made safe for files from elsewhere (see attncomp.checkpoint.sharded): the
shard index read by an unpickler that admits only METADATA_CLASSES, byte items read with `weights_only=True`.
Apart from sharded.py because importing torch.distributed.checkpoint takes seconds (it imports DTensor), which
only a sharded checkpoint should cost."""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, _EmptyStateDictLoadPlanner
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

from attncomp.checkpoint.schema import CheckpointError, gist
from attncomp.files import read_regular


MAX_METADATA_BYTES = 1 << 30  # the index of a model of billions of parameters is a few megabytes

_DCP = "torch.distributed.checkpoint."
METADATA_CLASSES = frozenset({  # (module, name) the unpickler of a shard index may look up
    *((_DCP + "metadata", name) for name in ("Metadata", "StorageMeta", "MetadataIndex", "TensorProperties",
                                             "TensorStorageMetadata", "BytesStorageMetadata",
                                             "ChunkStorageMetadata", "_MEM_FORMAT_ENCODING")),
    (_DCP + "filesystem", "_StorageInfo"),
    ("torch", "Size"), ("torch.serialization", "_get_layout"), ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"), ("pathlib", "PurePosixPath"), ("pathlib", "PureWindowsPath"),
})


class _MetadataUnpickler(pickle.Unpickler):
    """Looks up METADATA_CLASSES and torch's dtypes (`torch.float32`), nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in METADATA_CLASSES or (module == "torch" and isinstance(getattr(torch, name, None),
                                                                                  torch.dtype)):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a shard index")


class SafeReader(FileSystemReader):
    """DCP's file reader with the shard index read by `_MetadataUnpickler`, from a regular file only."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = Path(self._get_metadata_path(kwargs.get("rank")))
        data = read_regular(path, limit=MAX_METADATA_BYTES, what="shard index", error=CheckpointError)
        try:
            metadata = _MetadataUnpickler(io.BytesIO(data)).load()
        except Exception as err:  # truncated, foreign, or a class the unpickler refuses
            raise CheckpointError(f"{path} is an unreadable shard index ({gist(err)})") from None
        if not isinstance(metadata, Metadata) or not isinstance(metadata.storage_data, dict):
            raise CheckpointError(f"{path} is not a shard index")
        if getattr(metadata, "storage_meta", None) is None:  # as FileSystemReader.read_metadata does
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


def _weights_only(value: io.BytesIO) -> io.BytesIO:
    """A byte item read with `weights_only=True`, pickled again here: DCP's planners read byte items with
    `weights_only=False`, and are handed only this copy."""
    safe = io.BytesIO()
    torch.save(torch.load(value, weights_only=True), safe)
    safe.seek(0)
    return safe


class SafePlanner(DefaultLoadPlanner):
    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        super().load_bytes(read_item, _weights_only(value))


class SafeKeysPlanner(_EmptyStateDictLoadPlanner):
    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        super().load_bytes(read_item, _weights_only(value))
