"""A sweep trusts neither its state nor its --out (issue 23, items 3, 4 and 7): sweep.json is checked by
one schema (row names are plain file names, numbers finite), read only if a regular file, and an --out
that cannot be a directory is a usage error. Each test failed on the behaviour before the fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

GOOD_ROW = {"name": "tiny", "spec": "tiny.attn", "spec_hash": "0" * 64, "trained": True,
            "result": {"ppl": 10.0, "params_m": 0.1, "steps": 1, "bleu": 1.0}}


def state(data: Path, rows: dict) -> dict:
    return {"format": "attncomp-sweep", "version": 1, "rows": rows,
            "options": {"data": str(data.resolve()), "steps": 1, "minutes": None, "overrides": [],
                        "bleu_sentences": 0}}


def sweep(sandbox, good, out: Path, *extra: str):
    return sandbox.run(["sweep", str(good["spec"]), "--data", str(good["data"]), "--steps", "1",
                        "--bleu-sentences", "0", "--out", str(out), *extra], timeout=120)


def bad_states(data: Path) -> dict[str, str]:
    def row(**changes):
        return json.dumps(state(data, {changes.get("name", "tiny"): {**GOOD_ROW, **changes}}))

    def result(**changes):
        return row(result={**GOOD_ROW["result"], **changes})

    return {"escaping name": row(name="../../../escaped"), "absolute name": row(name="/tmp/escaped"),
            "dot name": row(name=".."), "nested": "[" * 100_000 + "]" * 100_000, "a list": "[]",
            "rows a list": json.dumps({**state(data, {}), "rows": []}), "NaN ppl": result(ppl=float("nan")),
            "inf ppl": result(ppl=float("inf")), "string steps": result(steps="1"), "no ppl": row(result={"steps": 1}),
            "string steps option": json.dumps({**state(data, {}), "options": {**state(data, {})["options"],
                                                                                "steps": "1"}}),
            "name differs from key": json.dumps(state(data, {"tiny": {**GOOD_ROW, "name": "other"}}))}


@pytest.mark.parametrize("case", ["escaping name", "absolute name", "dot name", "nested", "a list", "rows a list",
                                  "NaN ppl", "inf ppl", "string steps", "no ppl", "string steps option",
                                  "name differs from key"])
def test_a_hostile_sweep_state_is_refused_before_anything_runs(case, tmp_path, sandbox, tiny_artifacts):
    out = tmp_path / "a" / "b" / "c" / "out"
    out.mkdir(parents=True)
    (out / "sweep.json").write_text(bad_states(tiny_artifacts["data"])[case])
    outcome = sweep(sandbox, tiny_artifacts, out)
    assert outcome.code == 2 and "is not an attncomp sweep state" in outcome.stderr, outcome.summary()
    assert not outcome.problems(bad_value=True), outcome.summary()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "c", "out", "sweep.json"]


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_sweep_state_that_is_not_a_file_is_refused_unread(kind, tmp_path, sandbox, tiny_artifacts):
    out = tmp_path / "out"
    out.mkdir()
    if kind == "fifo":
        os.mkfifo(out / "sweep.json")
    else:
        (out / "sweep.json").symlink_to("/dev/zero")
    outcome = sweep(sandbox, tiny_artifacts, out)
    assert outcome.code == 2 and "not a regular file" in outcome.stderr and not outcome.problems(), outcome.summary()


def test_a_spec_whose_name_makes_no_row_name_is_refused(tmp_path, sandbox, tiny_artifacts):
    spec = tmp_path / "..attn"  # its stem is "."
    spec.write_text(tiny_artifacts["spec"].read_text())
    outcome = sandbox.run(["sweep", str(spec), "--data", str(tiny_artifacts["data"]), "--steps", "1",
                           "--out", str(tmp_path / "out")], timeout=120)
    assert outcome.code == 2 and "not a plain file name" in outcome.stderr and not outcome.problems(), outcome.summary()


@pytest.mark.parametrize("where", ["under a file", "a file", "under /proc"])
def test_an_out_that_cannot_be_a_directory_is_a_usage_error(where, tmp_path, sandbox, tiny_artifacts):
    (tmp_path / "file").write_text("x\n")
    out = {"under a file": tmp_path / "file" / "out", "a file": tmp_path / "file",
           "under /proc": Path("/proc/attncomp-sweep/out")}[where]
    outcome = sweep(sandbox, tiny_artifacts, out)
    assert outcome.code == 2 and not outcome.problems(bad_value=True), outcome.summary()
    assert (tmp_path / "file").read_text() == "x\n"


def test_a_row_over_the_size_limit_is_refused_before_any_row_trains(tmp_path, sandbox, tiny_artifacts):
    outcome = sweep(sandbox, tiny_artifacts, tmp_path / "out", "--set", "model.layers=1024", "--set",
                    "model.d_model=65536", "--set", "model.d_ff=65536")
    assert outcome.code == 2 and "over the limit" in outcome.stderr and not outcome.problems(), outcome.summary()
    assert not (tmp_path / "out").exists()


def test_the_good_state_the_hostile_ones_are_made_from_opens(tmp_path):
    """Each hostile state above is this one with one thing changed, so each is refused for that thing; it was
    refused for its `--bleu-sentences 0` (the option's documented "no BLEU") until the state file took 0."""
    from attncomp.sweep.state import Options, SweepState

    options = Options(data=str(tmp_path.resolve()), steps=1, minutes=None, overrides=(), bleu_sentences=0)
    (tmp_path / "sweep.json").write_text(json.dumps(state(tmp_path, {"tiny": GOOD_ROW})))
    opened = SweepState.open(tmp_path, options)
    assert opened.rows["tiny"].result["ppl"] == 10.0 and opened.options == options
    opened.save()  # what a sweep with --bleu-sentences 0 writes, it opens again
    assert SweepState.open(tmp_path, options).rows["tiny"].trained
