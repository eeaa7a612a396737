"""A sweep directory: what was asked (data, budget, --set options), the rows and their results.

    OUT/sweep.json        this state, rewritten atomically after every change
    OUT/rows/NAME/        each row's run directory (checkpoints, TensorBoard scalars, its spec)
    OUT/results.{md,csv,json}   the table (attncomp.sweep.table)
    OUT/tb/NAME/          one HParams summary per finished row (`tensorboard --logdir OUT/tb`)

Run the same sweep again with the same OUT and it resumes: finished rows are kept, a row stopped
mid-way continues from its newest checkpoint. A different data directory, budget or --set list in
the same OUT is refused (the rows would not be comparable); new specs may join the sweep.

sweep.json is checked in one place, `StateFile`: a row's name is a plain file name (it names
directories under OUT), numbers are finite, and every field has its type.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Literal, Optional

import pydantic

from attncomp import files
from attncomp.errors import UsageError, printable

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


def check_row_name(name: str) -> str:
    """A row's name names its directories (OUT/rows/NAME, OUT/tb/NAME): a plain file name, printable."""
    if not name or name in (".", "..") or Path(name).name != name or "\\" in name or not name.isprintable():
        raise ValueError(f"row name {printable(name)[:80]!r} is not a plain file name")
    return name


_Finite = pydantic.confloat(allow_inf_nan=False)
_Count = pydantic.conint(strict=True, ge=0)
_Name = Annotated[str, pydantic.AfterValidator(check_row_name)]


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


class ResultFile(pydantic.BaseModel):
    """A scored row (attncomp.sweep.run.score_row): the figures the table and TensorBoard read are typed."""

    model_config = pydantic.ConfigDict(extra="allow")
    ppl: _Finite
    params_m: _Finite
    steps: _Count
    bleu: Optional[_Finite] = None


class RowFile(_Strict):
    name: _Name
    spec: str
    spec_hash: str
    trained: bool = False
    result: Optional[ResultFile] = None


class OptionsFile(_Strict):
    data: str
    steps: Optional[pydantic.conint(strict=True, ge=1)]
    minutes: Optional[pydantic.confloat(gt=0, allow_inf_nan=False)]
    overrides: list[str]
    bleu_sentences: pydantic.conint(strict=True, ge=0)  # 0: no BLEU (`--bleu-sentences 0`)


class StateFile(_Strict):
    format: Literal["attncomp-sweep"]
    version: Literal[1]
    options: OptionsFile
    rows: dict[_Name, RowFile]

    @pydantic.model_validator(mode="after")
    def _names(self) -> "StateFile":
        for key, row in self.rows.items():
            if row.name != key:
                raise ValueError(f"row {key!r} is named {row.name!r}")
        return self


@dataclass
class SweepState:
    out: Path
    options: Options
    rows: dict[str, Row] = field(default_factory=dict)

    @classmethod
    def open(cls, out: Path, options: Options) -> "SweepState":
        """The sweep in `out`, or a new one; its options must be these."""
        path = out / STATE
        if not path.exists() and not path.is_symlink():
            return cls(out, options)
        refused = f"{files.shown_path(path)} is not an attncomp sweep state"
        raw = files.read_json(path, what="sweep state", error=lambda reason: UsageError(f"{refused} ({reason})"))
        try:
            checked = StateFile.model_validate(raw)
        except pydantic.ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(part) for part in first["loc"])[:120] or "the top level"
            raise UsageError(f"{refused} ({printable(where)}: {first['msg'][:160]}); choose another --out") from None
        stored = Options(**{**checked.options.model_dump(), "overrides": tuple(checked.options.overrides)})
        rows = {name: Row(**{**row.model_dump(exclude={"result"}),
                             "result": None if row.result is None else row.result.model_dump()})
                for name, row in checked.rows.items()}
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
        files.make_dir(self.out)
        raw = {"format": FORMAT, "version": 1, "options": asdict(self.options),
               "rows": {name: asdict(row) for name, row in self.rows.items()}}
        files.write_atomically(self.out / STATE, json.dumps(raw, indent=2) + "\n")
