"""Every command that reads a checkpoint, an export or a run directory, given each directory of the later
surfaces (a sharded checkpoint whose index carries a payload, exports holding a FIFO or an empty tokenizer, a
torch.export directory, a sweep whose state escapes, a run whose run.json is nested past the parser): no
traceback, no payload run, a documented exit and one error line, within the time limit.

Apart from tests/hostile/test_property.py (whose directories these are) so that pytest-xdist's loadfile can give
the two files to two workers: the `train --resume` and `sweep --out` readers train one update for each directory
they accept, two thirds of the time the two files took together.
"""

from __future__ import annotations

import shlex

import pytest

from tests.hostile.test_property import HOSTILE_DIRS, TIMEOUT, hostile_dirs


# every command that reads a checkpoint, an export or a run directory, given each directory of the later surfaces
READERS = {"consolidate": ["consolidate", "{dir}", "-o", "{new}"],
           "translate": ["translate", "{dir}", "--input", "{src}", "--device", "cpu"],
           "eval": ["eval", "{dir}", "--src", "{src}", "--ref", "{src}", "--device", "cpu"],
           "export": ["export", "{dir}", "--out", "{new}"], "average": ["average", "{dir}", "-o", "{new}"],
           "train --init": ["train", "{spec}", "--data", "{data}", "--init", "{dir}", "--out", "{new}", "--procs", "1"],
           "train --resume": ["train", "{spec}", "--data", "{data}", "--out", "{dir}", "--resume", "--procs", "1",
                              "--set", "train.steps=1"],
           "sweep --out": ["sweep", "{spec}", "--data", "{data}", "--steps", "1", "--bleu-sentences", "0", "--out",
                           "{dir}"],  # a row it accepts trains one update, and is not scored (seconds)
           "data prepare --tokenizers": ["data", "prepare", "--train", "{prefix}", "--tokenizers", "{dir}", "--out",
                                         "{new}"]}


@pytest.mark.parametrize("command", sorted(READERS))
def test_every_reader_survives_the_directories_of_the_later_surfaces(command, tiny_artifacts, sandbox, tmp_path):
    good = dict(tiny_artifacts, prefix=tiny_artifacts["data"] / "text" / "train")
    for name in sorted(HOSTILE_DIRS):
        where = tmp_path / name
        directory = hostile_dirs(where / "dirs", good, {name})[name]  # only the one given
        argv = [a.format(dir=directory, new=where / "new", src=good["src"], spec=good["spec"], data=good["data"],
                         prefix=good["prefix"]) for a in READERS[command]]
        outcome = sandbox.run(argv, timeout=TIMEOUT.get(argv[0], 60), canary=where / "dirs" / "CANARY")
        problems = outcome.problems(command=argv[0])
        assert not problems, f"attncomp {shlex.join(argv)}\n  {'; '.join(problems)}\n  {outcome.summary()}"
