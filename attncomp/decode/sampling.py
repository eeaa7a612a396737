"""Sampling beside beam search: temperature, top-k and top-p (nucleus) over any Stepper.

Each of `batch` sentences gets `count` independent samples (rows of the stepper). A step draws the
next token of every unfinished row from the model's distribution divided by `temperature`, kept to
its `top_k` most likely tokens and to the smallest set whose probability reaches `top_p`. A sample
ends at </s>, which is forced at the sentence's maximum length; <pad>, <s> and <sep> are never drawn.
A sample's `logprob` is under the model itself (temperature 1, nothing cut away), its `score` that
over the length penalty, as in beam search, so samples and beams rank alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attncomp.decode.beam import Hypothesis, NaNScores, Stepper, blocked_tokens, length_penalty, start_tokens
from attncomp.vocab import DEFAULT, Specials


@dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0  # > 0
    top_k: int = 0  # 0: no cut
    top_p: float = 1.0  # in (0, 1]; 1: no cut
    seed: int = 0


def filter_logits(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """(R, V) logits over the temperature, with what top-k and top-p cut away set to -inf (float64)."""
    # from the row's best logit down: any temperature > 0 keeps the best token finite (a tiny one made all -inf);
    # in float64, where a temperature or top-p of 1e-300 is not 0 and 1e300 is not inf (both made NaN in float32)
    logits = (logits.double() - logits.double().amax(-1, keepdim=True)) / sampling.temperature
    if 0 < sampling.top_k < logits.shape[-1]:
        kth = logits.topk(sampling.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if sampling.top_p < 1.0:
        ordered, order = logits.sort(dim=-1, descending=True)
        p = ordered.softmax(-1)
        before = p.cumsum(-1) - p  # probability of the better tokens
        cut = before >= sampling.top_p  # the most likely token is always kept
        logits = logits.masked_fill(cut.scatter(-1, order, cut), -math.inf)
    return logits


def sample(stepper: Stepper, batch: int, max_lens: list[int], count: int, alpha: float, sampling: Sampling,
           device: torch.device | str = "cpu", specials: Specials = DEFAULT) -> list[list[Hypothesis]]:
    """`count` samples of each of `batch` sentences, best score first."""
    generator = torch.Generator(device=device).manual_seed(sampling.seed)
    rows = batch * count
    limits = torch.tensor([max(1, m) for m in max_lens], device=device).repeat_interleave(count)
    stepper.start(torch.arange(batch, device=device).repeat_interleave(count))
    logprob = torch.zeros(rows, dtype=torch.float64, device=device)
    length = torch.zeros(rows, dtype=torch.long, device=device)
    done = torch.zeros(rows, dtype=torch.bool, device=device)
    tokens = []
    if specials.eos is None:
        raise ValueError("the vocabulary declares no end token: nothing can be generated")
    eos = specials.eos
    with torch.no_grad():
        last = start_tokens(stepper, rows, specials, device)
        for t in range(int(limits.max())):
            logp = torch.log_softmax(stepper.step(last).float(), dim=-1)
            logp[:, blocked_tokens(logp.shape[-1], logp.device, specials)] = -math.inf
            at_end = (t + 1 >= limits).unsqueeze(1) & (torch.arange(logp.shape[-1], device=device) != eos)
            logp = logp.masked_fill(at_end, -math.inf)
            if bool(torch.isnan(logp).any()):  # torch.multinomial refuses NaN (a CUDA device assert)
                raise NaNScores(t + 1)
            probs = filter_logits(logp, sampling).softmax(-1)
            drawn = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            drawn = drawn.masked_fill(done, specials.filler)
            logprob += torch.where(done, 0.0, logp.gather(1, drawn.clamp(min=0).unsqueeze(1)).squeeze(1).double())
            length += (~done).long()
            done |= drawn == eos
            tokens.append(drawn)
            last = drawn
            if bool(done.all()):
                break
    return _hypotheses(torch.stack(tokens, 1).tolist(), logprob.tolist(), length.tolist(), batch, count, alpha)


def _hypotheses(tokens: list[list[int]], logprob: list[float], length: list[int], batch: int, count: int,
                alpha: float) -> list[list[Hypothesis]]:
    out = []
    for s in range(batch):
        hyps = [Hypothesis(tokens[r][: length[r] - 1], logprob[r] / length_penalty(length[r], alpha),
                           logprob[r]) for r in range(s * count, (s + 1) * count)]
        out.append(sorted(hyps, key=lambda h: -h.score))
    return out
