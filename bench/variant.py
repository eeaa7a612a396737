"""Issue 45 item 4: a variant no one tuned by hand against the same model written by hand, in one run.

    python bench/variant.py --json OUT/variant.json                     # a GPU (bash bench/gpu_session.sh OUT variant)
    python bench/variant.py --device cpu --tiny --configs "attncomp,hand-written" --steps 2   # CPU smoke

The variant is bench/variant.attn (base's widths: d_model 512, 8 heads of 64, 6 decoder layers, d_ff 2048, a
vocabulary of 32,000; sandwich norms, per-head q/k norm, a soft-capped sliding window of 128 with sinks, which
attncomp sends through FlexAttention). The peer is bench/variant_reference.py, written by hand with FlexAttention,
starting from the same weights (attncomp's, copied onto it). Every configuration trains on the same batch
(--sentences sequences of --length tokens, next-token cross-entropy), with the same optimiser (Adam, fused on a
GPU), bf16 autocast on a GPU, and is timed as bench/throughput.py times its rows: tokens/s, step time, MFU (the
step's FLOPs counted from attncomp's graph, the same number for both: 3 x forward, every attention counted over
the whole T x T as attncomp.lower.flops counts FlexAttention, the window notwithstanding; over the matmul rate
measured in this run), peak memory, and `trained` (bench.throughput.check_trained: the loss fell, and a compiled
row's gradients equal its eager ones within 5%).

Configurations:
    attncomp + compile        torch.compile over attncomp's training step (bench/throughput.py's "attncomp + compile")
    hand-written + compile    torch.compile over the hand-written model and its loss together; the window's block
                              mask made once, outside the compiled step
    attncomp, hand-written    the same, eager (uncompiled FlexAttention is PyTorch's unfused reference)
    attncomp + compile - fused loss   attncomp's compiled step with the plain projection + loss, as the hand-written
                              model computes its loss (attncomp's default is its fused, chunked projection + loss)

Each attncomp row also says its ratio to the hand-written row of the same compilation in this run.
On the CPU, FlexAttention differentiates only in its eager mode, with PyTorch's device guard lifted
(bench.variant_reference.cpu_backward); Inductor has no CPU FlexAttention backward, so compiled rows fail there
unless --backend aot_eager (Dynamo and AOTAutograd trace the step as on a GPU, and FlexAttention's unfused
backward runs it): the CPU rehearsal of the GPU's compiled rows,

    python bench/variant.py --device cpu --tiny --backend aot_eager \
        --configs "attncomp + compile,hand-written + compile" --sentences 2 --length 64 --steps 3 --warmup 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import throughput  # noqa: E402
from bench.variant_reference import Config, VariantLM, cpu_backward, load_attncomp  # noqa: E402

SPEC = ROOT / "bench" / "variant.attn"
CONFIGS = ["attncomp + compile", "hand-written + compile", "attncomp", "hand-written",
           "attncomp + compile - fused loss"]
DEFAULT = "attncomp + compile,hand-written + compile"
TINY = ["model.d_model=64", "model.heads=4", "model.d_ff=128", "model.decoder.layers=2", "model.vocab=shared(300)",
        "model.decoder.attention=local(window = 8, softcap = 50, sinks = true)"]


def make_batch(sentences: int, length: int, vocab: int, device: torch.device) -> dict:
    """Random sequences of length + 1: the model reads the first `length` tokens and predicts the next ones."""
    g = torch.Generator().manual_seed(0)
    seq = torch.randint(5, vocab, (sentences, length + 1), generator=g).to(device)
    return {"tokens": seq[:, :-1].contiguous(), "tgt_out": seq[:, 1:].contiguous()}


def build(config: str, spec, batch: dict, device: torch.device, backend: str = "inductor"):
    """One full training step of a configuration as bench/throughput.py's trainer (`_trainer`): both sides start
    from the same weights, attncomp's (made under the same seed for every configuration); compiled rows through
    torch.compile's `backend`."""
    from attncomp.compiler import compile_spec
    from attncomp.train.step import TrainStep

    torch.manual_seed(0)
    model = compile_spec(spec, device=device).train()
    tokens = batch["tgt_out"].numel()
    if config.startswith("attncomp"):
        step_module = TrainStep(model, spec.train.loss.label_smoothing, fused_loss="fused loss" not in config)
        eager = lambda: step_module(batch)[0] / tokens  # noqa: E731
        if "compile" not in config:
            return throughput._trainer(model, model.parameters(), eager, device)
        run = throughput._compile(step_module, config, backend)
        return throughput._trainer(model, model.parameters(), lambda: run(batch)[0] / tokens, device, eager)
    length = batch["tokens"].shape[1]
    hand = VariantLM(Config.from_spec(spec, max_len=length)).to(device)
    hand = load_attncomp(hand, model.state_dict()).train()
    mask = hand.block_mask(length)  # once per length, as hand-written training code makes it

    def loss() -> torch.Tensor:
        logits = hand(batch["tokens"], mask)
        return F.cross_entropy(logits.flatten(0, 1), batch["tgt_out"].flatten(), reduction="sum") / tokens

    if "compile" not in config:
        return throughput._trainer(hand, hand.parameters(), loss, device)
    return throughput._trainer(hand, hand.parameters(), throughput._compile(loss, config, backend), device, loss)


