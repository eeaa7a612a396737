"""The paper's Table 3 figures ("Attention Is All You Need", Vaswani et al. 2017): newstest2013 dev
perplexity (per word-piece), BLEU and parameters (millions; an empty cell of the paper's is the
base row's, as the paper says), so a sweep can print them beside the rows it reproduces.

A spec reproduces the row its file is named after: specs/table3/B1.attn and
specs/table3-small/B1.attn both stand for row B1 (the paper names only the groups (A) to (E); the
numbers within a group follow the paper's order, as in specs/table3).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PaperRow:
    change: str  # what the row changes, in the paper's terms
    ppl: float
    bleu: float
    params_m: float


TABLE3: dict[str, PaperRow] = {
    "base": PaperRow("N 6, d_model 512, d_ff 2048, h 8, d_k = d_v 64, P_drop 0.1, eps_ls 0.1", 4.92, 25.8, 65),
    "A1": PaperRow("h 1, d_k = d_v 512", 5.29, 24.9, 65),
    "A2": PaperRow("h 4, d_k = d_v 128", 5.00, 25.5, 65),
    "A3": PaperRow("h 16, d_k = d_v 32", 4.91, 25.8, 65),
    "A4": PaperRow("h 32, d_k = d_v 16", 5.01, 25.4, 65),
    "B1": PaperRow("d_k 16", 5.16, 25.1, 58),
    "B2": PaperRow("d_k 32", 5.01, 25.4, 60),
    "C1": PaperRow("N 2", 6.11, 23.7, 36),
    "C2": PaperRow("N 4", 5.19, 25.3, 50),
    "C3": PaperRow("N 8", 4.88, 25.5, 80),
    "C4": PaperRow("d_model 256, d_k = d_v 32", 5.75, 24.5, 28),
    "C5": PaperRow("d_model 1024, d_k = d_v 128", 4.66, 26.0, 168),
    "C6": PaperRow("d_ff 1024", 5.12, 25.4, 53),
    "C7": PaperRow("d_ff 4096", 4.75, 26.2, 90),
    "D1": PaperRow("P_drop 0.0", 5.77, 24.6, 65),
    "D2": PaperRow("P_drop 0.2", 4.95, 25.5, 65),
    "D3": PaperRow("eps_ls 0.0", 4.67, 25.3, 65),
    "D4": PaperRow("eps_ls 0.2", 5.47, 25.7, 65),
    "E": PaperRow("learned positional embedding instead of sinusoids", 4.92, 25.7, 65),
    "big": PaperRow("N 6, d_model 1024, d_ff 4096, h 16, P_drop 0.3, 300K steps", 4.33, 26.4, 213),
}


def paper_row(spec_path: str | Path) -> str | None:
    """The Table 3 row a spec file reproduces (its file name without .attn), or None."""
    stem = Path(spec_path).stem
    return stem if stem in TABLE3 else None
