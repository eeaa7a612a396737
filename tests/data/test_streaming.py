"""`data prepare` at scale: chunks, workers, the tokenizer's sample, more input formats, cheap fingerprints."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from attncomp.cli.main import run
from attncomp.data import prepare as prepare_module
from attncomp.data import text as text_module
from attncomp.data.dataset import PreparedData
from attncomp.data.sample_corpus import generate
from attncomp.data.tokenizer_sample import Choice

ROOT = Path(__file__).resolve().parents[2]


def _corpus(directory: Path, pairs) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    for lang, column in (("en", 0), ("xx", 1)):
        (directory / f"train.{lang}").write_text("".join(p[column] + "\n" for p in pairs), encoding="utf-8")
    return str(directory / "train")


def _prepare(out, *sources, extra=()):
    return run(["data", "prepare", "--train", *sources, "--src", "en", "--tgt", "xx", "--out", str(out),
                "--vocab-size", "120", *extra])


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name != "manifest.json"}


def test_one_and_two_workers_write_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(prepare_module, "CHUNK", 700)  # 5,000 pairs: 8 chunks, so two workers share them
    prefix = _corpus(tmp_path / "raw", generate(1, 5000) + [("long " * 300, "lang " * 300)])
    outs = {}
    for workers in ("1", "2"):
        outs[workers] = tmp_path / f"w{workers}"
        assert _prepare(outs[workers], prefix, extra=["--workers", workers, "--max-len", "100"]) == 0
    assert _files(outs["1"]) == _files(outs["2"])
    assert PreparedData(outs["2"]).manifest["splits"]["train"] == \
        PreparedData(outs["1"]).manifest["splits"]["train"] == {
            "pairs": 5000, "dropped": 1, "src_tokens": PreparedData(outs["1"]).split("train").src.offsets[-1],
            "tgt_tokens": PreparedData(outs["1"]).split("train").tgt.offsets[-1]}


def test_chunks_change_nothing_but_the_sample(tmp_path, monkeypatch):
    """Given tokenizers, the written arrays are the same whatever the chunk size (the sample depends on it)."""
    prefix = _corpus(tmp_path / "raw", generate(2, 2500))
    assert _prepare(tmp_path / "whole", prefix) == 0
    model = (tmp_path / "whole" / "spm.model").read_bytes()
    monkeypatch.setattr(prepare_module, "CHUNK", 300)
    from attncomp.data.prepare import PrepareOptions, given_digest, prepare

    given = (model, model)
    options = PrepareOptions("en", "xx", vocab_size=120, given=given_digest(given))
    prepare({"train": [prefix]}, tmp_path / "small", options, print_fn=lambda *_: None, tokenizers=given, workers=2)
    assert _files(tmp_path / "whole") == _files(tmp_path / "small")


def test_the_sample_is_exact_seeded_and_recorded(tmp_path, capsys):
    choice = Choice(total=1000, size=300, seed=5)
    masks = [choice.take(n) for n in (128, 500, 1, 371)]
    assert sum(int(m.sum()) for m in masks) == 300 and [len(m) for m in masks] == [128, 500, 1, 371]
    again = Choice(total=1000, size=300, seed=5)
    assert all(np.array_equal(m, again.take(len(m))) for m in masks)
    assert Choice(total=10, size=20, seed=1).take(10).all()

    prefix = _corpus(tmp_path / "raw", generate(3, 3000))
    assert _prepare(tmp_path / "out", prefix, extra=["--sample-sentences", "1000"]) == 0
    manifest = PreparedData(tmp_path / "out").manifest
    assert manifest["tokenizer_sample"] == {"sentences": 1000, "pairs": 500, "of_pairs": 3000}
    assert manifest["options"]["sample_sentences"] == 1000
    assert "training sentencepiece on 1,000 sentences (500 of 3,000 pairs)" in capsys.readouterr().err
    assert _prepare(tmp_path / "out", prefix, extra=["--sample-sentences", "1200"]) == 2  # another preparation
    assert "different preparation" in capsys.readouterr().err


def test_jsonl_parquet_tsv_and_several_files_give_the_same_data(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pairs = generate(4, 1200)
    first, second = pairs[:700], pairs[700:]
    plain = [_corpus(tmp_path / "a", first), _corpus(tmp_path / "b", second)]
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress("".join(
        json.dumps({"id": i, "translation": {"en": s, "xx": t}}) + "\n" for i, (s, t) in enumerate(second)).encode()))
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"translation": {"en": s, "xx": t}}) + "\n\n"
                                              for s, t in first))
    rows = pa.table({"translation": [{"en": s, "xx": t} for s, t in second]})
    pq.write_table(rows, tmp_path / "b.parquet", row_group_size=256)
    (tmp_path / "a.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in first))
    columns = ["--src-column", "translation.en", "--tgt-column", "translation.xx"]
    assert _prepare(tmp_path / "plain", *plain) == 0
    assert _prepare(tmp_path / "jsonl", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl.gz"), extra=columns) == 0
    assert _prepare(tmp_path / "mixed", str(tmp_path / "a.tsv"), str(tmp_path / "b.parquet"), extra=columns) == 0
    assert _files(tmp_path / "plain") == _files(tmp_path / "jsonl") == _files(tmp_path / "mixed")
    assert PreparedData(tmp_path / "mixed").manifest["inputs"]["train"] == [str(tmp_path / "a.tsv"),
                                                                            str(tmp_path / "b.parquet")]


@pytest.mark.parametrize("write, message", [
    (lambda d: (d / "t.jsonl").write_text('{"en": "a", "xx": "b"}\n{"en": "a"\n'), "t.jsonl:2 is not valid JSON"),
    (lambda d: (d / "t.jsonl").write_text('{"en": "a", "xx": "b"}\n{"en": "a"}\n'), "t.jsonl:2: no field 'xx'"),
    (lambda d: (d / "t.jsonl").write_text('{"en": "a", "xx": 3}\n'), "t.jsonl:1: field 'xx' is int, not text"),
    (lambda d: (d / "t.jsonl").write_bytes(b'{"en": "a", "xx": "\xff"}\n'), "t.jsonl:1: not UTF-8 text"),
    (lambda d: _parquet(d, {"en": ["a", "b"], "de": ["c", "d"]}), "has no column 'xx' (it has en, de"),
    (lambda d: _parquet(d, {"en": ["a", "b"], "xx": [1, 2]}), "column 'xx' holds int64, not text"),
    (lambda d: _parquet(d, {"en": ["a", "b"], "xx": ["c", None]}), "row 2: column 'xx' is null"),
    (lambda d: (d / "t.parquet").write_bytes(b"PAR1 not really"), "not a readable Parquet file"),
])
def test_bad_rows_are_one_clear_error(write, message, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    write(tmp_path)
    name = next(p for p in tmp_path.iterdir() if p.name.startswith("t."))
    assert _prepare(tmp_path / "out", str(name)) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def _parquet(directory: Path, columns: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), directory / "t.parquet")


def test_unchanged_inputs_are_not_read_again(tmp_path, monkeypatch, capsys):
    prefix = _corpus(tmp_path / "raw", generate(5, 400))
    assert _prepare(tmp_path / "out", prefix) == 0
    read = []
    digest = text_module.file_digest
    monkeypatch.setattr(prepare_module, "file_digest", lambda path: read.append(path.name) or digest(path))
    capsys.readouterr()
    assert _prepare(tmp_path / "out", prefix) == 0 and "nothing to do" in capsys.readouterr().err
    assert read == []  # size and modification time as recorded: the recorded digests stand
    os.utime(tmp_path / "raw" / "train.xx")  # touched, not changed: read again, and still the same preparation
    assert _prepare(tmp_path / "out", prefix) == 0 and "nothing to do" in capsys.readouterr().err
    assert read == ["train.xx"]
    (tmp_path / "raw" / "train.xx").write_text("changed\n" * 400)
    assert _prepare(tmp_path / "out", prefix) == 2 and "different preparation" in capsys.readouterr().err


def test_a_dead_run_leaves_nothing_finished_and_is_cleaned_up(tmp_path):
    """A run killed mid-way leaves its work directory, never `out`; the next run removes it and starts over."""
    prefix = _corpus(tmp_path / "raw", generate(6, 3000))
    script = textwrap.dedent(f"""
        import os, signal
        from attncomp.data import encode
        from attncomp.data.prepare import PrepareOptions, prepare
        write = encode.SideWriter.write
        def die(self, *args):
            write(self, *args)
            os.kill(os.getpid(), signal.SIGKILL)
        encode.SideWriter.write = die
        prepare({{"train": [{prefix!r}]}}, __import__("pathlib").Path({str(tmp_path / "out")!r}),
                PrepareOptions("en", "xx", vocab_size=120))
    """)
    killed = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True)
    assert killed.returncode == -9
    left = [p.name for p in tmp_path.iterdir() if p.name != "raw"]
    assert len(left) == 1 and left[0].startswith(".out.tmp-") and (tmp_path / left[0] / "train.src.bin").exists()
    assert _prepare(tmp_path / "out", prefix) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "raw"]


PREPARE_UNDER_LIMIT = """
import resource, sys
from pathlib import Path
from attncomp.data.prepare import PrepareOptions, prepare
prefix, out, limit = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
prepare({"train": [prefix]}, out, PrepareOptions("en", "xx", vocab_size=256, sample_sentences=20_000),
        print_fn=lambda *_: None, workers=2)
