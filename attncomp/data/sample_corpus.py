"""A parallel corpus the project makes itself: no download, deterministic for a seed.

The source language is a small English; the target is an invented language with its own words and
two reorderings a model has to learn, not just a word-for-word substitution:

    the big dog sees a small cat near the old tree
    le chien grosso un gatto pico vedo pres le arbro vecho

- adjectives follow their noun;
- the verb moves to the end of its clause, after the object and any prepositional phrase;
- clauses joined by "and" are each reordered on their own.

Small enough that a tiny model learns it on a laptop CPU in about a minute.
"""

from __future__ import annotations

import random
from pathlib import Path

DETERMINERS = {"the": "le", "a": "un"}
NOUNS = {
    "dog": "chien", "cat": "gatto", "bird": "vogel", "horse": "cavallo", "fish": "pesk", "child": "kindo",
    "teacher": "maestro", "farmer": "bauer", "king": "rey", "queen": "reyna", "apple": "mela", "book": "libro",
    "house": "casa", "tree": "arbro", "river": "fluvo", "car": "auto", "garden": "jardin", "city": "urbo",
    "friend": "amiko", "door": "porta", "window": "fenestra", "table": "tavolo", "song": "kanto", "letter": "brevo",
}
ADJECTIVES = {
    "big": "grosso", "small": "pico", "red": "roso", "green": "verdo", "old": "vecho", "young": "jovo",
    "happy": "felico", "sad": "trista", "fast": "rapido", "quiet": "kalmo", "bright": "klaro", "dark": "oskuro",
}
VERBS = {
    "sees": "vedo", "likes": "amo", "finds": "trovo", "takes": "prendo", "opens": "aprio", "hears": "audo",
    "paints": "pinto", "follows": "sekvo", "visits": "visito", "builds": "konstruo", "reads": "lego", "loses": "perdo",
}
PREPOSITIONS = {"near": "pres", "under": "sub", "with": "kon", "behind": "dopo", "in": "en"}
AND = ("and", "e")


def _noun_phrase(rng: random.Random) -> tuple[list[str], list[str]]:
    det = rng.choice(list(DETERMINERS))
    noun = rng.choice(list(NOUNS))
    src, tgt = [det], [DETERMINERS[det]]
    adjectives = rng.sample(list(ADJECTIVES), rng.choice((0, 0, 1, 1, 2)))
    src += adjectives + [noun]
    tgt += [NOUNS[noun]] + [ADJECTIVES[a] for a in adjectives]  # adjectives follow the noun
    return src, tgt


def _clause(rng: random.Random) -> tuple[list[str], list[str]]:
    subj_s, subj_t = _noun_phrase(rng)
    verb = rng.choice(list(VERBS))
    obj_s, obj_t = _noun_phrase(rng)
    src, tgt = subj_s + [verb] + obj_s, subj_t + obj_t
    if rng.random() < 0.4:
        prep = rng.choice(list(PREPOSITIONS))
        pp_s, pp_t = _noun_phrase(rng)
        src += [prep] + pp_s
        tgt += [PREPOSITIONS[prep]] + pp_t
    return src, tgt + [VERBS[verb]]  # the verb comes last


def sentence_pair(rng: random.Random) -> tuple[str, str]:
    src, tgt = _clause(rng)
    if rng.random() < 0.25:
        more_s, more_t = _clause(rng)
        src, tgt = src + [AND[0]] + more_s, tgt + [AND[1]] + more_t
    return " ".join(src), " ".join(tgt)


def generate(seed: int, pairs: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [sentence_pair(rng) for _ in range(pairs)]


SPLITS = {"train": 0, "valid": 1, "test": 2}


def write_corpus(out: Path, train_pairs: int = 20000, held_out: int = 500, seed: int = 1) -> dict[str, Path]:
    """Write {train,valid,test}.{src,tgt} under `out`; returns the split prefixes.

    Held-out splits contain no pair that occurs in train.
    """
    out.mkdir(parents=True, exist_ok=True)
    train = generate(seed, train_pairs)
    seen = set(train)
    prefixes = {}
    for split, offset in SPLITS.items():
        if split == "train":
            pairs = train
        else:
            candidates = generate(seed * 1000 + offset, held_out * 3)
            pairs = [p for p in dict.fromkeys(candidates) if p not in seen][:held_out]
        for side, index in (("src", 0), ("tgt", 1)):
            (out / f"{split}.{side}").write_text("\n".join(p[index] for p in pairs) + "\n", encoding="utf-8")
        prefixes[split] = out / split
    return prefixes
