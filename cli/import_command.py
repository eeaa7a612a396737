"""`attncomp import DIR --out OUT`: a Hugging Face model directory -> an attncomp spec and checkpoint."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from attncomp import files
from attncomp.errors import UsageError, printable
from attncomp.interop import importing


def _import(args: argparse.Namespace) -> int:
    out, shown = Path(args.out), printable(args.out)
    try:
        if out.is_symlink() and not out.exists():  # the rename would replace the link; a write would follow it
            raise UsageError(f"--out {shown}: a symbolic link to nothing; give a new or empty directory")
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise UsageError(f"--out {shown}: exists and is not an empty directory")
    except (OSError, ValueError) as err:  # a name too long, a NUL byte, an unreadable directory
        raise UsageError(f"--out {shown}: {getattr(err, 'strerror', None) or err}") from None
    imported = importing.import_directory(Path(args.directory), allow_pickle=args.allow_pickle)
    # written under a temporary name beside --out and renamed into place (as export does), so that a failure
    # or Ctrl-C between model.attn and checkpoint.pt never leaves a directory a second import refuses as not empty
    out = out.resolve() if out.is_symlink() else out
    work = out.parent / f".{out.name}.tmp-{os.getpid()}"
    try:
        files.make_dir(out.parent)
        shutil.rmtree(work, ignore_errors=True)
        files.make_dir(work)
        written = [out / p.name for p in importing.write(imported, work, Path(args.directory))]
        os.replace(work, out)
    except (OSError, ValueError) as err:  # ValueError: a NUL byte in the name
        raise UsageError(f"cannot write --out {shown}: {getattr(err, 'strerror', None) or err}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    generates = imported.spec.model.decoder is not None
    checkpoint = printable(str(out / 'checkpoint.pt'))
    print(f"wrote {printable(str(out))} ({', '.join(p.name for p in written)}): a {imported.family} model with its "
          "tokenizer; " + (f"generate with: attncomp translate {checkpoint}" if generates else
                           f"fine-tune on data prepared with --tokenizers {checkpoint}"))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import a Hugging Face model directory (save_pretrained's layout) "
                                      "as a checkpoint")
    p.add_argument("directory", metavar="DIR",
                   help="config.json (its model_type picks the family: docs/interop.md), model.safetensors "
                        "(or model.safetensors.index.json and its shards), and the tokenizer's files")
    p.add_argument("--out", required=True, metavar="OUT", help="the directory to write (new or empty): "
                   "model.attn and checkpoint.pt")
    p.add_argument("--allow-pickle", action="store_true",
                   help="read pytorch_model.bin when there is no model.safetensors "
                        "(a pickle: only from a source you trust)")
    p.set_defaults(handler=_import)
