"""Training as a library: `attncomp.train.run(job)` trains a Job (plain data: attncomp.train.job) on its
workers, and is all that `attncomp train` and `attncomp sweep` call.

    from attncomp import train
    job = train.Job(spec="specs/examples/tiny.attn", data=train.DataOptions(path="data/sample"),
                    checkpointing=train.CheckpointOptions(out="runs/tiny", resume=True))
    train.run(job)          # -> runs/tiny/checkpoint_avg.pt
"""

from attncomp.train.job import CheckpointOptions, DataOptions, Execution, Job, Logging, Parallelism
from attncomp.train.run_job import run

__all__ = ["CheckpointOptions", "DataOptions", "Execution", "Job", "Logging", "Parallelism", "run"]
