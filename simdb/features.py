"""Text normalisation and tokenising: the string half of fingerprinting.

The pipeline, applied to every text before any hashing:

1. **Invalid surrogates.**  A lone surrogate (``'\\ud800'``) cannot be encoded, so each one is
   replaced by U+FFFD, which is not a word character: it separates tokens like punctuation.
2. **Unicode NFKC, then casefolding.**  Compatibility forms ("ﬁ", full-width letters,
   superscripts) become their plain equivalents and case is removed ("Straße" → "strasse").
3. **Apostrophes are deleted** (U+0027, U+2018, U+2019, U+02BC), so "don't" and "don’t"
   are both the token "dont".
4. **Punctuation and whitespace folding.**  A token is a maximal run of letters, digits and
   combining marks; everything else (punctuation, symbols, whitespace, underscore) only
   separates tokens.  Character shingles are taken over the tokens joined by single spaces.
5. **Scripts written without spaces** (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar)
   are split into one token per character when ``split_unspaced`` is true, so a Chinese
   paragraph does not collapse into one giant token; word n-gram shingles over those tokens
   are then character n-gram shingles.

ASCII texts take a fast path (``lower`` and one regular expression) that gives exactly the
same tokens as the general path; the tests check this.

Huge texts are processed in chunks of about :data:`CHUNK_CHARS` characters, cut at
whitespace, so memory stays bounded whatever the text's length.  A chunk is cut inside a run
of non-space characters only when the run is longer than a whole chunk; such a monster
"token" is then split in two.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterator
from functools import cache

#: Characters per chunk when streaming a long text.  About 45,000 English words, so the
#: per-chunk arrays of the fingerprinter stay at a few megabytes.
CHUNK_CHARS = 1 << 18

# Ranges of the scripts that are written without spaces between words.
_UNSPACED_RANGES = (
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003134f"  # CJK extensions B to G
)
_UNSPACED_SEARCH = re.compile(f"[{_UNSPACED_RANGES}]").search
_SURROGATES = re.compile("[\ud800-\udfff]")
_APOSTROPHES = str.maketrans("", "", "'\u2018\u2019\u02bc")
_ASCII_TOKENS = re.compile(r"[a-z0-9]+").findall


@cache
def _combining_mark_class() -> str:
    """The regex class body of every combining mark (categories Mn, Mc, Me) outside the
    unspaced scripts.  Built once, on first use, by a scan of all code points (~0.2 s)."""
    parts = []
    start = previous = -2
    unspaced = re.compile(f"[{_UNSPACED_RANGES}]")
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if unicodedata.category(char)[0] == "M" and not unspaced.match(char):
            if code != previous + 1:
                if start >= 0:
                    parts.append((start, previous))
                start = code
            previous = code
    parts.append((start, previous))
    return "".join(f"\\U{a:08x}-\\U{b:08x}" if a != b else f"\\U{a:08x}" for a, b in parts)


@cache
def _token_finder(split_unspaced: bool) -> re.Pattern[str]:
    """The token regex of the general (non-ASCII) path."""
    marks = _combining_mark_class()
    if split_unspaced:
        # One token per unspaced character, otherwise runs of word characters that are
        # neither underscore nor unspaced, with combining marks.
        return re.compile(f"[{_UNSPACED_RANGES}]|(?:[^\\W_{_UNSPACED_RANGES}]|[{marks}])+")
    return re.compile(f"(?:[^\\W_]|[{marks}])+")


def normalize(text: str) -> str:
    """Return ``text`` with lone surrogates replaced by U+FFFD, NFKC-normalised, casefolded
    and with apostrophes deleted (steps 1 to 3 of the module docstring).  O(len(text))."""
    if text.isascii():
        return text.lower().translate(_APOSTROPHES) if "'" in text else text.lower()
    if _SURROGATES.search(text):
        text = _SURROGATES.sub("\ufffd", text)
    return unicodedata.normalize("NFKC", text).casefold().translate(_APOSTROPHES)


def tokenize(text: str, split_unspaced: bool = True) -> list[str]:
    """Return the tokens of ``text`` (the whole module pipeline), in order.

    The empty text and a text of punctuation only have no tokens.  O(len(text)) time and
    memory; use :func:`iter_token_chunks` for texts too big to tokenise at once.
    """
    if text.isascii():
        lowered = text.lower()
        if "'" in lowered:
            lowered = lowered.replace("'", "")
        return _ASCII_TOKENS(lowered)
    return _token_finder(split_unspaced).findall(normalize(text))


def has_unspaced(text: str) -> bool:
    """Whether ``text`` contains a character of a script written without spaces.  O(n)."""
    return _UNSPACED_SEARCH(text) is not None


def iter_chunks(text: str, chunk_chars: int = CHUNK_CHARS) -> Iterator[str]:
    """Yield consecutive pieces of ``text`` of about ``chunk_chars`` characters, each cut
    just after a whitespace character so no token is split (unless a run of non-space
    characters is longer than a chunk).  A text shorter than a chunk is yielded whole.
    O(len(text)) time; each piece is a copy of at most ``chunk_chars`` characters."""
    length = len(text)
    if length <= chunk_chars:
        yield text
        return
    start = 0
    while start < length:
        end = start + chunk_chars
        if end >= length:
            yield text[start:]
            return
        # Cut after the last whitespace of the window.  Whitespace is a starter in every
        # normalisation form and never part of a token, so cutting there changes nothing.
        cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end), text.rfind("\t", start, end))
        if cut <= start:
            cut = end - 1
            # No whitespace at all: do not separate a base character from its marks.
            while cut > start and unicodedata.category(text[cut + 1])[0] == "M":
                cut -= 1
        yield text[start : cut + 1]
        start = cut + 1


def iter_token_chunks(text: str, split_unspaced: bool = True, chunk_chars: int = CHUNK_CHARS) -> Iterator[list[str]]:
    """Yield the tokens of ``text`` chunk by chunk (see :func:`iter_chunks`); concatenated,
    they are :func:`tokenize`'s result.  Memory is bounded by the chunk size."""
    for piece in iter_chunks(text, chunk_chars):
        yield tokenize(piece, split_unspaced)


def word_shingles(tokens: list[str], ngram: int) -> list[str]:
    """The word n-gram shingles of ``tokens``, each the tokens joined by one space.

    A text with fewer than ``ngram`` (but at least one) tokens has one shingle, all of
    them; no tokens give no shingles.  O(len(tokens) * ngram).
    """
    if not tokens:
        return []
    if len(tokens) < ngram:
        return [" ".join(tokens)]
    return [" ".join(tokens[i : i + ngram]) for i in range(len(tokens) - ngram + 1)]


def char_shingles(tokens: list[str], ngram: int) -> list[str]:
    """The character ``ngram``-shingles of the tokens joined by single spaces, for example
    ``"the earth is moving"`` with 5 → ``"the e", "he ea", ...``.  A joined text shorter
    than ``ngram`` (but not empty) is one shingle.  O(total characters * ngram)."""
    joined = " ".join(tokens)
    if not joined:
        return []
    if len(joined) < ngram:
        return [joined]
    return [joined[i : i + ngram] for i in range(len(joined) - ngram + 1)]
