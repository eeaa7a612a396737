"""`attncomp demo`: the whole pipeline on the built-in sample corpus, no download.

Generates and prepares the sample corpus, trains specs/examples/tiny.attn on CPU workers (about a
minute), scores the averaged checkpoint with sacreBLEU on held-out sentences and shows a few.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attncomp.cli.args import output_dir, positive_int
from attncomp.cli.main import run

TINY_SPEC = """# The tiny demo model (as specs/examples/tiny.attn, inlined so the demo runs from anywhere).
model tiny {
  d_model = 64  heads = 4  d_ff = 256  layers = 2
  vocab = shared(256)  tie = all  positions = sinusoidal
  bias { attention = false  ffn = true }
  encoder { }  decoder { }
  dropout { residual = 0.0 }
}
train {
  loss = cross_entropy(label_smoothing = 0.1)
  optimizer = adam(beta1 = 0.9, beta2 = 0.98, eps = 1e-9)
  schedule = inverse_sqrt(peak = 3e-3, warmup = 100)
  batch = tokens(2000)
  steps = 600
  checkpoint { every = 200  keep = 3  average_last = 2 }
}
decode { beam = 4  length_penalty = 0.6  max_len = src + 10 }
"""


def _demo(args: argparse.Namespace) -> int:
    out = Path(args.out)
    data, run_dir = out / "data", out / "run"
    spec = out / "tiny.attn"
    out.mkdir(parents=True, exist_ok=True)
    spec.write_text(TINY_SPEC)
    steps = [["data", "sample", "--out", str(data)],
             ["build", str(spec), "-o", str(out)],
             ["train", str(spec), "--data", str(data), "--out", str(run_dir), "--procs", str(args.procs)]
             + (["--resume"] if (run_dir / "checkpoint_avg.pt").exists() else []),
             ["eval", str(run_dir / "checkpoint_avg.pt"), "--src", str(data / "text/test.src"),
              "--ref", str(data / "text/test.tgt"), "--device", "cpu"]]
    for argv in steps:
        print(f"\n$ attncomp {' '.join(argv)}", file=sys.stderr)
        code = run(argv)
        if code:
            return code
    examples = (data / "text/test.src").read_text().splitlines()[:3]
    (out / "examples.txt").write_text("\n".join(examples) + "\n")
    print(f"\n$ attncomp translate {run_dir / 'checkpoint_avg.pt'} < examples.txt", file=sys.stderr)
    return run(["translate", str(run_dir / "checkpoint_avg.pt"), "--input", str(out / "examples.txt"),
                "--device", "cpu"])


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="sample corpus -> train a tiny spec -> BLEU, on this machine's CPU")
    p.add_argument("--out", type=output_dir, default="demo", metavar="DIR", help="where to put data, run and model (default demo/)")
    p.add_argument("--procs", type=positive_int, default=1, help="CPU workers (default 1)")
    p.set_defaults(handler=_demo)
