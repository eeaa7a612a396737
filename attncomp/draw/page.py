"""`attncomp page RUN`: one self-contained HTML file about a run (its pictures inlined as SVG, nothing read
from the network or another file when it is opened): the best checkpoint's scores, the curves, the drawing
of its architecture, the first validation sentences translated with the spec's decoding, the build report
and the spec, as stored in the checkpoint.

The best checkpoint is checkpoint_best.pt where train.validation kept one; else the checkpoint of the
lowest validation loss the run logged, if it is still there; else the newest checkpoint, or the average.
Translating runs on the CPU, a sentence at a time, and stops at the time given (the page says so).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import jinja2

from attncomp import __version__, ir
from attncomp import checkpoint as ckpt
from attncomp.compiler import compile_spec
from attncomp.data.dataset import PreparedData
from attncomp.decode.translate import Translator
from attncomp.draw.picture import picture
from attncomp.draw.plan import plan_drawing
from attncomp.errors import AttncompError, UsageError
from attncomp.files import shown_path
from attncomp.loading import load_checkpoint
from attncomp.lower import family_of
from attncomp.plot.curves import curves_figure
from attncomp.plot.figures import figure_bytes
from attncomp.plot.runs import Run, read_run
from attncomp.report import build_report, format_report

TEMPLATES = Path(__file__).parent / "templates"


@dataclass
class Best:
    name: str
    path: Path
    step: int
    metrics: list[tuple[str, str]]


def best_checkpoint(run: Run) -> Path:
    """The run's best checkpoint (see the module docstring), or a UsageError line when it has none."""
    if (run.path / ckpt.BEST).is_file():
        return run.path / ckpt.BEST
    listed = dict(ckpt.listed(run.path))
    losses = run.scalars.get("valid/loss")
    if losses is not None:
        kept = [(value, step) for step, value in zip(losses.steps, losses.values) if step in listed]
        if kept:
            return listed[min(kept)[1]]
    if listed:
        return listed[max(listed)]
    if (run.path / ckpt.AVERAGE).is_file():
        return run.path / ckpt.AVERAGE
    raise UsageError(f"{shown_path(run.path)} has no checkpoint yet: a page shows a trained model")


def inline_svg(figure, salt: str) -> str:
    """A figure as an <svg> element to inline in HTML (its XML declaration and DOCTYPE dropped)."""
    text = figure_bytes(figure, "svg", salt).decode("utf-8")
    return text[text.index("<svg"):]


def _scores(found: ckpt.Checkpoint, path: Path) -> Best:
    metrics = [(k, f"{v:.4g}" if isinstance(v, float) else str(v)) for k, v in sorted(found.header.metrics.items())]
    return Best(path.name, path, found.header.step, metrics)


def translations(model, data_path: str | None, sentences: int, seconds: float) -> tuple[list[dict], str]:
    """The first validation sentences translated with the spec's decoding, at most `seconds` spent on them."""
    if sentences <= 0:
        return [], "No sentences asked for (--sentences 0)."
    if not family_of(model.spec.model).decodes:
        return [], f"{model.spec.model.name} has no decoder: it translates nothing."
    try:
        data = PreparedData(data_path) if data_path else None
    except AttncompError as err:
        return [], f"The run's data cannot be read ({err})."
    if data is None or not data.has_split("valid"):
        return [], f"The run's data ({data_path or 'not recorded in run.json'}) has no validation split here."
    split = data.split("valid")
    src, tgt = data.tokenizer("src"), data.tokenizer("tgt")
    decode = model.spec.decode
    translator = Translator(model, src, tgt, decode.beam, decode.length_penalty, decode.max_len, progress=False)
    rows, started = [], time.monotonic()
    for i in range(min(sentences, len(split))):
        if time.monotonic() - started > seconds:
            break
        source, reference = src.decode([split.src[i].tolist()])[0], tgt.decode([split.tgt[i].tolist()])[0]
        rows.append({"source": source, "reference": reference, "hypothesis": translator.translate([source])[0][0].text})
    note = (f"The first {len(rows)} validation sentences of {data_path}, translated on the CPU with the spec's "
            f"decoding (beam {decode.beam}, length penalty {decode.length_penalty:g}) in "
            f"{time.monotonic() - started:.1f} s" + (f" (stopped at the {seconds:g} s allowed)."
                                                    if len(rows) < min(sentences, len(split)) else "."))
    return rows, note


def render_page(run_path: str, sentences: int = 5, seconds: float = 60.0) -> str:
    """The HTML page of the run directory `run_path`."""
    run = read_run(run_path)
    path = best_checkpoint(run)
    model, found = load_checkpoint(path, device="cpu")
    meta = compile_spec(model.spec, device="meta")
    report = build_report(meta)
    data = run.record.get("data")  # a damaged run.json's `data` may be anything: only a path is read
    rows, note = translations(model, data if isinstance(data, str) else None, sentences, seconds)
    salt = re.sub(r"[^A-Za-z0-9]", "", model.spec.model.name)
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                                     undefined=jinja2.StrictUndefined)
    return environment.get_template("page.html.j2").render(
        name=f"{run.name}: {model.spec.model.name}", run=str(run.path), model=model.spec.model.name,
        hash=ir.spec_hash(model.spec), version=__version__, best=_scores(found, path),
        curves=inline_svg(curves_figure([run]), f"curves{salt}"),
        drawing=inline_svg(picture(plan_drawing(meta, report)), f"drawing{salt}"),
        translations=rows, translations_note=note, report=format_report(report), spec=found.header.spec)