status = Path("/proc/self/status").read_text()
print(next(int(line.split()[1]) << 10 for line in status.splitlines() if line.startswith("VmPeak:")))
"""
HEADROOM = 64 << 20  # bytes of address space above what 20,000 pairs need


def _prepare_under(prefix: str, out: Path, limit: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PREPARE_UNDER_LIMIT, prefix, str(out), str(limit)], cwd=ROOT,
                          capture_output=True, text=True,
                          env={**os.environ, "MALLOC_ARENA_MAX": "2", "OMP_NUM_THREADS": "1",
                               "OPENBLAS_NUM_THREADS": "1"})


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmPeak from /proc")
def test_twenty_times_the_corpus_needs_no_more_memory(tmp_path):
    """400,000 pairs prepared under an address-space limit of what 20,000 pairs need plus 64 MB.

    Measured on these two corpora (MALLOC_ARENA_MAX=2, one process) with the code before streaming
    (51c93d4, the corpus held in lists): 20,000 pairs peaked at 292 MB of address space and 400,000 at
    549 MB (resident: 61 MB and 414 MB); under this limit (about 350 MB) sentencepiece aborted it with
    std::bad_alloc. The streaming code peaked at 291 MB and 293 MB (resident: 60 MB and 70 MB); since
    sentencepiece trains in a child process (b3571f5), this process peaks at 263.4 MiB for both.
    """
    pairs = generate(7, 20_000)
    small = _corpus(tmp_path / "small", pairs)
    large = _corpus(tmp_path / "large", pairs * 20)
    done = _prepare_under(small, tmp_path / "small-out", 0)
    assert done.returncode == 0, done.stderr[-2000:]
    limit = int(done.stdout.split()[-1]) + HEADROOM
    done = _prepare_under(large, tmp_path / "large-out", limit)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(PreparedData(tmp_path / "large-out").split("train")) == 400_000


def test_the_command_line_default_sample_is_the_library_one():
    from attncomp.cli.data_command import SAMPLE

    assert SAMPLE == prepare_module.SAMPLE == prepare_module.PrepareOptions().sample_sentences


@pytest.mark.parametrize("mono", [False, True])
def test_a_sample_reads_the_pairs_chunks_gives(tmp_path, mono):
    """Source.picked decodes only the kept lines of a text file; they are the lines `chunks` gives, stripped
    alike (carriage returns, surrounding and Unicode white space, gzip, one language)."""
    from attncomp.data.sources import Source

    lines = [line for i in range(40) for line in (f" line {i}\r", f"\u2003ü {i}\u2028", "", f"\tx{i} y ")]
    (tmp_path / "t.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "t.xx.gz").write_bytes(gzip.compress(("\n".join(reversed(lines)) + "\n").encode()))
    source = Source(tmp_path / "t", ("en", "en") if mono else ("en", "xx"), ("en", "xx"), mono)
    masks = iter([np.arange(n) % 3 == 1 for n in (33, 33, 33, 33, 28)])
    picked = list(source.picked(33, lambda n: next(masks)))
    expected = [([s for i, s in enumerate(src) if i % 3 == 1], [t for i, t in enumerate(tgt) if i % 3 == 1])
                for src, tgt in source.chunks(33)]
    assert picked == expected and len(picked) == 5 and expected[0][0][:2] == ["ü 0", "line 1"]
