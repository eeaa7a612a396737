"""Beam search, batched over sentences, over any "stepper" that gives next-token logits.

Scores are sums of log-probabilities; a finished hypothesis (it emitted </s>) is ranked by its
score over the length penalty ((5 + len) / 6) ** alpha (Wu et al. 2016), len counting </s>. Each
step looks at the best 2 * beam continuations; the best `beam` non-endings live on. At its maximum
length a sentence is done (</s> is forced there); before that, the spec's `decode.stop` decides:

    bound   tensor2tensor's rule (utils/beam_search.py, `_is_finished`), the paper's implementation:
            every ending among the 2 * beam candidates enters the sentence's `beam` best finished
            hypotheses, and the sentence is done only when the worst of those beats what the best
            live hypothesis could still reach: its log-probability over the largest length
            penalty, the one at the maximum length (log-probabilities only fall as it grows).
    first   first-come: an ending among the best `beam` candidates finishes a hypothesis, and the
            sentence is done as soon as `beam` have finished, though a live one might still win.

Finished sentences leave the batch. Beam 1 is greedy decoding under either rule: the argmax
continues until it is </s>, as tensor2tensor's `_fast_decode`, fairseq, CTranslate2 and Hugging Face
decode at beam 1 (under `bound`, an ending ranked second would otherwise finish a shorter
hypothesis that the argmax never chose).

Steppers:
    CachedStepper    the compiled model's encode / init_cache / decode_step (the key/value cache); a prefix LM's
                     prompt but its last token (`<s> source`) is encoded by init_cache in one step
    FullStepper      re-runs forward on the whole prefix each step: no cache, the reference
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

from attncomp.errors import DataError
from attncomp.ir.family import named
from attncomp.vocab import DEFAULT, Specials


@dataclass
class Hypothesis:
    tokens: list[int]  # generated tokens, without <s> and </s>
    score: float  # log-probability / length penalty
    logprob: float


class NaNScores(DataError):
    """The model's next-token scores are not numbers: its activations overflowed the dtype it decodes in
    (float16's largest is 65504), or its weights are not finite. Decoding on would rank NaN first (topk's
    order) and end every hypothesis unfinished, or hand torch.multinomial a NaN probability."""

    def __init__(self, step: int):
        super().__init__(f"the model's next-token scores are NaN at output step {step}: its activations "
                         "overflow the dtype it decodes in, or its weights are not finite")
        self.step = step


def length_penalty(length: int, alpha: float) -> float:
    return ((5.0 + length) / 6.0) ** alpha


class Stepper:
    """Next-token logits for rows of (sentence, beam), with rows kept, reordered or dropped."""

    def start(self, rows: torch.Tensor) -> None:  # rows: sentence index of each row
        raise NotImplementedError

    def step(self, tokens: torch.Tensor) -> torch.Tensor:  # (R,) newest tokens -> (R, V) logits
        raise NotImplementedError

    def select(self, rows: torch.Tensor) -> None:  # keep rows (in this order), e.g. for reordering
        raise NotImplementedError


class CachedStepper(Stepper):
    """Encoder-decoder or decoder-only decoding through decode_step and its cache.

    The rows of one sentence (its beams) share the source, so the encoder and init_cache run once
    per sentence and their rows are copied to the beams. Cache entries that decode_step passes
    through unchanged (the source mask, cross-attention keys and values) are equal across the rows
    of a sentence: `select` copies them only when the sentence of some row changes (a sentence
    left the batch), not at every reordering of beams.
    """

    def __init__(self, model, src: torch.Tensor, specials: Specials = DEFAULT, segments: torch.Tensor | None = None):
        """`specials`: the vocabulary's special ids; `segments`: the source's segment ids, for a model with
        `segments = N` (None: segment 0)."""
        self.model, self.src, self.specials, self.segments = model, src, specials, segments
        self.cache = None  # a DecodingCache (attncomp.lower.cache): its tensors are its pytree leaves
        self.sentence: torch.Tensor | None = None  # the sentence of each row
        self.static: list[bool] = []  # per leaf: decode_step returned it untouched

    def start(self, rows: torch.Tensor) -> None:
        self.sentence = rows
        if named(self.model.family).source == "encoded":  # the model's protocol (attncomp.protocol)
            unique, inverse = torch.unique(rows, return_inverse=True)
            src = self.src.index_select(0, unique)
            extra = () if self.segments is None else (self.segments.index_select(0, unique),)
            cache = self.model.init_cache(src, self.model.encode(src, *extra))
            self.cache = pytree.tree_map(lambda c: c.index_select(0, inverse), cache)
            return
        src = self.src.index_select(0, rows)
        prompt = prompt_tokens(src, self.specials)
        if prefix_lm(self.model):  # the prefix, `<s> source`, encoded in one step (seen both ways)
            self.cache = self.model.init_cache(prompt[:, :-1])
        else:  # decoder-only: the source is a prompt, fed token by token
            self.cache = self.model.init_cache(src)
            for t in range(prompt.shape[1] - 1):
                _, self.cache = self.model.decode_step(prompt[:, t : t + 1], self.cache)
        self.pending = prompt[:, -1]  # <sep> (or the prompt's last token): fed by the first step instead of <s>

    pending: torch.Tensor | None = None

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.pending is not None:
            tokens, self.pending = self.pending, None
        logits, cache = self.model.decode_step(tokens.unsqueeze(1), self.cache)
        self.static = [new is old for new, old in zip(pytree.tree_leaves(cache), pytree.tree_leaves(self.cache))]
        self.cache = cache
        return logits

    def select(self, rows: torch.Tensor) -> None:
        sentence = self.sentence.index_select(0, rows)
        # Callers keep each sentence's rows together (beams reorder within a sentence), so the rows
        # belong to the same sentences exactly when no sentence left: no comparison, no device sync.
        same = rows.numel() == self.sentence.numel()
        leaves, layout = pytree.tree_flatten(self.cache)
        static = self.static or [False] * len(leaves)
        self.cache = pytree.tree_unflatten([c if same and kept else c.index_select(0, rows)
                                            for c, kept in zip(leaves, static)], layout)
        self.sentence = sentence


class FullStepper(Stepper):
    """Runs the full forward pass on the whole prefix every step: the cache-free reference."""

    def __init__(self, model, src: torch.Tensor, specials: Specials = DEFAULT):
        self.model, self.src, self.specials = model, src, specials
        self.decoder_only = named(model.family).source == "prompt"

    def start(self, rows: torch.Tensor) -> None:
        self.rows_src = self.src.index_select(0, rows)
        if self.decoder_only:  # the prompt is already the prefix; the search's first <s> is not needed
            self.seq, self.skip = prompt_tokens(self.rows_src, self.specials), True
            self.prefix = self.seq.shape[1] - 1
        else:
            self.seq, self.skip = self.rows_src[:, :0], False

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        if not self.skip:
            self.seq = torch.cat([self.seq, tokens.unsqueeze(1)], 1)
        self.skip = False
        if not self.decoder_only:
            return self.model(self.rows_src, self.seq)[:, -1]
        if prefix_lm(self.model):  # the prompt but its last token (<sep>) is every row's prefix
            prefix = self.seq.new_full((self.seq.shape[0],), self.prefix)
            return self.model(self.seq, prefix)[:, -1]
        return self.model(self.seq)[:, -1]

    def select(self, rows: torch.Tensor) -> None:
        self.rows_src = self.rows_src.index_select(0, rows)
        self.seq = self.seq.index_select(0, rows)


def prefix_lm(model) -> bool:
    """Whether a model is a prefix LM (`decoder { mask = prefix }`), as its protocol says: `hidden` reads the rows'
    prefix lengths. Its init_cache encodes the tokens it is given as their prefix, in one step."""
    return "prefix" in getattr(model, "loss_inputs", ())


def prompt_tokens(src: torch.Tensor, specials: Specials = DEFAULT) -> torch.Tensor:
    """A decoder-only model's prompt: <s> source <sep> (sources of one batch have equal length); without a
    <sep> in the vocabulary (an imported model), <s> source: the text continues."""
    body = src[:, :-1] if bool((src[:, -1] == specials.eos).all()) else src
    parts = [torch.full_like(src[:, :1], specials.start), body]
    if specials.sep is not None:
        parts.append(torch.full_like(src[:, :1], specials.sep))
    return torch.cat(parts, 1)


@dataclass
class _Sentence:
    max_len: int
    finished: list[Hypothesis]
    done: bool = False


def blocked_tokens(vocab: int, device, specials: Specials = DEFAULT) -> torch.Tensor:
    """Tokens a hypothesis may never emit: <pad>, <s>, <sep> (attncomp.vocab.Specials.never_generated)."""
    mask = torch.zeros(vocab, dtype=torch.bool, device=device)
    mask[[t for t in specials.never_generated() if t < vocab]] = True
    return mask


def start_tokens(stepper: Stepper, rows: int, specials: Specials, device) -> torch.Tensor:
    """The decoder's first input (its start token) after feeding it the forced tokens (BART's <s>, a target
    language), whose logits are not searched: each is the target's next token, whatever the model says."""
    last = torch.full((rows,), specials.start, dtype=torch.long, device=device)
    for token in specials.forced:
        stepper.step(last)
        last = torch.full((rows,), token, dtype=torch.long, device=device)
    return last


