"""A sweep's table: one row per spec with the hyperparameters Table 3 varies, the measured figures and,
where the spec reproduces a row of the paper's Table 3, the paper's figures beside them.

Written as Markdown, CSV and JSON (each atomically), as a chart beside them (results.svg, with the `plot`
extra: attncomp.plot.table_chart), and as TensorBoard HParams summaries, one run per finished row under
OUT/tb, so `tensorboard --logdir OUT/tb` shows the sweep in its HParams tab.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from attncomp import files
from attncomp.ir import nodes
from attncomp.plot import figures
from attncomp.sweep.paper import TABLE3, paper_row
from attncomp.sweep.state import SweepState

# (key, Markdown heading); the hyperparameters come from the resolved spec, the rest from the result
HYPER = [("N", "N"), ("d_model", "d_model"), ("d_ff", "d_ff"), ("h", "h"), ("d_k", "d_k"), ("d_v", "d_v"),
         ("P_drop", "P_drop"), ("eps_ls", "eps_ls"), ("positions", "positions")]
MEASURED = [("params_m", "params ×10^6"), ("steps", "steps"), ("train_minutes", "train min"),
            ("ppl", "PPL (valid)"), ("bleu", "BLEU (valid)")]
PAPER = [("paper_ppl", "paper PPL"), ("paper_bleu", "paper BLEU"), ("paper_params_m", "paper params")]
COLUMNS = [("row", "row"), ("spec", "spec"), *HYPER, *MEASURED, *PAPER]


def hyperparameters(spec: nodes.Spec) -> dict:
    """Table 3's columns of a resolved spec (the encoder's stack; the decoder's for a decoder-only model)."""
    m = spec.model
    stack = m.encoder or m.decoder
    kind = m.positions.kind  # sinusoidal, learned, none, alibi, relative
    return {"N": stack.layers, "d_model": stack.d_model, "d_ff": stack.d_ff, "h": stack.heads, "d_k": stack.d_k,
            "d_v": stack.d_v, "P_drop": m.dropout.residual, "eps_ls": spec.train.loss.label_smoothing,
            "positions": kind}


def paper_figures(spec_path: str) -> dict:
    row = paper_row(spec_path)
    if row is None:
        return {"paper_row": None}
    figures = TABLE3[row]
    return {"paper_row": row, "paper_ppl": figures.ppl, "paper_bleu": figures.bleu,
            "paper_params_m": figures.params_m}


def _records(state: SweepState) -> list[dict]:
    return [{"row": row.name, "spec": row.spec, **(row.result or {})} for row in state.rows.values()]


FORMATS = {"params_m": ".2f", "train_minutes": ".1f", "ppl": ".2f", "bleu": ".2f", "paper_ppl": ".2f",
           "paper_bleu": ".1f"}


def _cell(key: str, value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return format(value, FORMATS.get(key, "g"))
    return str(value)


def markdown(records: list[dict]) -> str:
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |",
             "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(_cell(key, r.get(key)) for key, _ in COLUMNS) + " |" for r in records]
    return "\n".join(lines) + "\n"


def csv_text(records: list[dict]) -> str:
    keys = [key for key, _ in COLUMNS] + ["paper_row", "bleu_sentences", "decode_sentences_per_s", "spec_hash"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, keys, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return buffer.getvalue()


def write_tables(state: SweepState) -> None:
    """OUT/results.md, .csv and .json from the state (unfinished rows with empty figures), and the
    HParams summary of every finished row that has none yet."""
    records = _records(state)
    out = state.out
    options = state.options
    budget = f"{options.steps} steps" if options.steps is not None else f"{options.minutes:g} minutes"
    header = (f"Sweep of {len(records)} spec(s) on {options.data}, {budget} each"
              + (f", --set {' '.join(options.overrides)}" if options.overrides else "")
              + f"; BLEU on the first {options.bleu_sentences} validation sentences.\n\n")
    files.write_atomically(out / "results.md", header + markdown(records))
    files.write_atomically(out / "results.csv", csv_text(records))
    files.write_atomically(out / "results.json", json.dumps({"options": {**state.options.__dict__,
                                                               "overrides": list(options.overrides)},
                                                   "rows": records}, indent=2) + "\n")
    if figures.available():  # without the plot extra, `attncomp sweep` says the chart was skipped
        write_chart(out / CHART, records)
    for record in records:
        if "ppl" in record:
            write_hparams(out / "tb" / record["row"], record)


CHART = "results.svg"


def write_chart(path: Path, records: list[dict]) -> None:
    """The table as a chart: measured figures beside the paper's (attncomp.plot.table_chart), atomically."""
    from attncomp.plot.table_chart import sweep_chart

    figures.save_figure(sweep_chart(records), path, salt="sweep")


def write_hparams(directory: Path, record: dict) -> None:
    """One HParams run: the row's hyperparameters and its measured figures (skipped if already there)."""
    if directory.is_dir() and any(directory.glob("events.out.tfevents.*")):
        return
    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.summary import hparams

    hyper = {"row": record["row"], "spec": record["spec"], **{key: record[key] for key, _ in HYPER}}
    metrics = {f"valid/{key}": float(record[key]) for key in ("ppl", "bleu") if record.get(key) is not None}
    metrics["params_m"] = float(record["params_m"])
    experiment, start, end = hparams(hyper, metrics)
    with SummaryWriter(log_dir=str(directory)) as writer:
        for summary in (experiment, start, end):
            writer.file_writer.add_summary(summary)
        for key, value in metrics.items():
            writer.add_scalar(key, value, record.get("steps", 0))
