"""A hand-written PyTorch reference: the paper's model around torch.nn.Transformer, trained with
the same data, tokenizer, batching, loss, optimiser and schedule as attncomp's runner.

Used by bench/quality.py for a side-by-side comparison; decoded with attncomp's beam search through
the cache-free FullStepper (torch.nn.Transformer has no incremental decoding).
"""

from __future__ import annotations

import copy
import math
import time

import torch
from torch import nn

from attncomp.data.batching import Batcher, translation_batch
from attncomp.data.dataset import PreparedData
from attncomp.ir import nodes
from attncomp.train.loss import token_losses
from attncomp.train.runner import make_optimizer
from attncomp.train.schedule import learning_rate
from attncomp.vocab import PAD


class Reference(nn.Module):
    """Embeddings * sqrt(d) + sinusoids -> nn.Transformer (post-norm, no final norms) -> tied output."""

    family = "encoder-decoder"  # what decoding asks of a model (attncomp.protocol)

    def __init__(self, spec: nodes.Spec):
        super().__init__()
        m = spec.model
        self.spec, self.d = spec, m.d_model
        self.embed = nn.Embedding(m.tgt_vocab, m.d_model)
        nn.init.normal_(self.embed.weight, 0.0, m.d_model**-0.5)
        self.transformer = nn.Transformer(m.d_model, m.encoder.heads, m.encoder.layers, m.decoder.layers,
                                          m.encoder.d_ff, m.dropout.residual, batch_first=True)
        self.transformer.encoder.enable_nested_tensor = False  # plain tensors, as attncomp uses
        self.transformer.encoder.norm = nn.Identity()
        self.transformer.decoder.norm = nn.Identity()
        for layer in [*self.transformer.encoder.layers, *self.transformer.decoder.layers]:
            layer.dropout.p = m.dropout.activation  # nn.Transformer has one dropout for everything;
            for attn in (layer.self_attn, getattr(layer, "multihead_attn", None)):  # the spec has three
                if attn is not None:
                    attn.dropout = m.dropout.attention
        self.drop = nn.Dropout(m.dropout.embedding)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        position = torch.arange(length, device=tokens.device, dtype=torch.float32).unsqueeze(1)
        div = torch.exp(torch.arange(0, self.d, 2, device=tokens.device, dtype=torch.float32)
                        * (-math.log(10000.0) / self.d))
        pe = torch.zeros(length, self.d, device=tokens.device)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
        return self.drop(self.embed(tokens) * math.sqrt(self.d) + pe)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1], device=src.device)
        pad = src == PAD
        hidden = self.transformer(self._embed(src), self._embed(tgt_in), tgt_mask=causal, tgt_is_causal=True,
                                  src_key_padding_mask=pad, memory_key_padding_mask=pad)
        return hidden @ self.embed.weight.T


def train_reference(spec: nodes.Spec, data: PreparedData, minutes: float, max_tokens: int = 4096,
                    log=print, device: torch.device = torch.device("cpu"),
                    compile: bool = False) -> tuple[Reference, dict]:
    """Train for `minutes` of wall time with the spec's recipe; return the averaged model and stats.
    On a GPU as the runner trains there: bf16 autocast and fused Adam; `compile`: torch.compile over the model
    and the loss together, with dynamic shapes (the strongest peer of bench/throughput.py, on real batches)."""
    import contextlib

    recipe = spec.train
    torch.manual_seed(recipe.seed)
    model = Reference(spec).to(device)
    split = data.split("train")
    batcher = Batcher(split.src.lengths, split.tgt.lengths, recipe.batch.count, recipe.seed, 1, max_tokens)
    optimizer = make_optimizer(recipe.optimizer, model.parameters(), cuda=device.type == "cuda")
    lr = learning_rate(recipe.schedule, spec.model.d_model, recipe.steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: lr(i + 1))
    every, keep = recipe.checkpoint.every, recipe.checkpoint.average_last
    eps = recipe.loss.label_smoothing

    def summed_loss(src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        return token_losses(model(src, tgt_in), tgt_out, eps)[0]

    loss_of = torch.compile(summed_loss, dynamic=True) if compile else summed_loss
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    snapshots: list[dict] = []
    start = last_save = time.monotonic()
    step = tokens = 0
    for update in batcher.updates():
        for part in update.parts:
            batch = {k: v.to(device, non_blocking=True) for k, v in translation_batch(split, part).items()}
            with autocast:
                loss = loss_of(batch["src"], batch["tgt_in"], batch["tgt_out"])
            (loss / update.target_tokens).backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step, tokens = step + 1, tokens + update.target_tokens
        now = time.monotonic()
        if (every.kind == "time" and now - last_save >= every.minutes * 60) or \
                (every.kind == "steps" and step % every.steps == 0) or now - start >= minutes * 60:
            snapshots = (snapshots + [{k: v.detach().clone() for k, v in model.state_dict().items()}])[-keep:]
            last_save = now
            log(f"reference: step {step}, {tokens / (now - start):,.0f} tok/s, loss "
                f"{float(loss.detach()) / max(1, int((batch['tgt_out'] >= 0).sum())):.3f} (last micro-batch, per token)")
        if now - start >= minutes * 60:
            break
    averaged = {k: sum(s[k].double() for s in snapshots).div(len(snapshots)).to(v.dtype)
                for k, v in snapshots[-1].items()}
    model.load_state_dict(averaged)
    return model.eval(), {"steps": step, "tokens_per_s": tokens / (time.monotonic() - start)}
