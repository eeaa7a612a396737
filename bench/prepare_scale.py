"""`attncomp data prepare` at scale, against a minimal baseline timed in the same run.

    python bench/prepare_scale.py --pairs 1000000 [--vocab-size 37000] [--workers N] [--dir bench_runs/prepare_scale]

1. Makes a synthetic corpus of N pairs: each line three sentences of ../shared/data/de-en's training
   set (about 23 words), chosen at random for a seed; plain text, DIR/corpus.en and DIR/corpus.de.
2. Runs `attncomp data prepare --train DIR/corpus --src en --tgt de --vocab-size V --workers W` in a
   child process: wall time, and peak memory of its whole process tree (itself and its encoding workers),
   sampled every 50 ms from /proc: the largest sum of proportional set sizes (Pss: a page shared by
   forked processes counted once in all) seen, and the sum of every process's own high-water mark
   (VmHWM: exact for each process, but a page shared by several counts in each).
3. Runs the baseline in another child: sentencepiece trained on the same sample (attncomp's sampling
   code writes it first, untimed) with the same options, sentencepiece's own multi-threaded encoding of
   the whole text (W threads) in blocks of 100,000 lines, and numpy writes of the ids and offsets. Its
   time is the sum of those two timed parts: no start-up, no sampling, no check of the input.

Prints one table and writes DIR/result-N.json. Timings are only comparable within one run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from itertools import chain, islice
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SEED = 1
BLOCK = 100_000  # the baseline's lines per encode call


def _de_en() -> Path:
    """../shared/data/de-en beside the checkout (or beside the directory holding the worktree)."""
    for base in (ROOT.parent, ROOT.parent.parent):
        if (base / "shared" / "data" / "de-en" / "train.en.gz").is_file():
            return base / "shared" / "data" / "de-en"
    sys.exit("cannot find ../shared/data/de-en; give --de-en DIR")


def make_corpus(de_en: Path, out: Path, pairs: int) -> Path:
    """DIR/corpus.{en,de}: `pairs` lines, each three random training sentences of de-en joined by spaces."""
    prefix = out / "corpus"
    stamp = out / f"corpus-{pairs}.done"
    if stamp.exists():
        return prefix
    sides = {}
    for lang in ("en", "de"):
        with gzip.open(de_en / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            sides[lang] = np.array(f.read().splitlines(), dtype=object)
    rng = np.random.default_rng(SEED)
    files = {lang: open(f"{prefix}.{lang}", "w", encoding="utf-8") for lang in sides}
    for start in range(0, pairs, BLOCK):
        picks = rng.integers(0, len(sides["en"]), size=(min(BLOCK, pairs - start), 3))
        for lang, sentences in sides.items():
            chosen = sentences[picks]
            files[lang].writelines(f"{a} {b} {c}\n" for a, b, c in chosen)
    for f in files.values():
        f.close()
    for old in out.glob("corpus-*.done"):
        old.unlink()
    stamp.touch()
    return prefix


def _tree(root: int) -> list[int]:
    """`root` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _memory(pid: int) -> tuple[int, int]:
    """(Pss, VmHWM) of a process, in bytes; zeros once it is gone. Pss counts a page shared by n processes
    (a forked worker's, its parent's) as 1/n in each, so that the sum over a tree is the memory it holds."""
    values = {}
    for name, keys in ((f"/proc/{pid}/smaps_rollup", ("Pss:",)), (f"/proc/{pid}/status", ("VmHWM:",))):
        try:
            with open(name) as f:
                for line in f:
                    if line.startswith(keys):
                        values[line.split(":")[0]] = int(line.split()[1]) * 1024
        except OSError:
            pass
    return values.get("Pss", 0), values.get("VmHWM", 0)


def measure(command: list[str], log: Path) -> dict:
    """Run `command` (stderr to `log`): wall seconds, and the peak memory of its process tree."""
    start = time.monotonic()
    with open(log, "w") as err:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
        highest: dict[int, int] = {}
        peak_sum = 0
        timeline = []  # (seconds, summed Pss) every second: where the peak is
        while child.poll() is None:
            total = 0
            for pid in _tree(child.pid):
                pss, hwm = _memory(pid)
                total += pss
                highest[pid] = max(highest.get(pid, 0), hwm)
            peak_sum = max(peak_sum, total)
            if not timeline or time.monotonic() - start - timeline[-1][0] >= 1:
                timeline.append((round(time.monotonic() - start, 1), total))
            time.sleep(0.05)
        out = child.stdout.read()
    wall = time.monotonic() - start
    if child.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({child.returncode}); see {log}")
    return {"wall_s": round(wall, 1), "peak_pss_sum_bytes": peak_sum, "hwm_sum_bytes": sum(highest.values()),
            "processes": len(highest), "timeline": timeline, "stdout": out}