def beam_search(stepper: Stepper, batch: int, max_lens: list[int], beam: int, alpha: float, nbest: int = 1,
                device: torch.device | str = "cpu", block_unk: bool = False,
                stop: str = "bound", specials: Specials = DEFAULT) -> list[list[Hypothesis]]:
    """The `nbest` best hypotheses of each of `batch` sentences (each with its own maximum length).

    `stop` is "bound" (tensor2tensor's rule) or "first" (first-come); see the module's docstring.
    The model runs on `device`; the bookkeeping (histories, finished hypotheses) stays on the host,
    with one transfer of the step's best candidates per step.
    """
    nbest = min(nbest, beam)
    if beam == 1:
        stop = "first"  # greedy: only the argmax may end a hypothesis (see the module's docstring)
    sentences = [_Sentence(max(1, m), []) for m in max_lens]
    active = list(range(batch))  # the sentence of each active group of `beam` rows
    stepper.start(torch.arange(batch, device=device).repeat_interleave(beam))
    scores = torch.full((batch, beam), -math.inf, device=device)
    scores[:, 0] = 0.0  # one live hypothesis to start with
    history = torch.zeros((batch * beam, 0), dtype=torch.long)  # host
    if specials.eos is None:
        raise ValueError("the vocabulary declares no end token: nothing can be generated")
    eos = specials.eos
    with torch.no_grad():
        last = start_tokens(stepper, batch * beam, specials, device)
        for t in range(max(s.max_len for s in sentences)):
            logp = torch.log_softmax(stepper.step(last).float(), dim=-1)  # (rows, V)
            vocab = logp.shape[-1]
            logp[:, blocked_tokens(vocab, logp.device, specials)] = -math.inf
            if block_unk and specials.unk is not None:
                logp[:, specials.unk] = -math.inf
            at_end = torch.tensor([t + 1 >= sentences[i].max_len for i in active], device=logp.device)
            not_eos = torch.arange(vocab, device=logp.device) != eos
            logp = logp.masked_fill(at_end.repeat_interleave(beam).unsqueeze(1) & not_eos, -math.inf)  # </s> only
            candidates = (scores.unsqueeze(-1) + logp.view(len(active), beam, vocab)).view(len(active), -1)
            top, index = (x.cpu() for x in candidates.topk(2 * beam, dim=-1))  # (n, 2 beam), to the host
            if torch.isnan(top).any():  # topk ranks NaN first: a NaN anywhere in a group reaches its top
                raise NaNScores(t + 1)
            keep_rows, keep_scores, keep_tokens, still = [], [], [], []
            for g, sentence_index in enumerate(active):
                sentence = sentences[sentence_index]
                live = _advance(sentence, g, t, top[g].tolist(), (index[g] // vocab).tolist(),
                                (index[g] % vocab).tolist(), history, beam, alpha, stop, eos)
                if sentence.done:
                    continue
                still.append(g)
                keep_rows += [g * beam + o for o, _, _ in live]
                keep_scores.append([score for _, score, _ in live])
                keep_tokens += [tok for _, _, tok in live]
            if not still:
                break
            rows = torch.tensor(keep_rows)
            stepper.select(rows.to(device))
            history = torch.cat([history.index_select(0, rows), torch.tensor(keep_tokens).unsqueeze(1)], 1)
            last = history[:, -1].to(device)
            scores = torch.tensor(keep_scores, device=device)
            active = [active[g] for g in still]
    return [sorted(s.finished, key=lambda h: -h.score)[:nbest] for s in sentences]


def _advance(sentence: _Sentence, group: int, t: int, top: list[float], origin: list[int], token: list[int],
             history: torch.Tensor, beam: int, alpha: float, stop: str, eos: int) -> list[tuple[int, float, int]]:
    """Record finished candidates of one sentence; return its next `beam` live (origin, score, token)."""
    live: list[tuple[int, float, int]] = []
    for rank, (score, o, tok) in enumerate(zip(top, origin, token)):
        if not math.isfinite(score):
            break
        if tok == eos:
            if stop == "bound" or (rank < beam and len(sentence.finished) < beam):
                tokens = history[group * beam + o].tolist()
                sentence.finished.append(Hypothesis(tokens, score / length_penalty(t + 1, alpha), score))
        elif len(live) < beam:
            live.append((o, score, tok))
    if stop == "bound":
        sentence.finished = sorted(sentence.finished, key=lambda h: -h.score)[:beam]
    if not live or _settled(sentence, live[0][1], beam, alpha, stop):
        sentence.done = True
        return live
    while len(live) < beam:  # fewer live candidates than beams: pad with dead ones
        live.append((live[0][0], -math.inf, live[0][2]))
    return live


def _settled(sentence: _Sentence, best_live: float, beam: int, alpha: float, stop: str) -> bool:
    """Whether the search of a sentence that still has live hypotheses can end now."""
    if stop == "first":
        return len(sentence.finished) >= beam
    if not sentence.finished:
        return False
    reachable = best_live / length_penalty(sentence.max_len, alpha)  # the best any live one can still score
    return min(h.score for h in sentence.finished) > reachable
