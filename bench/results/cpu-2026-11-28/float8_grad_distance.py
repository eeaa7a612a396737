"""The float8 rows' gradient distances on specs/examples/small.attn, emulated on the CPU (docs/performance.md, "Float8"):
compiled against eager, for bf16 and float8, and the eager float8 step against the eager bf16 one, on the weights
each row has after bench/throughput.py's warm-up and two steps (seed 0, as its _measure).

    ATTNCOMP_FLOAT8_EMULATE=1 OMP_NUM_THREADS=1 PYTHONPATH=. python bench/results/cpu-2026-11-28/float8_grad_distance.py
"""
import os
import torch

os.environ.setdefault("ATTNCOMP_FLOAT8_EMULATE", "1")
torch.set_num_threads(1)
from pathlib import Path

from attncomp import ir
from bench import throughput as T

spec = ir.load(Path("specs/examples/small.attn"), [])
dev = torch.device("cpu")
batch = T.make_batch(2, 8, spec.model.tgt_vocab, dev)
grads = {}
for config in ["nn.Transformer + loss compiled", "nn.Transformer + loss compiled + float8"]:
    torch.manual_seed(0)
    step = T.build(config, spec, batch, dev)
    T.time_step(step, dev, 1, 2)
    m = step.model
    m.eval()
    grads[config] = (T._gradient(m, step.eager_loss_fn, dev), T._gradient(m, step.loss_fn, dev))


def rel(a, b):
    return float((a - b).norm() / b.norm())


(be, bc), (fe, fc) = grads.values()
print("bf16 compiled vs eager", rel(bc, be))
print("float8 compiled vs eager", rel(fc, fe))
print("float8 eager vs bf16 eager (weights after their own 3 steps)", rel(fe, be))