def ratios(rows: list[dict]) -> None:
    """Each attncomp row's tokens/s over the hand-written row of the same compilation (same run), in place."""
    by_config = {r["config"]: r for r in rows}
    for row in rows:
        peer = by_config.get("hand-written + compile" if "compile" in row["config"] else "hand-written")
        if row["config"].startswith("attncomp") and peer and row["tokens_per_s"] > 0 and peer["tokens_per_s"] > 0:
            row["vs_hand_written"] = row["tokens_per_s"] / peer["tokens_per_s"]


def _write(path: str | None, rows: list[dict]) -> None:
    from attncomp.files import write_atomically

    if path:
        write_atomically(path, json.dumps(rows, indent=2) + "\n", make_parents=True)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sentences", type=int, default=24, help="sequences per batch (24 x 1024 = 24,576 tokens)")
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--configs", default=DEFAULT, help="comma-separated subset of: " + ", ".join(CONFIGS))
    parser.add_argument("--tiny", action="store_true", help="tiny widths (CPU smoke test)")
    parser.add_argument("--backend", default="inductor",
                        help="torch.compile's backend for the compiled rows (aot_eager runs them on the CPU)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    configs = args.configs.split(",")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {', '.join(unknown)}; choose from: {', '.join(CONFIGS)}")
    if args.sentences < 1 or args.length < 2 or args.steps < 1 or args.warmup < 0:
        parser.error("--sentences, --steps must be at least 1, --length at least 2, --warmup at least 0")
    device = torch.device(args.device)
    with cpu_backward() if device.type == "cpu" else contextlib.nullcontext():
        return _run(args, configs, device)


def _run(args, configs: list[str], device: torch.device) -> list[dict]:
    from attncomp import ir

    spec = ir.load(SPEC, TINY if args.tiny else [])
    rate = throughput.matmul_rate(device, torch.bfloat16 if device.type == "cuda" else torch.float32,
                                  8192 if device.type == "cuda" else 512)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device {name}; measured matmul rate {rate / 1e12:.1f} TFLOP/s", flush=True)
    flops = throughput.model_flops(spec, args.sentences, args.length)
    batch = make_batch(args.sentences, args.length, spec.model.tgt_vocab, device)
    rows: list[dict] = []
    for config in configs:
        make = lambda: build(config, spec, batch, device, args.backend)  # noqa: E731
        result = throughput._measure(spec, "variant", config, make, device, args, args.sentences * args.length, flops,
                                     rate)
        rows.append({**asdict(result), "device": name, "torch": torch.__version__, "matmul_flops": rate,
                     "sentences": args.sentences, "length": args.length})
        ratios(rows)
        _write(args.json, rows)
    _print(rows)
    return rows


def _print(rows: list[dict]) -> None:
    print("| implementation | tokens/s | step ms | MFU | peak memory GB | trained | attncomp / hand-written |")
    print("|----------------|----------|---------|-----|----------------|---------|-------------------------|")
    for r in rows:
        if r["error"]:
            print(f"| {r['config']} | failed: {r['error'].splitlines()[0][:80]} | | | | | |")
            continue
        ratio = f"{r['vs_hand_written']:.3f}x" if "vs_hand_written" in r else ""
        print(f"| {r['config']} | {r['tokens_per_s']:,.0f} | {r['step_ms']:.1f} | {100 * r['mfu']:.1f}% | "
              f"{r['peak_memory_gb']:.1f} | {r['trained']} | {ratio} |")


if __name__ == "__main__":
    from bench import run_command

    run_command(main)
