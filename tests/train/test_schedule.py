"""attncomp.train.schedule: the warning for a run that ends inside its schedule's warm-up."""

from __future__ import annotations

import pytest

from attncomp.ir import nodes
from attncomp.train.schedule import learning_rate, warmup_outlasts_run


def test_a_run_inside_the_default_warmup_is_warned_about_with_its_share_of_the_peak():
    """The default noam(warmup = 4000) over 5 updates: 5 / 4000 of the peak, 0.125%."""
    warning = warmup_outlasts_run(nodes.Noam(warmup=4000), 5)
    assert warning == ("the run's 5 updates end inside its schedule's warm-up of 4,000: the learning rate rises to "
                       "0.12% of the peak it reaches at update 4,000; for a short run, shorten the warm-up "
                       "(--set \"train.schedule=noam(warmup = 1)\")")
    lr = learning_rate(nodes.Noam(warmup=4000), 512, 5)
    assert lr(5) / lr(4000) == pytest.approx(5 / 4000)


@pytest.mark.parametrize("schedule, steps", [(nodes.Noam(warmup=4000), 4000), (nodes.InverseSqrt(warmup=10), 200),
                                             (nodes.Constant(lr=1e-3), 5), (nodes.Cosine(warmup=0), 5)])
def test_no_warning_when_the_warmup_ends_within_the_run(schedule, steps):
    assert warmup_outlasts_run(schedule, steps) is None


def test_inverse_sqrt_and_constant_warmups_are_warned_about_too():
    assert "warm-up of 4,000" in warmup_outlasts_run(nodes.InverseSqrt(warmup=4000), 600)
    assert "inverse_sqrt(warmup = 60)" in warmup_outlasts_run(nodes.InverseSqrt(warmup=4000), 600)
    assert "rises to 50%" in warmup_outlasts_run(nodes.Constant(lr=1e-3, warmup=10), 5)
