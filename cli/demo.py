"""A small generated collection with planted near-duplicates, for ``simdb demo``.

The texts are made of invented words (syllables strung together by a seeded random
generator), so the collection is the same on every machine, needs no download, and no two
originals share more than chance vocabulary.  Some originals get edited copies: one word
replaced, one word inserted, or the case, punctuation and spacing changed.  Those are the
near-duplicates a user should see simdb find.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "ch", "sh", "pl")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ea")
_CODAS = ("", "", "", "n", "r", "s", "l", "m")
VOCABULARY_SIZE = 3000
SENTENCES_PER_DOCUMENT = (30, 40)
WORDS_PER_SENTENCE = (8, 16)


@dataclass(frozen=True)
class Collection:
    """The generated documents (file name -> text) and the planted pairs (original, copy)."""

    documents: dict[str, str]
    planted: list[tuple[str, str]]


def _vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < VOCABULARY_SIZE:
        syllables = rng.choice((1, 2, 2, 3, 3, 4))
        words.add("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)))
    return sorted(words)


def _document(rng: random.Random, vocabulary: list[str]) -> str:
    sentences = []
    for _ in range(rng.randint(*SENTENCES_PER_DOCUMENT)):
        words = rng.choices(vocabulary, k=rng.randint(*WORDS_PER_SENTENCE))
        sentences.append(" ".join(words).capitalize() + rng.choice((".", ".", ".", "?", "!")))
    # Paragraphs of a few sentences each, like an ordinary text file.
    paragraphs = [" ".join(sentences[start : start + 4]) for start in range(0, len(sentences), 4)]
    return "\n\n".join(paragraphs) + "\n"


def _edit(rng: random.Random, text: str, vocabulary: list[str], how: str) -> str:
    words = text.split(" ")
    position = rng.randrange(1, len(words) - 1)
    if how == "replaced":
        words[position] = rng.choice(vocabulary)
    elif how == "inserted":
        words.insert(position, rng.choice(vocabulary))
    else:  # "reformatted": case, punctuation and spacing only, which tokenising ignores
        return text.upper().replace(".", " ;").replace("\n\n", "\n   \n")
    return " ".join(words)


def generate(documents: int = 300, copies: int = 40, seed: int = 2024) -> Collection:
    """``documents`` texts of about 400 words, of which ``copies`` are edited copies of
    distinct originals.  Deterministic for a given seed.  O(documents)."""
    if not 0 <= copies <= documents // 2:
        raise ValueError(f"copies={copies} must be between 0 and documents/2 = {documents // 2}")
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng)
    originals = documents - copies
    texts = {f"article-{number:03d}.txt": _document(rng, vocabulary) for number in range(1, originals + 1)}
    planted = []
    for number in rng.sample(range(1, originals + 1), copies):
        how = rng.choice(("replaced", "inserted", "reformatted"))
        original = f"article-{number:03d}.txt"
        copy = f"article-{number:03d}-{how}.txt"
        texts[copy] = _edit(rng, texts[original], vocabulary, how)
        planted.append((original, copy))
    return Collection(texts, sorted(planted))


def write(collection: Collection, directory: Path) -> list[Path]:
    """Write the documents into ``directory`` (created if missing); returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in sorted(collection.documents.items()):
        path = directory / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
