"""BLEU of a model on the first sentences of a prepared split, decoded with the spec's beam, length
penalty and maximum length: what a sweep row reports (attncomp.sweep.evaluate) and what a run measures
at each evaluation (`train.validation.bleu`). Sources and references are the prepared token ids turned
back into text by the data's sentencepiece models, so the score is sacreBLEU's on detokenised text."""

from __future__ import annotations

import time

import torch

from attncomp.data.dataset import PreparedData, Split
from attncomp.decode.score import score
from attncomp.decode.translate import Translator
from attncomp.ir.family import Described


@torch.no_grad()
def bleu(model: torch.nn.Module, data: PreparedData, split: Split, sentences: int,
         device: torch.device | str = "cpu", described: Described | None = None) -> tuple[float, float]:
    """(BLEU, sentences per second) on the first `sentences` pairs of `split`; leaves the model in eval mode.
    `described`: the model's facts and recipe, whose decode block decodes (None: the compiled model's spec)."""
    count = min(sentences, len(split))
    src_tok, tgt_tok = data.tokenizer("src"), data.tokenizer("tgt")
    sources = src_tok.decode([split.src[i].tolist() for i in range(count)])
    references = tgt_tok.decode([split.tgt[i].tolist() for i in range(count)])
    decode = (described or model.spec).decode
    translator = Translator(model, src_tok, tgt_tok, decode.beam, decode.length_penalty, decode.max_len,
                            device=torch.device(device), progress=False, described=described)
    started = time.perf_counter()
    hypotheses = [options[0].text for options in translator.translate(sources)]
    seconds = max(time.perf_counter() - started, 1e-9)
    return score(hypotheses, references).bleu, count / seconds
