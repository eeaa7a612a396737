"""The GPU session's `variant` stage rehearsed on the CPU: bench/variant.py's compiled rows (attncomp + compile,
hand-written + compile), then its trained check (eager gradients of both models), with FlexAttention taken inside
the compiled step on the CPU too and torch.compile's backend set to aot_eager (Dynamo + AOTAutograd, where risks (a)
and (b) arise; Inductor has no CPU FlexAttention backward).
usage: python rehearse_variant.py [BACKEND]
"""
import inspect
from pathlib import Path
import sys
import textwrap

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
import torch  # noqa: E402

from attncomp.lower import ops  # noqa: E402
from bench import throughput, variant  # noqa: E402

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"
CPU_RULE = ('q.device.type == "cpu" and torch.is_grad_enabled() and any(\n'
            '                t is not None and t.requires_grad for t in (q, k, v, bias, sinks))')
source = textwrap.dedent(inspect.getsource(ops.flex_attend))
assert CPU_RULE in source, "flex_attend's CPU rule moved"
exec(source.replace(CPU_RULE, "False"), ops.__dict__)  # ops.flex_attend now takes FlexAttention under compile on CPU
FLEX_NODES = []


def counting(gm, example_inputs):
    """Counts the FlexAttention calls in each graph Dynamo captured, then hands it to BACKEND."""
    FLEX_NODES.append(sum(1 for n in gm.graph.nodes if "flex_attention" in str(n.target)))
    return torch._dynamo.lookup_backend(BACKEND)(gm, example_inputs)


throughput._compile = lambda fn, config, backend="inductor": torch.compile(fn, backend=counting)
print("torch", torch.__version__, "backend", BACKEND, flush=True)
rows = variant.main(["--device", "cpu", "--tiny", "--configs", "attncomp + compile,hand-written + compile,hand-written",
                     "--sentences", "2", "--length", "64", "--steps", "3", "--warmup", "1"])
for r in rows:
    print(r["config"], "error:", r["error"][:300] or "none", "trained:", r["trained"], "grad_difference:",
          r.get("grad_difference"), "losses:", r.get("losses"))
print("FlexAttention calls in each captured graph:", FLEX_NODES)
