"""A sweep directory: what was asked (data, budget, --set options), the rows and their results.

    OUT/sweep.json        this state, rewritten atomically after every change
    OUT/rows/NAME/        each row's run directory (checkpoints, TensorBoard scalars, its spec)
    OUT/results.{md,csv,json}   the table (attncomp.sweep.table)
    OUT/tb/NAME/          one HParams summary per finished row (`tensorboard --logdir OUT/tb`)

Run the same sweep again with the same OUT and it resumes: finished rows are kept, a row stopped
mid-way continues from its newest checkpoint. A different data directory, budget or --set list in
the same OUT is refused (the rows would not be comparable); new specs may join the sweep.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from attncomp import files
from attncomp.errors import UsageError

STATE = "sweep.json"
FORMAT = "attncomp-sweep"


@dataclass(frozen=True)
class Options:
    """What every row of a sweep shares; a sweep directory keeps the options it was started with."""

    data: str  # the prepared data directory, absolute
    steps: int | None  # train.steps for every row, or None for the spec's own
    minutes: float | None  # the time limit of every row, or None
    overrides: tuple[str, ...]  # --set options, applied to every spec
    bleu_sentences: int  # validation sentences translated for BLEU

    def differences(self, other: "Options") -> list[str]:
        mine, theirs = asdict(self), asdict(other)
        return [f"{key} {theirs[key]!r} -> {mine[key]!r}" for key in mine if mine[key] != theirs[key]]


@dataclass
class Row:
    name: str  # unique in the sweep: the spec file's name without .attn
    spec: str  # the spec file as given
    spec_hash: str  # of the resolved spec with the sweep's overrides
    trained: bool = False  # training finished (its final checkpoint is written)
    result: dict | None = None  # None until trained and evaluated


@dataclass
class SweepState:
    out: Path
    options: Options
    rows: dict[str, Row] = field(default_factory=dict)

    @classmethod
    def open(cls, out: Path, options: Options) -> "SweepState":
        """The sweep in `out`, or a new one; its options must be these."""
        path = out / STATE
        if not path.exists():
            return cls(out, options)
        try:
            raw = json.loads(path.read_text())
            if raw.get("format") != FORMAT:
                raise ValueError
            stored = Options(**{**raw["options"], "overrides": tuple(raw["options"]["overrides"])})
            rows = {name: Row(**row) for name, row in raw["rows"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise UsageError(f"{path} is not an attncomp sweep state; choose another --out") from None
        changed = options.differences(stored)
        if changed:
            raise UsageError(f"{out} holds a sweep with other options ({'; '.join(changed)}); its rows would not "
                             "be comparable: run it with the same options, or choose another --out")
        return cls(out, options, rows)

    def add(self, name: str, spec: str, spec_hash: str) -> Row:
        """The row `name`, added if new; the same name with another resolved spec is refused."""
        row = self.rows.get(name)
        if row is None:
            row = self.rows[name] = Row(name, spec, spec_hash)
        elif row.spec_hash != spec_hash:
            raise UsageError(f"{self.out} has a row {name} trained from another spec ({row.spec}, hash "
                             f"{row.spec_hash[:12]}); rename {spec} or choose another --out")
        return row

    def run_dir(self, name: str) -> Path:
        return self.out / "rows" / name

    def save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        raw = {"format": FORMAT, "version": 1, "options": asdict(self.options),
               "rows": {name: asdict(row) for name, row in self.rows.items()}}
        files.write_atomically(self.out / STATE, json.dumps(raw, indent=2) + "\n")