def baseline(corpus: Path, out: Path, vocab: int, workers: int, sample_sentences: int) -> None:
    """The minimal pipeline, in this process; prints its part times as JSON."""
    import sentencepiece as spm

    from attncomp.data.prepare import CHUNK, PrepareOptions, sources_of
    from attncomp.data.tokenizer_sample import write_sample
    from attncomp.data.tokenizer import trainer_options

    options = PrepareOptions("en", "de", vocab_size=vocab)
    train = sources_of({"train": [str(corpus)]}, options)["train"]
    pairs = sum(1 for _ in open(f"{corpus}.en", "rb"))
    sample = out / "sample.txt"
    write_sample(train, pairs, min(pairs, -(-sample_sentences // 2)), {"src": sample, "tgt": sample}, SEED, CHUNK)
    times = {}
    start = time.monotonic()
    spm.set_random_generator_seed(SEED)
    spm.SentencePieceTrainer.train(input=str(sample), model_prefix=str(out / "spm"),
                                   **trainer_options(vocab, 1.0))
    times["sentencepiece_s"] = time.monotonic() - start
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    start = time.monotonic()
    for lang in ("en", "de"):
        with open(f"{corpus}.{lang}", encoding="utf-8") as text, open(out / f"{lang}.bin", "wb") as ids_file, \
                open(out / f"{lang}.idx", "wb") as offsets_file:
            end = 0
            while lines := [line.rstrip("\n") for line in islice(text, BLOCK)]:
                ids = sp.encode(lines, add_eos=True, num_threads=workers)
                lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
                flat = np.fromiter(chain.from_iterable(ids), dtype=np.uint16, count=int(lengths.sum()))
                flat.tofile(ids_file)
                (end + np.cumsum(lengths)).tofile(offsets_file)
                end += int(lengths.sum())
    times["encode_and_write_s"] = time.monotonic() - start
    print(json.dumps(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, required=True)
    parser.add_argument("--vocab-size", type=int, default=37000)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--sample-sentences", type=int, default=2_000_000)
    parser.add_argument("--dir", type=Path, default=ROOT / "bench_runs" / "prepare_scale")
    parser.add_argument("--de-en", type=Path)
    parser.add_argument("--baseline-only", action="store_true", help=argparse.SUPPRESS)  # the baseline's child
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.baseline_only:
        return baseline(args.dir / "corpus", args.dir / "baseline", args.vocab_size, args.workers,
                        args.sample_sentences)
    start = time.monotonic()
    corpus = make_corpus(args.de_en or _de_en(), args.dir, args.pairs)
    print(f"corpus of {args.pairs:,} pairs: {time.monotonic() - start:.1f}s", flush=True)
    ours = measure([sys.executable, "-m", "attncomp.cli.main", "data", "prepare", "--train", str(corpus),
                    "--src", "en", "--tgt", "de", "--vocab-size", str(args.vocab_size), "--workers",
                    str(args.workers), "--sample-sentences", str(args.sample_sentences), "--out",
                    str(args.dir / "prepared"), "--force"], args.dir / "prepare.log")
    (args.dir / "baseline").mkdir(exist_ok=True)
    base = measure([sys.executable, __file__, "--baseline-only", "--pairs", str(args.pairs), "--vocab-size",
                    str(args.vocab_size), "--workers", str(args.workers), "--sample-sentences",
                    str(args.sample_sentences), "--dir", str(args.dir)], args.dir / "baseline.log")
    base.update(json.loads(base.pop("stdout").strip().splitlines()[-1]))
    base["child_wall_s"] = base.pop("wall_s")  # with the untimed sampling and the start-up
    base["wall_s"] = round(base["sentencepiece_s"] + base["encode_and_write_s"], 1)
    ours.pop("stdout")
    manifest = json.loads((args.dir / "prepared" / "manifest.json").read_text())
    train = manifest["splits"]["train"]
    result = {"pairs": args.pairs, "tokens": train["src_tokens"] + train["tgt_tokens"], "workers": args.workers,
              "vocab_size": args.vocab_size, "tokenizer_sample": manifest.get("tokenizer_sample"),
              "attncomp": ours, "baseline": base, "wall_ratio": round(ours["wall_s"] / base["wall_s"], 3)}
    (args.dir / f"result-{args.pairs}.json").write_text(json.dumps(result, indent=2) + "\n")
    gb = 1e9
    print(f"pairs {args.pairs:,}, tokens {result['tokens']:,}, workers {args.workers}")
    print(f"attncomp data prepare: {ours['wall_s']:.1f}s, peak memory {ours['peak_pss_sum_bytes'] / gb:.2f} GB "
          f"(sum of high-water marks {ours['hwm_sum_bytes'] / gb:.2f} GB, {ours['processes']} processes)")
    print(f"baseline: {base['wall_s']:.1f}s (sentencepiece {base['sentencepiece_s']:.1f}s, encode and write "
          f"{base['encode_and_write_s']:.1f}s; sampling before them untimed), peak memory "
          f"{base['peak_pss_sum_bytes'] / gb:.2f} GB")
    print(f"ratio of wall times (attncomp / baseline): {result['wall_ratio']:.3f}")


if __name__ == "__main__":
    main()
