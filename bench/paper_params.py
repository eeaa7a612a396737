"""Our parameter count for every paper spec next to Table 3's, as a markdown table.

    python bench/paper_params.py            # prints the table in docs/compiler.md
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAPER = {  # Table 3, params x 10^6; rows the paper leaves empty have the base model's 65M
    "base": 65, "A1": 65, "A2": 65, "A3": 65, "A4": 65, "B1": 58, "B2": 60, "C1": 36, "C2": 50, "C3": 80,
    "C4": 28, "C5": 168, "C6": 53, "C7": 90, "D1": 65, "D2": 65, "D3": 65, "D4": 65, "E": 65, "big": 213,
}
ORDER = ["base", "A1", "A2", "A3", "A4", "B1", "B2", "C1", "C2", "C3", "C4", "C5", "C6", "C7",
         "D1", "D2", "D3", "D4", "E", "big"]


def rows() -> list[str]:
    import attncomp
    from attncomp.report import count_params

    out = ["| spec | d_model | ours | paper | difference | embedding rows the paper's count implies |",
           "|------|---------|------|-------|------------|------------------------------------------|"]
    for name in ORDER:
        path = ROOT / "specs" / (f"{name}.attn" if name in ("base", "big") else f"table3/{name}.attn")
        model = attncomp.compile(path, device="meta", passes=())
        ours, _ = count_params(model)
        d = model.spec.model.d_model
        implied = (PAPER[name] * 1e6 - (ours - 37000 * d)) / d
        out.append(f"| {name} | {d} | {ours / 1e6:.2f}M | {PAPER[name]}M | "
                   f"{ours / 1e6 - PAPER[name]:+.2f}M ({100 * (ours / 1e6 / PAPER[name] - 1):+.1f}%) | {implied:,.0f} |")
    return out


if __name__ == "__main__":
    print("\n".join(rows()))
