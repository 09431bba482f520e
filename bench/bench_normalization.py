"""Copies that a reader calls the same text: found at a threshold by each text pipeline version.

    python bench/bench_normalization.py [--docs 300] [--words 250] [--seed 0] [--threshold 0.9]

Generates documents of Zipfian words, a fifth of them accented (French/Spanish/German-like,
plus Greek and Russian words), then for each document one copy of each kind a crawl meets:

- ``pdf``: the text wrapped at 64 columns as a PDF's text layer gives it, long words broken
  by a hyphen at the line end;
- ``unaccented``: the text with its accents stripped, as an ASCII-only pipeline leaves it;
- ``capitals``: the first 40 words (a title and lead) in capitals, the rest as it was, Greek
  words without their accents, as Greek capitals are written.

Truth is by construction (a copy and its source are the same text); a pair between two
different documents is a false pair.  For each ``normalization`` version the benchmark adds
every text to a fresh database and counts, among ``pairs(threshold=t)``, the copies found per
kind and the false pairs.  Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import unicodedata

import simdb

_ACCENTED = [
    "café", "élève", "déjà", "naïve", "façade", "über", "straße", "mañana", "niño", "corazón",
    "après", "garçon", "fiancée", "crème", "rôle", "señor", "müde", "häuser", "été", "noël",
    "καφές", "θάλασσα", "ελευθερία", "πόλη", "ήλιος", "ёлка", "всё", "ещё", "идём", "моё",
]  # fmt: skip
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "de", "fa", "gu", "ho", "ji", "be", "zo", "wy"]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words = {"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 5))) for _ in range(size)}
    return sorted(words) + _ACCENTED * max(1, size // (5 * len(_ACCENTED)))


def _strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", "".join(char for char in decomposed if not unicodedata.combining(char)))


def _pdf_layer(text: str, width: int = 64) -> str:
    """``text`` wrapped at ``width`` columns, a word that would cross the margin broken by a
    hyphen where at least three letters stay on each side."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            room = width - len(line) - 2
            if len(word) >= 6 and room >= 3:
                cut = min(room, len(word) - 3)
                lines.append(f"{line} {word[:cut]}-")
                line = word[cut:]
                continue
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


def _capitals(text: str, lead: int = 40) -> str:
    """The first ``lead`` words in capitals, Greek ones without their accents, as Greek is
    written in capitals."""
    words = text.split(" ")
    greek = [any("\u0370" <= char <= "\u03ff" for char in word) for word in words[:lead]]
    capitals = [(_strip_accents(word) if is_greek else word).upper() for word, is_greek in zip(words, greek)]
    return " ".join([*capitals, *words[lead:]])


COPIES = {"pdf": _pdf_layer, "unaccented": _strip_accents, "capitals": _capitals}


def corpus(docs: int, words: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng, 4000)
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    rng.shuffle(weights)
    texts = []
    for number in range(docs):
        source = " ".join(rng.choices(vocabulary, weights, k=words))
        texts.append((f"doc{number}", source))
        texts.extend((f"doc{number}-{kind}", copy(source)) for kind, copy in COPIES.items())
    return texts


def measure(texts: list[tuple[str, str]], normalization: int, threshold: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        fingerprinter = simdb.Fingerprinter(normalization=normalization)
        with simdb.open(f"{directory}/db", fingerprinter=fingerprinter) as db:
            started = time.perf_counter()
            db.add_texts(texts)
            seconds = time.perf_counter() - started
            found = dict.fromkeys(COPIES, 0)
            false_pairs = 0
            for pair in db.pairs(threshold=threshold):
                source_a, _, kind_a = pair.key_a.partition("-")
                source_b, _, kind_b = pair.key_b.partition("-")
                if source_a != source_b:
                    false_pairs += 1
                elif not kind_a or not kind_b:  # a copy with its source
                    found[kind_a or kind_b] += 1
    docs = len(texts) // (1 + len(COPIES))
    return {**{kind: count / docs for kind, count in found.items()}, "false": false_pairs, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--words", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threshold", type=float, default=0.9)
    arguments = parser.parse_args()
    texts = corpus(arguments.docs, arguments.words, arguments.seed)
    print(
        f"# {arguments.docs} documents of {arguments.words} words, 3 copies each, seed {arguments.seed}, "
        f"threshold {arguments.threshold}: share of copies paired with their source"
    )
    print("| normalization | pdf | unaccented | capitals | false pairs | add_texts s |")
    print("|---|---|---|---|---|---|")
    for version in (2, 3):
        row = measure(texts, version, arguments.threshold)
        print(
            f"| {version} | {row['pdf']:.3f} | {row['unaccented']:.3f} | {row['capitals']:.3f} | "
            f"{row['false']:.0f} | {row['seconds']:.2f} |"
        )


if __name__ == "__main__":
    main()
