"""FlexAttention against the explicit form, in bf16 on a GPU: error and speed of each composition that
SDPA cannot take (docs/compiler.md, *Which kernel each composition gets*).

    python bench/flex.py --json OUT/flex.json

Each composition runs attention forward and backward on random bf16 q, k, v (batch x heads x length x
64): `ops.flex_attend` under torch.compile (FlexAttention's fused kernel; uncompiled it runs an unfused
fallback), and `ops.explicit_attend` (the lowering's own ops) eager and under torch.compile. The error
is each one's largest difference, in the output and in the gradients of q, k and v, from the explicit
form in float32 (relative to that reference's largest magnitude); time is milliseconds per forward +
backward, the median of --steps after warm-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# name -> flex_attend / explicit_attend keyword arguments (bias and sinks are made per head below)
COMPOSITIONS = {
    "soft-capping (50), causal": {"cap": 50.0, "causal": True},
    "T5 bias (buckets), bidirectional": {"bias": True},
    "sliding window (256), causal": {"window": 256, "causal": True},
    "sinks, causal": {"sinks": True, "causal": True},
    "sliding window (256) + sinks + soft-capping": {"window": 256, "causal": True, "sinks": True, "cap": 50.0},
}


def _arguments(spec: dict, heads: int, length: int, device: torch.device) -> dict:
    from attncomp.lower import ops

    kwargs = dict(spec)
    g = torch.Generator(device="cpu").manual_seed(1)
    if kwargs.pop("bias", False):
        table = torch.randn(32, heads, generator=g).to(device)
        index = ops.bucket_index(length, length, 32, 128, True, device)
        kwargs["bias"] = table[index].permute(2, 0, 1).contiguous()  # (heads, q, k)
    if kwargs.get("sinks"):
        kwargs["sinks"] = torch.randn(heads, generator=g).to(device)
    return kwargs


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _time(fn, steps: int, device: torch.device) -> float:
    times = []
    for _ in range(steps):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def compiled(fn, backend: str = "inductor"):
    """torch.compile with every shape and number static (dynamic=False), so that each composition compiles with
    its own soft cap as a constant. With automatic dynamic shapes (the default), compiling ops.flex_attend again
    for a composition with another cap (50, then 0) turns the cap into a symbolic float, and FlexAttention's
    backward then fails to trace a score_mod that reads it: how the last composition failed on the H200 (PyTorch
    2.11, bench/results/h200-2026-11-26b/flex.log); tests/bench/test_flex.py shows it on the CPU."""
    return torch.compile(fn, backend=backend, dynamic=False)


def measure(name: str, spec: dict, batch: int, heads: int, length: int, steps: int,
            device: torch.device) -> dict:
    from attncomp.lower import ops

    kwargs = _arguments(spec, heads, length, device)
    g = torch.Generator(device="cpu").manual_seed(0)
    base = [torch.randn(batch, heads, length, 64, generator=g).to(device) for _ in range(3)]
    grad_out = torch.randn(batch, heads, length, 64, generator=g).to(device)
    scale = 64 ** -0.5

    def run(fn, dtype):
        q, k, v = (t.to(dtype).requires_grad_() for t in base)
        bias = {"bias": kwargs["bias"].to(dtype)} if "bias" in kwargs else {}  # as the model's, in its dtype
        out = fn(q, k, v, scale, **{**kwargs, **bias})
        grads = torch.autograd.grad(out, (q, k, v), grad_out.to(dtype))
        return [out.float(), *(x.float() for x in grads)]

    reference = run(ops.explicit_attend, torch.float32)
    flex = compiled(ops.flex_attend)
    explicit_compiled = compiled(ops.explicit_attend)
    row = {"composition": name, "batch": batch, "heads": heads, "length": length}
    for label, fn in (("flex compiled", flex), ("explicit", ops.explicit_attend),
                      ("explicit compiled", explicit_compiled)):
        got = run(fn, torch.bfloat16)  # also the warm-up (and compilation)
        row[f"{label} error"] = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(got, reference))
        run(fn, torch.bfloat16)
        row[f"{label} ms"] = _time(lambda: run(fn, torch.bfloat16), steps, device)
    print(f"{name:48s} " + "  ".join(f"{k} {v:.3g}" for k, v in row.items() if k.endswith(("ms", "error"))),
          flush=True)
    return row


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cuda", help="cuda; cpu for a smoke run (no FlexAttention backward there)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    rows = []
    for name, spec in COMPOSITIONS.items():
        try:
            rows.append(measure(name, spec, args.batch, args.heads, args.length, args.steps, device))
        except Exception as err:  # noqa: BLE001 - a composition this PyTorch cannot compile: say so, go on
            error = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]
            print(f"{name:48s} failed: {error}", flush=True)
            rows.append({"composition": name, "error": error})
    if args.json:
        name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
        Path(args.json).write_text(json.dumps({"torch": torch.__version__, "device": name, "rows": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()
