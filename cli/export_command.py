"""`attncomp export CHECKPOINT --format safetensors --out DIR`."""

from __future__ import annotations

import argparse
from pathlib import Path

FORMATS = ("safetensors",)


def _export(args: argparse.Namespace) -> int:
    from attncomp import checkpoint
    from attncomp.errors import UsageError
    from attncomp.interop import safetensors_dir

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out}: a file is in the way (give a directory)")
    found = checkpoint.read(args.checkpoint)  # checked; a sharded one's weights gathered
    written = safetensors_dir.write(found, out)
    print(f"wrote {out} ({', '.join(p.name for p in written)})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a checkpoint as a deployable directory (safetensors, no pickle)")
    p.add_argument("checkpoint", metavar="CHECKPOINT", help="a checkpoint file or sharded checkpoint directory")
    p.add_argument("--format", choices=FORMATS, default="safetensors",
                   help="safetensors: weights + spec + sentencepiece models, loadable without pickle")
    p.add_argument("--out", required=True, metavar="DIR", help="the directory to write (created)")
    p.set_defaults(handler=_export)
