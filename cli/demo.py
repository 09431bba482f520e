"""A small generated collection with planted near-duplicates, for ``simdb demo``.

The texts are made of invented words (syllables strung together by a seeded random
generator), so the collection is the same on every machine, needs no download, and no two
originals share more than chance vocabulary.  Some originals get edited copies: one word
replaced, one word inserted, or the case, punctuation and spacing changed.  Those are the
near-duplicates a user should see simdb find.

What the demo writes is recorded in ``DIR/.simdb-demo.json``, so that a rerun replaces its
own earlier output and never touches anything else (see :func:`previous_output`).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import simdb
from simdb import InvalidInputError, NotADatabaseError
from simdb.keys import describe

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


#: The record of what the demo wrote, beside ``DIR/docs`` and ``DIR/db``.
RECORD_NAME = ".simdb-demo.json"


@dataclass
class Output:
    """What the demo wrote into a directory: file names in ``DIR/docs``, keys in ``DIR/db``."""

    files: set[str] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)


def previous_output(directory: Path) -> Output:
    """What earlier demo runs wrote into ``directory``, after checking that it is missing,
    empty or a previous demo's (it holds the demo's record), and that ``DIR/docs`` and
    ``DIR/db`` hold nothing else (InvalidInputError naming the first thing that is not the
    demo's): a rerun may then replace all of it.  Cost: one listing, one pass over the keys."""
    record_path = directory / RECORD_NAME
    if directory.exists() and not directory.is_dir():
        raise InvalidInputError(f"{directory} is a file, not a directory", "choose a new or empty --dir")
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        made = Output(set(record["files"]), set(record["keys"]))
    except (FileNotFoundError, NotADirectoryError):
        if directory.is_dir() and any(directory.iterdir()):
            # Not a previous demo's directory (each run records its output before writing):
            # someone's own files, which the demo's docs/ and db/ would be mixed into.
            message = f"{directory} is not empty and holds no earlier simdb demo output"
            raise InvalidInputError(message, "choose a new or empty --dir") from None
        made = Output()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(
            f"{record_path} is not the record simdb demo writes ({exc})", "choose another --dir"
        ) from None
    docs, db = directory / "docs", directory / "db"
    if docs.is_dir():
        for entry in sorted(os.scandir(docs), key=lambda entry: entry.name):
            if entry.name not in made.files or not entry.is_file(follow_symlinks=False):
                raise InvalidInputError(
                    f"{entry.path} was not written by simdb demo, which would mix it into its output",
                    "choose another --dir",
                )
    if db.exists() and (not db.is_dir() or any(db.iterdir())):
        try:
            with simdb.open(db, readonly=True, create=False) as database:
                foreign = next((key for key in database if key not in made.keys), None)
        except NotADatabaseError:
            raise InvalidInputError(
                f"{db} exists and is not a database simdb demo made", "choose another --dir"
            ) from None
        if foreign is not None:
            raise InvalidInputError(
                f"the database {db} holds {describe(foreign)}, which simdb demo did not add", "choose another --dir"
            ) from None
    return made


def record_output(directory: Path, made: Output) -> None:
    """Record ``made`` as what the demo wrote into ``directory``; replaced whole, by rename,
    so an interrupted write leaves the previous record."""
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f"{RECORD_NAME}.partial"
    temporary.write_text(json.dumps({"files": sorted(made.files), "keys": sorted(made.keys)}) + "\n", encoding="utf-8")
    os.replace(temporary, directory / RECORD_NAME)
