"""bench/loss.py keeps working on CPU with small shapes."""

from __future__ import annotations

from bench import loss


def test_both_losses_are_timed(capsys):
    results = loss.main(["--device", "cpu", "--tokens", "64", "--d-model", "8", "--vocab", "100", "--chunk", "16",
                         "--reps", "2"])
    assert set(results) == {"plain", "fused"} and all(ms > 0 for ms, _ in results.values())
    assert "| fused |" in capsys.readouterr().out
