"""A sweep's table as a chart (attncomp.sweep.table writes it beside results.md): for each row, the measured
validation perplexity, BLEU and parameters, and beside them the paper's Table 3 figures where the row is
one of the paper's (its `paper_*` columns).

SVG ids: `bar:Q:measured:ROW` and `bar:Q:paper:ROW`, Q one of ppl, bleu, params_m.
"""

from __future__ import annotations

from attncomp.plot.figures import new_figure

FOR_WHAT = "the sweep's chart"
QUANTITIES = [("ppl", "paper_ppl", "validation perplexity"), ("bleu", "paper_bleu", "validation BLEU"),
              ("params_m", "paper_params_m", "parameters (millions)")]


def _bars(ax, records: list[dict], key: str, paper_key: str, title: str) -> None:
    names = [r["row"] for r in records]
    xs = list(range(len(names)))
    width = 0.4
    for offset, source, colour, field in ((-width / 2, "measured", "#4c72b0", key),
                                          (width / 2, "paper", "#c7c7c7", paper_key)):
        values = [r.get(field) for r in records]
        kept = [(x, v, n) for x, v, n in zip(xs, values, names) if isinstance(v, (int, float))]
        if not kept:
            continue
        bars = ax.bar([x + offset for x, _, _ in kept], [v for _, v, _ in kept], width, color=colour,
                      label=source if source == "measured" else "paper (Table 3)")
        for patch, (_, value, name) in zip(bars.patches, kept):
            patch.set_gid(f"bar:{key}:{source}:{name}")
    ax.set_xticks(xs, names, fontsize=7, rotation=45 if len(names) > 8 else 0)
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    if ax.patches:
        ax.legend(fontsize=6)


def sweep_chart(records: list[dict], title: str = ""):
    """The chart of a sweep's rows (results.json's `rows`); rows without figures yet have no bars."""
    figure = new_figure(FOR_WHAT, max(8.0, 3 * (0.8 + 0.3 * len(records))), 3.4)
    for i, (key, paper_key, label) in enumerate(QUANTITIES):
        _bars(figure.add_subplot(1, 3, i + 1), records, key, paper_key, label)
    if title:
        figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    return figure
