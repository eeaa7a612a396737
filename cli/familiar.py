"""Flags of fairseq, Hugging Face's Trainer and torchtitan that attncomp spells otherwise.

argparse answers `attncomp train SPEC --data D --lr 1e-3` with "unrecognized arguments: --lr 1e-3" and nothing
more; most of what those flags set is the spec's, reached with `--set`. Each row is data: the flag (with `-`,
as `--output_dir` and `--output-dir` are one) and how attncomp says it, with the value to fill in
in capitals (N, LR, DIR).
"""

from __future__ import annotations

from attncomp.errors import did_you_mean

_STEPS = "--set train.steps=N (updates; a run is counted in updates, not epochs)"
_BATCH = ('--set "train.batch=tokens(N)" (a batch is counted in tokens per update, all workers together; '
          "--max-tokens-per-gpu N caps one worker's micro-batch)")

FLAGS: dict[str, str] = {
    "--lr": '--set "train.schedule=constant(lr = LR)" (the learning rate is the spec\'s schedule)',
    "--learning-rate": '--set "train.schedule=constant(lr = LR)" (the learning rate is the spec\'s schedule)',
    "--warmup-updates": '--set "train.schedule=inverse_sqrt(peak = LR, warmup = N)"',
    "--warmup-steps": '--set "train.schedule=inverse_sqrt(peak = LR, warmup = N)"',
    "--max-update": _STEPS, "--max-steps": _STEPS, "--steps": _STEPS, "--max-epoch": _STEPS,
    "--epochs": _STEPS, "--num-train-epochs": _STEPS,
    "--batch-size": _BATCH, "--max-sentences": _BATCH, "--per-device-train-batch-size": _BATCH,
    "--update-freq": "derived: accumulation = the spec's train.batch over --max-tokens-per-gpu and the workers",
    "--gradient-accumulation-steps":
        "derived: accumulation = the spec's train.batch over --max-tokens-per-gpu and the workers",
    "--save-dir": "--out DIR", "--output-dir": "--out DIR", "--checkpoint-dir": "--out DIR",
    "--fp16": "--set train.precision=bf16 (the default on a GPU; a CPU runs fp32)",
    "--bf16": "--set train.precision=bf16 (the default on a GPU; a CPU runs fp32)",
    "--seed": "--set train.seed=N",
    "--clip-norm": "--set train.clip_norm=C", "--max-grad-norm": "--set train.clip_norm=C",
    "--weight-decay": '--set "train.optimizer=adamw(weight_decay = W)"',
    "--label-smoothing": '--set "train.loss=cross_entropy(label_smoothing = E)"',
    "--save-interval-updates": "--set train.checkpoint.every=N (an evaluation at each checkpoint)",
    "--save-steps": "--set train.checkpoint.every=N (an evaluation at each checkpoint)",
    "--keep-last-epochs": "--set train.checkpoint.keep=N", "--save-total-limit": "--set train.checkpoint.keep=N",
    "--arch": "the spec file: attncomp train SPEC",
    "--restore-file": "--resume (this run's newest checkpoint) or --init CHECKPOINT (another run's weights)",
    "--resume-from-checkpoint":
        "--resume (this run's newest checkpoint) or --init CHECKPOINT (another run's weights)",
    "--nproc-per-node": "--gpus N (or --procs N CPU workers)",
    "--device": "--gpus N (or --procs N CPU workers)",
    "--beam-size": "--beam N", "--num-beams": "--beam N",
    "--lenpen": "--alpha A (the length penalty)", "--length-penalty": "--alpha A (the length penalty)",
}


COMMANDS: dict[str, str] = {  # another toolkit's command (or an obvious guess) -> attncomp's
    "compile": "build", "preprocess": "data prepare", "prepare": "data prepare", "generate": "translate",
    "interactive": "translate", "evaluate": "eval", "score": "eval", "validate": "check", "fit": "train",
}


def command_hint(word: str, commands: list[str]) -> str:
    """' (did you mean "train"?)' for a misspelt command, or attncomp's name for another toolkit's; '' else."""
    if word in COMMANDS:
        return f' (attncomp calls it "{COMMANDS[word]}")'
    return did_you_mean(word, commands)


def hints(extra: list[str]) -> str:
    """'; --lr is ...' for every flag of `extra` (argparse's unrecognized arguments) that FLAGS knows, or ''."""
    found = []
    for word in extra:
        flag = word.split("=", 1)[0].replace("_", "-")
        if flag.startswith("--") and flag in FLAGS and flag not in found:
            found.append(flag)
    return "".join(f"; attncomp spells {flag} as {FLAGS[flag]}" for flag in found)
