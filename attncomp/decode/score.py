"""Scoring the way the field scores: sacreBLEU's BLEU and chrF, with their signatures."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sacrebleu.metrics import BLEU, CHRF

from attncomp.errors import DataError


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_text: str  # sacreBLEU's own one-line summary: precisions, brevity penalty, lengths
    sentences: int

    def to_json(self) -> dict:
        return asdict(self)


def score(hypotheses: list[str], references: list[str]) -> Scores:
    if len(hypotheses) != len(references):
        raise DataError(f"{len(hypotheses)} translations but {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return Scores(round(b.score, 2), round(c.score, 2), str(bleu.get_signature()), str(chrf.get_signature()),
                  str(b), len(hypotheses))


def sacrebleu_test_set(test_set: str, langpair: str) -> tuple[list[str], list[str]]:
    """Source and reference lines of a standard test set, downloaded by sacreBLEU (needs network)."""
    from sacrebleu.utils import get_reference_files, get_source_file

    try:
        src = get_source_file(test_set, langpair)
        refs = get_reference_files(test_set, langpair)
    except BaseException as err:  # sacreBLEU exits (SystemExit) on an unknown set or a failed download
        raise DataError(f"sacreBLEU could not provide {test_set} {langpair}: {err}") from None
    with open(src, encoding="utf-8") as f:
        sources = f.read().splitlines()
    with open(refs[0], encoding="utf-8") as f:
        references = f.read().splitlines()
    return sources, references
