"""Interoperability: exported directories (safetensors, CTranslate2, torch.export) and imported models.

Needs the optional `interop` extra (`pip install 'attncomp[interop]'`) for its third-party formats;
a missing library is one clear error naming the extra, never an ImportError traceback.
"""

from __future__ import annotations

from attncomp.optional import require  # noqa: F401 (interop's modules import it from here)
