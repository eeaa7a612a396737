"""bench/quality.py and bench/gpu_decode.py as commands (bench.run_command): a bad option, file or earlier
result is one error line and a non-zero exit before anything trains or decodes, and what they write is
written whole. Before: `quality.py --prepared DIR` without --src/--ref was a TypeError traceback; a damaged
results.json with --only a JSONDecodeError traceback (after the other side's data was prepared); a missing
--src was found only by `attncomp eval` after the whole training budget was spent; `gpu_decode.py --json`
under a missing folder a FileNotFoundError traceback after the first row had decoded; `--beam 0`, an unknown
--dtypes name or a missing checkpoint rows of errors and exit 0. Each test failed on the code before the fix."""

from __future__ import annotations

import json

import pytest

from bench import gpu_decode, quality, run_command
from tests.conftest import ROOT

CHECKPOINT = ROOT / "tests/fixtures/legacy/checkpoint.pt"


def one_error(main, argv, capsys) -> tuple[int, str]:
    """The exit code and the error line of `main(argv)` run as its command; no traceback."""
    with pytest.raises(SystemExit) as stop:
        run_command(lambda: main(argv))
    err = capsys.readouterr().err
    assert stop.value.code not in (0, None) and "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return stop.value.code, lines[0]


@pytest.fixture
def lines(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("a b c\n")
    return path


def test_quality_prepared_without_its_test_set(tmp_path, capsys):
    code, line = one_error(quality.main, ["--prepared", str(tmp_path), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "--prepared DIR needs --src FILE and --ref FILE" in line
    assert not (tmp_path / "out").exists()


def test_quality_missing_test_file_is_refused_before_training(tmp_path, lines, capsys):
    code, line = one_error(quality.main, ["--prepared", str(tmp_path / "none"), "--src", str(lines), "--ref",
                                          str(tmp_path / "missing.de"), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "no such file" in line and not (tmp_path / "out").exists()


@pytest.mark.parametrize("text", ["{bad", "[1, 2]", '{"attncomp": 3}'])
def test_quality_only_with_a_damaged_results_file(text, tmp_path, lines, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out/results.json").write_text(text)
    code, line = one_error(quality.main, ["--only", "reference", "--prepared", str(tmp_path / "none"), "--src",
                                          str(lines), "--ref", str(lines), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "results.json" in line
    assert (tmp_path / "out/results.json").read_text() == text  # kept for the person to look at


@pytest.mark.parametrize("options,expected", [
    (["--json", "/nonexistent-dir/rows.json"], "--json"),
    (["--beam", "0", "--ct2", "float32"], "--beam: must be at least 1"),
    (["--dtypes", "float64"], "'float64' is not one of float32, bfloat16, float16"),
    (["--src", "-"], "not stdin"),
    (["--alpha", "nan"], "--alpha"),
])
def test_gpu_decode_bad_options_are_refused_before_any_row(options, expected, lines, capsys):
    argv = [str(CHECKPOINT), "--src", str(lines), "--ref", str(lines), "--device", "cpu", "--dtypes", "float32",
            "--ct2", "", *options]
    code, line = one_error(gpu_decode.main, argv, capsys)
    assert code == 2 and expected in line


def test_gpu_decode_a_missing_checkpoint_is_one_error(tmp_path, lines, capsys):
    argv = [str(tmp_path / "none.pt"), "--src", str(lines), "--ref", str(lines), "--device", "cpu",
            "--dtypes", "float32", "--ct2", "", "--json", str(tmp_path / "rows.json")]
    code, line = one_error(gpu_decode.main, argv, capsys)
    assert code != 0 and "none.pt" in line and not (tmp_path / "rows.json").exists()


def test_gpu_decode_no_row_ran_is_an_error_and_the_rows_are_kept(tmp_path, lines, capsys, monkeypatch):
    """Every row failing (here: `attncomp eval` made to fail) exits non-zero; --json has every row whole."""
    def failing(*args, **kwargs):
        raise RuntimeError("eval failed")

    monkeypatch.setattr(gpu_decode, "ours", failing)
    argv = [str(CHECKPOINT), "--src", str(lines), "--ref", str(lines), "--device", "cpu",
            "--dtypes", "float32,bfloat16", "--ct2", "", "--json", str(tmp_path / "rows.json")]
    code, line = one_error(gpu_decode.main, argv, capsys)
    assert code == 2 and "no row ran" in line and "eval failed" in line
    assert [row["dtype"] for row in json.loads((tmp_path / "rows.json").read_text())] == ["float32", "bfloat16"]
