"""Decoding options that pass argparse and then failed (issue 23, item 5): temperatures and top-p that are
0 or inf in float32, a sample count that would never finish, closed standard input or output. Each is a
translation or one clear error line with a non-zero exit; each test failed on the behaviour before the fix."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
import torch

from attncomp.decode.sampling import Sampling, filter_logits
from tests.conftest import ROOT

CHECKPOINT = ROOT / "tests/fixtures/legacy/checkpoint.pt"


@pytest.mark.parametrize("sampling", [Sampling(temperature=1e-300), Sampling(temperature=1e300),
                                      Sampling(top_p=1e-300), Sampling(temperature=1e-300, top_p=1e-300)])
def test_extreme_sampling_settings_leave_a_distribution(sampling):
    logits = torch.tensor([[0.0, -1.0, -2000.0, -float("inf")], [5.0, 5.0, 4.0, 3.0]])
    probs = filter_logits(logits, sampling).softmax(-1)
    assert torch.isfinite(probs).all() and torch.allclose(probs.sum(-1), torch.ones(2, dtype=probs.dtype))
    torch.multinomial(probs, 1)  # what sample() draws from


@pytest.mark.parametrize("options", [["--temperature", "1e-300"], ["--temperature", "1e300"], ["--top-p", "1e-300"]])
def test_extreme_sampling_options_translate(options, tmp_path, sandbox):
    text = tmp_path / "in.txt"
    text.write_text("a b c\nd e\n")
    outcome = sandbox.run(["translate", str(CHECKPOINT), "--input", str(text), "--device", "cpu", *options],
                          timeout=90)
    assert outcome.code == 0 and len(outcome.stdout.splitlines()) == 2, outcome.summary()
    assert not outcome.problems(), outcome.summary()


@pytest.mark.parametrize("options", [["--sample", "--nbest", "10000000"], ["--beam", "10000000"],
                                     ["--nbest", "1025", "--beam", "2000"]])
def test_counts_that_would_not_finish_are_refused(options, sandbox):
    outcome = sandbox.run(["translate", str(CHECKPOINT), "--device", "cpu", *options], timeout=30)
    assert outcome.code == 2 and "must be at most 1024" in outcome.stderr and not outcome.problems()


def shell(command: str) -> subprocess.CompletedProcess:
    main = f"{shlex.quote(sys.executable)} -m attncomp.cli.main"
    return subprocess.run(["bash", "-c", command.replace("attncomp", main, 1)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


@pytest.mark.parametrize("command,stream", [("attncomp translate {c} --device cpu <&-", "input"),
                                            ("attncomp translate {c} --device cpu --stream <&-", "input"),
                                            ("attncomp eval {c} --src - --ref {c} --device cpu <&-", "input"),
                                            ("echo a | attncomp translate {c} --device cpu >&-", "output"),
                                            ("echo a | attncomp translate {c} --device cpu --stream >&-", "output")])
def test_a_closed_standard_stream_is_one_error_line(command, stream):
    done = shell(command.format(c=shlex.quote(str(CHECKPOINT))))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and f"standard {stream} is closed" in done.stderr
