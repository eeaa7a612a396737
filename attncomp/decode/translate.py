"""Translate lines with a trained model: tokenise, batch by tokens, beam search, detokenise, in order.

Defined results for awkward input: an empty line gives an empty translation (the model is not run);
a line longer than the model can read, or than `max_source_tokens`, is cut to that many tokens (its
1-based number kept in `Translator.cut_lines`), as Marian's `--max-length-crop` does, so every input
line still gets one output line; the output is at most `max_len` of the spec and twice the source cap.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import torch

from attncomp.data.tokenizer import Tokenizer
from attncomp.decode.beam import CachedStepper, Hypothesis, beam_search
from attncomp.decode.sampling import Sampling, sample
from attncomp.ir import nodes
from attncomp.ir.family import Described, Family, ModelFacts, facts_of, named
from attncomp.progress import Progress
from attncomp.errors import DataError
from attncomp.vocab import Specials, agree

SINUSOIDAL_SOURCE_LIMIT = 1024  # tokens; sinusoids have no limit, but nothing sensible is this long


@dataclass
class Translation:
    text: str
    score: float
    tokens: list[int]


@dataclass
class Translator:
    model: torch.nn.Module
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    beam: int
    alpha: float
    max_len: nodes.SrcPlus | nodes.Fixed
    nbest: int = 1
    batch_tokens: int = 6000  # source tokens times beam per batch
    device: torch.device = torch.device("cpu")
    progress: bool = True  # a bar on a terminal, else a line every `progress_interval` s and one at the end
    progress_interval: float = 30.0
    stepper: type = CachedStepper  # FullStepper for models without decode_step
    stop: str | None = None  # "bound" or "first"; default: the spec's decode.stop
    max_source_tokens: int | None = None  # source tokens read at most (</s> included); None: the model's limit
    sampling: Sampling | None = None  # sample `nbest` translations instead of beam search
    described: Described | None = None  # the model's facts and recipe (None: the compiled model's spec)
    continuation: bool = False  # a decoder-only model trained on monolingual text: prompted `<s> line`, continued
    cut_lines: list[int] = field(default_factory=list, init=False)  # 1-based numbers of the lines cut

    def __post_init__(self):
        if self.family.source == "none":
            raise DataError("this is an encoder-only model (no decoder): it cannot generate text, so translate and "
                            "eval do not read it; fine-tune it (attncomp train) or export it")
        self._check_rows()
        try:
            self._specials = agree(self.spec.model.specials, self.tgt_tokenizer.specials,
                                   "the model's target tokenizer", getattr(self.tgt_tokenizer, "languages", {}).values(),
                                   remedy="keep the ids the model was trained with, its tokenizer's (no --set of them)")
        except ValueError as e:
            raise DataError(str(e)) from None
        if self.continuation and self.prompted:  # it read `<s> text </s>`, never a <sep> (attncomp.data.objective)
            self._specials = dataclasses.replace(self._specials, sep=None)  # beam.prompt_tokens: `<s> line`

    def _check_rows(self) -> None:
        """Every id the tokenizers can produce is an embedding row of the model (an id past them was an
        IndexError in beam search): their vocabularies, and the target's special and forced ids."""
        arch = self.facts
        for side, tokenizer, rows in (("source", self.src_tokenizer, arch.src_vocab),
                                      ("target", self.tgt_tokenizer, arch.tgt_vocab)):
            if tokenizer.vocab_size > rows:
                raise DataError(f"the checkpoint's {side} tokenizer has {tokenizer.vocab_size} tokens, more than the "
                                f"model's {rows} embedding rows: not this model's tokenizer")
        s = self.tgt_tokenizer.specials
        for i in (*s.tokenizer_roles().values(), s.mask, *s.forced):
            if i is not None and not 0 <= i < arch.tgt_vocab:
                raise DataError(f"the checkpoint's target tokenizer has token id {i}, past the model's "
                                f"{arch.tgt_vocab} embedding rows: not this model's tokenizer")

    @property
    def truncated(self) -> int:
        return len(self.cut_lines)

    @property
    def spec(self) -> nodes.Spec | Described:
        """The model's facts (`model`) and recipe (`decode`): the job's, or a compiled model's spec."""
        return self.described if self.described is not None else self.model.spec

    @property
    def facts(self) -> ModelFacts:
        return facts_of(self.spec.model)

    @property
    def family(self) -> Family:
        """The model's family, as its protocol names it (attncomp.protocol)."""
        return named(self.model.family)

    @property
    def prompted(self) -> bool:
        """The source is fed to the decoder as a prompt (decoder-only), not encoded."""
        return self.family.source == "prompt"

    def source_limit(self) -> int:
        rows = self.facts.max_positions  # a learned position table's
        if rows is not None:
            limit = rows - (2 if self.prompted else 0)  # decoder-only: <s>, <sep>
        else:
            limit = SINUSOIDAL_SOURCE_LIMIT
        return min(limit, self.max_source_tokens or limit)

    def output_limit(self, source_tokens: int) -> int:
        """Tokens to generate at most (</s> included), from the spec's max_len and the position table."""
        wanted = source_tokens + self.max_len.offset if isinstance(self.max_len, nodes.SrcPlus) else self.max_len.length
        rows = self.facts.max_positions
        if rows is not None:
            used = source_tokens + 2 if self.prompted else len(self.specials.forced)  # a prompt; forced tokens
            wanted = min(wanted, rows - used)
        return max(1, min(wanted, 2 * self.source_limit()))  # a spec's max_len of a million stays bounded

    @property
    def specials(self) -> Specials:
        """The special ids the spec's vocabulary declares (attncomp's, or an imported model's own), with the
        decoder's start and forced tokens a chosen target language sets (attncomp.vocab.agree)."""
        return self._specials

    def _encode(self, lines: list[str]) -> tuple[list[list[int]], list[int]]:
        """Token ids in the source's frame (text and </s>; an imported model's template, e.g. a language
        token), the text cut to the source limit; and the positions in `lines` of those cut."""
        limit = self.source_limit() - self.src_tokenizer.frame_size()  # room for </s> (and the template's tokens)
        ids = self.src_tokenizer.encode(lines)
        return ([self.src_tokenizer.frame(seq[:limit]) for seq in ids],
                [k for k, seq in enumerate(ids) if len(seq) > limit])

    @property
    def rows_per_line(self) -> int:
        """Decoder rows one source line takes: its beams, or its samples."""
        return self.nbest if self.sampling else self.beam

    def _batches(self, ids: list[list[int]], order: list[int]):
        """Index lists of similar length; a decoder-only model needs equal prompt lengths per batch."""
        exact = self.prompted
        batch: list[int] = []
        for i in order:
            longest = max([len(ids[j]) for j in batch] + [len(ids[i])])
            full = batch and (longest * (len(batch) + 1) * self.rows_per_line > self.batch_tokens
                              or (exact and len(ids[batch[0]]) != len(ids[i])))
            if full:
                yield batch
                batch = []
            batch.append(i)
        if batch:
            yield batch

    def _decode_batch(self, ids: list[list[int]]) -> list[list[Hypothesis]]:
        width = max(len(s) for s in ids)
        src = torch.full((len(ids), width), self.specials.filler, dtype=torch.long)
        for row, seq in enumerate(ids):
            src[row, : len(seq)] = torch.tensor(seq)
        src = src.to(self.device)
        limits = [self.output_limit(len(s) - 1) for s in ids]
        stepper = self.stepper(self.model, src, self.specials)
        if self.sampling:
            return sample(stepper, len(ids), limits, self.nbest, self.alpha, self.sampling, device=self.device,
                          specials=self.specials)
        return beam_search(stepper, len(ids), limits, self.beam, self.alpha, self.nbest, device=self.device,
                           stop=self.stop or self.spec.decode.stop, specials=self.specials)

    @torch.no_grad()
    def translate(self, lines: list[str]) -> list[list[Translation]]:
        """The nbest translations of every line, in input order."""
        self.model.eval()
        results: list[list[Translation]] = [[Translation("", 0.0, [])] for _ in lines]
        todo = [i for i, line in enumerate(lines) if line.strip()]
        ids, cut = self._encode([lines[i].strip() for i in todo])
        ids_of = dict(zip(todo, ids))
        self.cut_lines += [todo[k] + 1 for k in cut]
        order = sorted(todo, key=lambda i: len(ids_of[i]))
        compact = {i: ids_of[i] for i in order}
        with Progress(len(todo), "translate", "sent", self.progress_interval, enabled=self.progress) as bar:
            for batch in self._batches(compact, order):
                hyps = self._decode_batch([compact[i] for i in batch])
                for i, options in zip(batch, hyps):
                    texts = self.tgt_tokenizer.decode([h.tokens for h in options])
                    results[i] = [Translation(t, h.score, h.tokens) for t, h in zip(texts, options)]
                bar.update(len(batch))
        return results

    def translate_stream(self, lines: Iterable[str]) -> Iterator[list[Translation]]:
        """The nbest translations of each line as soon as it arrives (one line per batch, no progress bar)."""
        progress, self.progress = self.progress, False
        try:
            for number, line in enumerate(lines, 1):
                before = len(self.cut_lines)
                result = self.translate([line])[0]
                self.cut_lines[before:] = [number] * (len(self.cut_lines) - before)  # the stream's line number
                yield result
        finally:  # a later translate() of this translator shows progress again
            self.progress = progress
