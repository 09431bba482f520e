"""Text normalisation and tokenising: the string half of fingerprinting.

The pipeline, applied to every text before any hashing:

1. **Invalid surrogates.**  A lone surrogate (``'\\ud800'``) cannot be encoded, so each one is
   replaced by U+FFFD, which is not a word character: it separates tokens like punctuation.
   From version 7 the surrogates U+DCC0-U+DCFF, which stand for bytes 0xC0-0xFF that could
   not be decoded (Python's ``surrogateescape``: ``bytes`` given to the fingerprinter and
   files the CLI reads are decoded so), are kept, each a letter of the word it is in: the
   letters of single-byte encodings, so a text read in the wrong encoding (cp1251 as UTF-8)
   keeps its words, where with U+FFFD for every letter two different such texts were
   duplicates by a shared date.  Bytes 0x80-0xBF (their punctuation: cp1252's curly quotes
   and dashes) are U+FFFD, separators, as before.  From version 8, first, a run of such
   bytes beside an ASCII letter ("pr\\xe9sident"), or a lone one ("\\xe0 Paris"), is read as
   cp1252, the most common single-byte encoding of Western European text: its letters then
   fold as the same text's UTF-8 does, so a file saved in Latin-1 is its UTF-8 copy (the
   probe's French, German and Spanish copies were at J 0.51-0.54 under version 7).
2. **Unicode NFKC, then casefolding.**  Compatibility forms ("ﬁ", full-width letters,
   superscripts) become their plain equivalents and case is removed ("Straße" → "strasse").
3. **Apostrophes are deleted** (U+0027, U+2018, U+2019, U+02BC), so "don't" and "don’t"
   are both the token "dont".
   From pipeline version 2 (:data:`NORMALIZATION`): before step 2, invisible characters
   (Unicode's default-ignorable code points: soft hyphens, zero-width spaces and joiners,
   direction marks, byte-order marks, variation selectors, Hangul fillers, tags) are
   deleted, so "hyphen\u00adation" is "hyphenation" and "❤️" is "❤", and decimal digits of
   every script become ASCII digits ("١٢٣" is "123"); after it, an ``i`` with a combining
   dot above, as casefolding leaves the Turkish "İ", is a plain ``i`` ("İSTANBUL" is
   "istanbul"), composed again with any accent that follows.
   From version 3, after it, diacritics are dropped where a reader takes the text as the
   same without them: the combining diacritical marks of Latin, Greek and Cyrillic letters
   ("café" is "cafe", "ΚΑΦΈΣ" and "καφές" are "καφεσ", "ё" is "е"), Hebrew points and
   Arabic vowel marks, and the Arabic tatweel (a stretching stroke) is deleted.  The marks
   of scripts that write vowels with them (Devanagari, Bengali, Thai, ...) and Japanese
   voicing marks are kept: there they make a different word.  And a word broken across a
   line end by a hyphen ("hyphen-" then a line break, then "ation") is joined, when a
   letter comes before the hyphen and a lowercase letter starts the next line, as in text
   taken from a PDF or a scan (after NFKC, so an accent written as its own mark and a
   fullwidth hyphen count; a soft hyphen at a line end is joined too).
   From version 5: letters a reader takes for others are folded into one (inside a word
   that holds a Latin letter, the Cyrillic, Greek and Armenian letters drawn like Latin
   ones in both cases, as in "pаypal" with a Cyrillic "а"; Latin small capitals; "ı",
   "ł", "đ", "ø", "æ" and "œ", which ASCII-fied text writes "i", "l", "d", "o", "ae" and
   "oe"; the Arabic letters that informal and Persian writing interchange: "ى", "ی" as
   "ي", "ة", "ہ" as "ه", "ک" as "ك"); the accents typed for an apostrophe (grave, acute:
   "don´t") are deleted as apostrophes are; tracking parameters (``utm_*``, ``fbclid`` and
   the like) are deleted from URLs; and a line-end hyphen join also crosses a form feed (a
   PDF's page break) and the other line breaks.
   From version 6, first of all: HTML character references are decoded (``&amp;``,
   ``&rsquo;``, ``&#39;``, ``&#x2019;``: named ones only with their semicolon and only names
   HTML knows, so "AT&T", "?a=1&b=2" and "&notes;" stay), so text taken from web pages
   without its markup decoded is the text.
   From version 7: the Indic nukta (the dot of "ज़", which marks a borrowed sound and which
   everyday typing leaves out) is dropped, the Devanagari candrabindu is read as an
   anusvara (both as Lucene's Hindi normaliser does), and the Cyrillic and Greek capitals
   drawn like Latin letters whose small letters are not (В Н К М Т, Β Ε Ζ Η Μ Ν Τ Υ) are
   read as Latin inside a word that holds a Latin letter ("Вitcoin"), as the letters drawn
   so in both cases are from version 5.
   And, last of step 3 (once a URL broken at a line end is joined and its look-alike
   letters are plain), a URL is read without its scheme, a leading "www.", "m.", "mobile."
   or "amp.", its fragment (but a one-page app's route, "#/..."), and a last path segment
   "amp", so that the forms a link is shared in are one link.
   From version 8: every hyphen between two letters joins them, on one line or across a
   line end, whatever the case of the next letter ("state-owned", and "state-" then "owned"
   on the next line, are "stateowned"), so a text wrapped at another width is the same
   text; a soft hyphen at a line end likewise.  Before NFKC, superscript and subscript
   digits and signs and vulgar fractions are set apart by spaces ("10⁶" is "10 6", not
   "106"), and the minus sign U+2212 is the ASCII one.
4. **Punctuation and whitespace folding.**  A token is a maximal run of letters, digits and
   combining marks; everything else (punctuation, symbols, whitespace, underscore) only
   separates tokens.  Character shingles are taken over the tokens joined by single spaces.
   From version 2 a token starts with a letter or digit: a combining mark that follows
   punctuation, a symbol or a space is dropped with it rather than made a token of its own.
   From version 6, a text with no token at all but punctuation or symbols (emoji too:
   "🔥🔥🔥 😂😂😂") takes each of those characters as a token, so that copies of it are each
   other's duplicates and different ones are not; a blank text stays featureless, and so
   does one holding U+FFFD or a lone surrogate (a text read in the wrong encoding, whose
   punctuation alone would make it every other such text's duplicate).  This is decided for
   the whole text, not chunk by chunk.
   From version 8, a symbol (Unicode categories So and Sc: emoji, "©", "€", "$"; not
   U+FFFD) is a token of its own in any text, and a "+" or "-" that starts a number (after
   no letter or digit, before a digit: "-5", "(+3") is part of its token, so "👍 ok" is not
   "👎 ok" nor "-1,250" "1,250".  Other punctuation and mathematical symbols ("<", "=")
   still only separate.
5. **Scripts written without spaces** (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar)
   are split into one token per character when ``split_unspaced`` is true, so a Chinese
   paragraph does not collapse into one giant token; word n-gram shingles over those tokens
   are then character n-gram shingles.  From version 6, Hangul syllables too: Korean is
   spaced, but inconsistently, and read by syllable a text's spacing changes nothing.

ASCII texts take a fast path (``lower`` and one regular expression) that gives exactly the
same tokens as the general path; the tests check this.

Huge texts are processed in chunks of about :data:`CHUNK_CHARS` characters, cut at
whitespace, so memory stays bounded whatever the text's length.  A chunk is cut inside a run
of non-space characters only when the run is longer than a whole chunk; such a monster
"token" is then split in two.
"""

from __future__ import annotations

import functools
import html
import html.entities
import re
import sys
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import cast

#: The version of the pipeline that new fingerprinters use.  Version 1 (the settings stored
#: before there were versions) is the pipeline without the invisible characters, digits and
#: dotted i of step 3 and with tokens that may start with a combining mark; version 2 is
#: without the diacritics and line-end hyphens of step 3.  Version 4 tokenises as version 3
#: does; its English stop-word list keeps negations (:mod:`simdb.stopwords`).  Version 5 is
#: version 4 with the folded letters, apostrophe marks, tracking parameters and line breaks
#: of step 3.  Version 6 decodes HTML character references (step 3) and takes a wordless
#: text's symbols as its tokens (step 4).  Version 7 keeps undecodable bytes (step 1),
#: folds the Indic nukta, the Devanagari candrabindu and the capitals drawn like Latin ones
#: and reads URLs in a canonical form (step 3).  Version 8 reads undecodable bytes beside
#: ASCII letters as cp1252 (step 1), sets superscript digits and fractions apart and joins
#: every hyphenated word (step 3), and takes symbols and signed numbers as tokens (step 4).
#: All are kept so that databases made with them go
#: on fingerprinting text as they always did.
NORMALIZATION = 8
NORMALIZATIONS = (1, 2, 3, 4, 5, 6, 7, 8)

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
# Hangul syllables, split one token each from version 6: Korean is written with spaces, but
# where they go is a matter of taste and often left out or added ("할 수 있다", "할수 있다"),
# so copies of one text were split into different words (J 0.3-0.9 with a tenth of the
# spaces dropped); read by syllable, as Chinese is by character, spacing changes nothing.
_HANGUL_SYLLABLES = "\uac00-\ud7af"


def _unspaced_ranges(normalization: int) -> str:
    """The class body of the characters that are each a token (with ``split_unspaced``)."""
    return _UNSPACED_RANGES + (_HANGUL_SYLLABLES if normalization >= 6 else "")


_SURROGATES = re.compile("[\ud800-\udfff]")
# The surrogates that stand for undecodable bytes 0xC0-0xFF (Python's "surrogateescape":
# byte 0xE9 is U+DCE9), which version 7 keeps as letters: in the single-byte encodings
# (cp1251, Latin-1, cp1252) those are letters.  Bytes 0x80-0xBF are their punctuation and
# symbols (cp1252's curly quotes, dashes and no-break space), and every other surrogate is
# no character at all: version 7 replaces those, as earlier versions replace every one.
_BYTE_ESCAPES = "\udcc0-\udcff"
_OTHER_SURROGATES = re.compile("[\ud800-\udcbf\udd00-\udfff]")
_BYTE_ESCAPE_SEARCH = re.compile(f"[{_BYTE_ESCAPES}]").search
# Any surrogate that stands for an undecodable byte, and every other surrogate.
_ANY_BYTE_ESCAPE = re.compile("[\udc80-\udcff]").search
_NOT_BYTE_ESCAPES = re.compile("[\ud800-\udc7f\udd00-\udfff]")
# Version 8's undecodable bytes read as cp1252: a run of them beside an ASCII letter
# ("pr\xe9sident", "\x93quoted\x94"), or a lone one ("\xe0 Paris"), is Western European
# text in its most common single-byte encoding, whose letters then fold as the same text
# decoded from UTF-8 does ("president").  A longer run among other bytes (a Cyrillic word in
# cp1251) stays as version 7 reads it.  The five bytes cp1252 leaves undefined are U+FFFD.
_CP1252_BYTE_RUN = re.compile(
    "(?<=[A-Za-z])[\udc80-\udcff]+|[\udc80-\udcff]+(?=[A-Za-z])|(?<![\udc80-\udcff])[\udc80-\udcff](?![\udc80-\udcff])"
)
_APOSTROPHES = str.maketrans("", "", "'\u2018\u2019\u02bc")
# Marks typed for an apostrophe: a grave accent and an acute (a dead key on many keyboards:
# "don´t").  Version 5 deletes them before NFKC, which makes the acute a space and a
# combining accent.  Primes are left alone: between digits ("40°4′12″") and after letters
# ("A′B′C′") they separate.
_APOSTROPHE_MARKS = "`\u00b4"
# Query parameters that say only where a link was clicked (campaign tags, the click ids of
# ad and social networks): version 5 deletes them, so a page shared through different
# tracking links is one text.  The separator before one is kept; a value is the characters
# a URL leaves unescaped but its delimiters, so one ends at a quote, a bracket or a comma
# (HTML, JSON and CSV around the URL stay).
_TRACKING_PARAMETERS = re.compile(
    r"([?&;])(?:utm_[a-z0-9_]*|fbclid|gclid|gclsrc|dclid|gbraid|wbraid|msclkid|yclid|twclid|ttclid|igshid|igsh"
    r"|mc_cid|mc_eid|_hsenc|_hsmi|mkt_tok|oly_anon_id|oly_enc_id|vero_id|_ga|_gl|spm|mibextid|ref_src)"
    r"=[A-Za-z0-9._~%+\-]*",
    re.IGNORECASE,
)
# A URL, from its scheme or a leading "www." that no ASCII letter, digit, dot, "@" or hyphen
# comes before (a Korean word may: "있다https://..."), over the characters a URL may hold
# (RFC 3986: ASCII, so a URL in Chinese text ends where the text goes on), less the
# punctuation after it (version 7; see _canonical_url), and the parts it leaves out.
_URL = re.compile(
    r"(?<![A-Za-z0-9_.@-])(?:(?:https?|ftp)://|www\d{0,3}\.)[A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]*", re.IGNORECASE
)
#: Characters that end a sentence or a bracket after a URL rather than belong to it.
_AFTER_URL = ".,;:!?)]"
_WWW = re.compile("www", re.IGNORECASE).search
_URL_PREFIX = re.compile(r"^(?:(?:https?|ftp)://)?(?:(?:www\d{0,3}|m|mobile|amp)\.(?=[^/?#.]+\.))?", re.IGNORECASE)
# The Cyrillic, Greek and Armenian letters that common fonts draw as Latin ones (from UTS
# #39's confusables) in both cases, so that a word reads alike in capitals and in small
# letters ("Ν" is drawn like an "N" but "ν" like a "v": neither is here): version 5 reads
# them as those Latin letters inside a word that holds a Latin letter too ("pаypal" with a
# Cyrillic "а", as spam writes it), before casefolding.  A word of their own script, or a
# Greek "ρ" standing alone, stays as it is.
_LOOK_ALIKES = {
    **dict(zip("АаЕеОоРрСсУуХхЅѕІіЈјԚԛԜԝ", "AaEeOoPpCcYyXxSsIiJjQqWw")),  # Cyrillic
    **dict(zip("ΑαΙιΚκΟοΡρΧχ", "AaIiKkOoPpXx")),  # Greek
    **dict(zip("ՕօՍս", "OoUu")),  # Armenian
}
# Capitals drawn like Latin ones whose small letters are not ("В" is a "B", "в" no "b"),
# which version 7 reads as Latin too inside a word that holds a Latin letter: the map is
# applied before casefolding, so it goes by what a reader sees ("Вitcoin", "ΕNJOY").
_CAPITAL_LOOK_ALIKES = {
    **dict(zip("ВНКМТ", "BHKMT")),  # Cyrillic
    **dict(zip("ΒΕΖΗΜΝΤΥ", "BEZHMNTY")),  # Greek
}
# Letters that version 5 folds into others wherever they are, after casefolding: Latin
# small capitals, the stroked Latin letters and ligatures that ASCII-fied text writes
# without their stroke, and the Arabic letters that Lucene's Arabic and Persian normalisers
# also fold.
_FOLDED_LETTERS = {
    **dict(zip("ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘʀꜱᴛᴜᴠᴡʏᴢ", "abcdefghijklmnoprstuvwyz")),  # small capitals
    **dict(zip("ıłđø", "ildo")),
    "æ": "ae",
    "œ": "oe",
    **dict(zip("\u0649\u06cc\u0629\u06c1\u06a9", "\u064a\u064a\u0647\u0647\u0643")),  # ى ی ة ہ ک
}
# Version 7's: the Devanagari candrabindu written as an anusvara, as everyday typing and
# Lucene's Hindi normaliser write it.
_FOLDED_LETTERS_7 = {**_FOLDED_LETTERS, "\u0901": "\u0902"}
# Every byte but ASCII letters and digits made a space, letters lowercased.
_ASCII_FOLD = bytes(byte if chr(byte).isascii() and chr(byte).isalnum() else 0x20 for byte in range(256)).lower()
_ASCII_FOLD_8 = bytes(
    byte if chr(byte).isascii() and (chr(byte).isalnum() or chr(byte) in "-+$") else 0x20 for byte in range(256)
).lower()
# Version 8's: a "+" or "-" that starts a number ("-5", "(+3", not "10-12" or "covid-19") is
# part of its token, and a currency sign ("$", and beyond ASCII every symbol) is a token: a
# balance of -1,250 is not one of 1,250, nor "$5" a "5".
_SIGN = "(?:(?<![^\\W_])[-+](?=[0-9]))?"
_ASCII_BYTE_TOKENS_8 = re.compile(_SIGN.encode() + rb"[a-z0-9]+|\$").findall


def ascii_byte_tokens(prepared: bytes, normalization: int = NORMALIZATION) -> list[bytes]:
    """The tokens of an ASCII text that :func:`ascii_prepared` made ready, as bytes: the
    ASCII path of :func:`decoded_tokens` and of the fingerprinter (which keeps the bytes,
    as it hashes them), the same tokens as the general path gives.  One C pass that
    lowercases, folds every byte but letters and digits to a space and deletes apostrophes,
    and a split; from version 8 the signs and "$" stay, and the few words that hold one are
    split by the token regex.  O(len(prepared))."""
    if normalization < 8:
        return prepared.translate(_ASCII_FOLD, b"'").split()
    words = prepared.translate(_ASCII_FOLD_8, b"'").split()
    if b"-" not in prepared and b"+" not in prepared and b"$" not in prepared:
        return words
    return [token for word in words for token in ((word,) if word.isalnum() else _ASCII_BYTE_TOKENS_8(word))]


# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), as inclusive ranges:
# characters that are rendered as nothing when a font has no glyph for them.
_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # Arabic letter mark
    (0x115F, 0x1160),  # Hangul fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian variation selectors and vowel separator
    (0x200B, 0x200F),  # zero-width space, non-joiner, joiner; direction marks
    (0x202A, 0x202E),  # direction embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, direction isolates
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFEFF, 0xFEFF),  # byte-order mark (zero-width no-break space)
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical formatting
    (0xE0000, 0xE0FFF),  # tags and variation selectors 17 to 256
)


# Marks that version 3 drops (with the Arabic tatweel), as inclusive ranges: the generic
# combining diacritical blocks, which Latin, Greek and Cyrillic letters decompose into;
# Cyrillic titlo and its kin; Hebrew points and cantillation; Arabic vowel marks and Quranic
# annotation.  The marks of Brahmic scripts and the kana voicing marks are left out: there a
# mark is a vowel or a different consonant.
_FOLDED_MARK_RANGES = (
    (0x0300, 0x036F),  # combining diacritical marks
    (0x0483, 0x0489),  # Cyrillic titlo, palatalisation, number signs
    (0x0591, 0x05BD),  # Hebrew cantillation and points
    (0x05BF, 0x05BF),
    (0x05C1, 0x05C2),
    (0x05C4, 0x05C5),
    (0x05C7, 0x05C7),
    (0x0610, 0x061A),  # Arabic honorific and Quranic marks
    (0x0640, 0x0640),  # Arabic tatweel (a letter of no sound, only stretching the line)
    (0x064B, 0x065F),  # Arabic vowel marks (harakat), shadda, sukun
    (0x0670, 0x0670),  # Arabic superscript alef
    (0x06D6, 0x06DC),  # Quranic annotation
    (0x06DF, 0x06E4),
    (0x06E7, 0x06E8),
    (0x06EA, 0x06ED),
    (0x1AB0, 0x1AFF),  # combining diacritical marks extended
    (0x1DC0, 0x1DFF),  # combining diacritical marks supplement
    (0x20D0, 0x20FF),  # combining marks for symbols
    (0xFE20, 0xFE2F),  # combining half marks
)
# Version 7's: the nukta of the Indic scripts, a dot that marks a borrowed sound ("ज़" for
# "ज") and that everyday typing leaves out, as Lucene's Indic normaliser does.  The vowel
# signs stay.
_FOLDED_MARK_RANGES_7 = (
    *_FOLDED_MARK_RANGES,
    (0x093C, 0x093C),  # Devanagari
    (0x09BC, 0x09BC),  # Bengali
    (0x0A3C, 0x0A3C),  # Gurmukhi
    (0x0ABC, 0x0ABC),  # Gujarati
    (0x0B3C, 0x0B3C),  # Oriya
    (0x0C3C, 0x0C3C),  # Telugu
    (0x0CBC, 0x0CBC),  # Kannada
)
# A line end inside a hyphenated word: the hyphen (ASCII or U+2010) after a letter, spaces
# or tabs, one line break, spaces or tabs, then a letter, which the join checks is lowercase
# (a capital starts a name or a sentence: "Smith-" then "Jones" stays two words).
# One pattern per hyphen, each starting with its hyphen: a literal first character lets the
# regex engine skip to it, where a class or a look-behind first was tried at every position
# (1.5 ms against 0.04 ms on a 35,000-character text).
_LINE_END_HYPHENS = tuple(
    (hyphen, re.compile(f"{hyphen}(?<=[^\\W\\d_]{hyphen})[ \\t]*(?:\\r\\n|\\r|\\n)[ \\t]*(?=([^\\W\\d_]))"))
    for hyphen in ("-", "\u2010")
)
# Version 5's: the line break may also be a form feed (a PDF's page break, as pdftotext
# writes it), a vertical tab or a Unicode line separator, with form feeds and vertical tabs
# among the spaces after it (not before it: a character that could be either a space or
# the break would let a failed match try every split of a long run, in quadratic time).
_LINE_BREAKS_5 = "\r\n\f\v\x85\u2028\u2029"
#: What may stand between a line-end hyphen and the rest of its word: a chunk is never cut
#: in it (see :func:`iter_chunks`).
_SPACES_AND_BREAKS = " \t" + _LINE_BREAKS_5
_LINE_END_HYPHENS_5 = tuple(
    (
        hyphen,
        re.compile(f"{hyphen}(?<=[^\\W\\d_]{hyphen})[ \\t]*(?:\\r\\n|[{_LINE_BREAKS_5}])[ \\t\\f\\v]*(?=([^\\W\\d_]))"),
    )
    for hyphen in ("-", "\u2010")
)
# A soft hyphen at a line end marks a word broken there (it is only ever inside a word, so
# no letter before it is asked for: an accent may be).  Joined before version 2's deletion
# of invisible characters removes it.
_SOFT_HYPHEN_BREAK = re.compile("\u00ad[ \\t]*(?:\\r\\n|\\r|\\n)[ \\t]*(?=([^\\W\\d_]))")
# Version 8's: a hyphen between two letters, on one line or across a line end, joins them
# into one word ("state-owned" is "stateowned", and so is "state-" then "owned" on the next
# line; "e-mail" is "email").  Version 3 joined only across line ends and before a lowercase
# letter, so the same text wrapped at another width (an email quoted, a subtitle re-cut)
# read "state owned" on one line and "stateowned" across two: copies fell to J 0.68.
_HYPHENS_8 = tuple(
    (
        hyphen,
        re.compile(
            f"{hyphen}(?<=[^\\W\\d_]{hyphen})(?:[ \\t]*(?:\\r\\n|[{_LINE_BREAKS_5}])[ \\t\\f\\v]*)?(?=[^\\W\\d_])"
        ),
    )
    for hyphen in ("-", "\u2010")
)
#: Characters that are, or that NFKC makes, a hyphen that may break a word at a line end:
#: a chunk is never cut in the spaces after one.
_BREAKING_HYPHENS = "-\u2010\u2011\u00ad\ufe63\uff0d"
# Version 8's: also the minus sign, which it reads as "-", and an undecodable byte 0xAD,
# which it reads as cp1252's soft hyphen.
_BREAKING_HYPHENS_8 = _BREAKING_HYPHENS + "\u2212\udcad"


def _class_body(codes: list[int]) -> str:
    """A regex class body matching exactly the sorted code points ``codes``, as ranges."""
    parts: list[tuple[int, int]] = []
    for code in codes:
        if parts and parts[-1][1] == code - 1:
            parts[-1] = (parts[-1][0], code)
        else:
            parts.append((code, code))
    return "".join(f"\\U{a:08x}-\\U{b:08x}" if a != b else f"\\U{a:08x}" for a, b in parts)


# The superscript and subscript characters that version 8 sets apart: digits and signs.
_SCRIPTED = frozenset("0123456789+-\u2212")


@cache
def _scanned_classes() -> tuple[str, dict[int, str], str, list[int]]:
    """(the regex class body of every combining mark (categories Mn, Mc, Me) outside the
    unspaced scripts, the ASCII digit of every non-ASCII decimal digit, the class body of
    every symbol that version 8 takes as a token (categories So and Sc: emoji, currency
    signs), the superscript and subscript digits and signs and the vulgar fractions that
    version 8 sets apart).  Built once, on first use, by a scan of all code points (~0.4 s)."""
    marks: list[int] = []
    digits: dict[int, str] = {}
    symbols: list[int] = [ord("$")]
    set_apart: list[int] = []
    unspaced = re.compile(f"[{_UNSPACED_RANGES}]")
    for code in range(0x80, sys.maxunicode + 1):
        char = chr(code)
        category = unicodedata.category(char)
        if category[0] == "M" and not unspaced.match(char):
            marks.append(code)
        elif category == "Nd":
            digits[code] = str(unicodedata.decimal(char))
        elif category in ("So", "Sc") and code not in (0xFFFC, 0xFFFD):  # not what stands for a lost character
            symbols.append(code)
        decomposition = unicodedata.decomposition(char)
        scripted = decomposition.startswith(("<super>", "<sub>"))
        if decomposition.startswith("<fraction>") or (scripted and unicodedata.normalize("NFKC", char) in _SCRIPTED):
            set_apart.append(code)
    return _class_body(marks), digits, _class_body(symbols), set_apart


@cache
def _version_2_mapping(normalization: int) -> tuple[re.Pattern[str], dict[int, str | None]]:
    """(a search for any character that version 2 (from 5: also the apostrophe marks; from
    8: the minus sign, superscript digits and fractions) may delete or map before NFKC, the
    ``str.translate`` table that does it)."""
    table: dict[int, str | None] = {code: None for low, high in _IGNORABLE_RANGES for code in range(low, high + 1)}
    table.update(_scanned_classes()[1])
    if normalization >= 5:
        table.update(dict.fromkeys(map(ord, _APOSTROPHE_MARKS)))
    if normalization >= 8:
        # NFKC runs "10⁶" into "106" and "10½" into "101⁄2": set apart, they stay numbers of
        # their own.  The minus sign is the ASCII one that a signed number's token starts with.
        table.update({code: f" {chr(code)} " for code in _scanned_classes()[3]})
        table[0x2212] = "-"
    # Every character beyond the BMP is let through to the translate: a class of BMP
    # characters only is a bitmap lookup, where the exact one was a scan of its ranges,
    # ten times slower on a Chinese text.
    bmp = _class_body(sorted(code for code in table if code <= 0xFFFF))
    return re.compile(f"[{bmp}\\U00010000-\\U{sys.maxunicode:08x}]"), table


@cache
def _folding(normalization: int) -> tuple[re.Pattern[str], dict[int, str | None]]:
    """(a search for any character that version 3's folding (from 5: with the folded
    letters; from 7: with the nuktas and the candrabindu) changes, the ``str.translate``
    table that folds: each dropped mark to nothing, each precomposed letter holding one to
    the rest of its decomposition, each folded letter to its stand-in).  Built once per
    version, on first use, by decomposing every BMP code point (~30 ms): beyond it, no
    canonical decomposition holds a dropped mark."""
    ranges = _FOLDED_MARK_RANGES_7 if normalization >= 7 else _FOLDED_MARK_RANGES
    dropped = {code for low, high in ranges for code in range(low, high + 1)}
    table: dict[int, str | None] = dict.fromkeys(dropped)
    for code in range(0x80, 0x10000):
        decomposed = unicodedata.normalize("NFD", chr(code))
        if len(decomposed) > 1 and any(ord(char) in dropped for char in decomposed):
            table[code] = "".join(char for char in decomposed if ord(char) not in dropped)
    if normalization >= 5:
        # One pass folds both: a precomposed letter whose base is a folded letter loses its
        # mark and folds too.
        letters = str.maketrans(_FOLDED_LETTERS_7 if normalization >= 7 else _FOLDED_LETTERS)
        table = {code: None if rest is None else rest.translate(letters) for code, rest in table.items()}
        table.update((code, letter) for code, letter in letters.items() if code not in table)
    return re.compile(f"[{_class_body(sorted(table))}]"), table


def ascii_prepared(text: str, normalization: int = NORMALIZATION) -> str:
    """An ASCII ``text`` before it is lowercased, its apostrophes deleted and it is split
    (the first half of both ASCII fast paths, here and in the fingerprinter), in the order
    of the general path: tracking parameters and grave accents deleted (version 5), then
    line-end hyphens joined (version 3).  O(len(text))."""
    if normalization >= 5:
        text = untracked(text)
        if "`" in text:
            text = text.replace("`", "")
    text = join_line_end_hyphens(text, normalization)
    return canonical_urls(text) if normalization >= 7 else text


def _latin_look_alikes_folded(text: str, normalization: int) -> str:
    """``text`` with each look-alike letter (:data:`_LOOK_ALIKES`; from version 7 also
    :data:`_CAPITAL_LOOK_ALIKES`) read as its Latin letter inside every word that holds a
    Latin letter too (version 5).  A text without both is only searched; else one Python
    step per word."""
    look_alike, table = _look_alike_search(normalization >= 7)
    if look_alike(text) is None or _LATIN_LETTER(text) is None:
        return text
    parts = _WORDS.split(text)  # the words at odd positions
    for position in range(1, len(parts), 2):
        word = parts[position]
        if not word.isascii() and look_alike(word) is not None and _LATIN_LETTER(word) is not None:
            parts[position] = word.translate(table)
    return "".join(parts)


@cache
def _look_alike_search(capitals: bool) -> tuple[Callable[[str], re.Match[str] | None], dict[int, str]]:
    """(a search for any look-alike letter (with ``capitals``, version 7's too), the
    ``str.translate`` table that reads each as its Latin letter), accented ones included
    ("Ά" is "A" and the accent, which version 3 drops after casefolding, as it drops it
    from "ά").  Built once, on first use, from the Greek, Cyrillic and Armenian blocks
    (~1 ms)."""
    look_alikes = {**_LOOK_ALIKES, **_CAPITAL_LOOK_ALIKES} if capitals else _LOOK_ALIKES
    table = str.maketrans(look_alikes)
    for code in range(0x0370, 0x0590):
        decomposed = unicodedata.normalize("NFD", chr(code))
        base, marks = decomposed[0], decomposed[1:]
        if marks and base in look_alikes and all(unicodedata.combining(mark) for mark in marks):
            table[code] = look_alikes[base] + marks
    return re.compile(f"[{_class_body(sorted(table))}]").search, table


# A Latin letter, accented ones included (after NFKC, which composes them).
_LATIN_LETTER = re.compile("[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]").search
_WORDS = re.compile(r"([^\W_]+)")


def _cp1252_read(run: re.Match[str]) -> str:
    """A run of surrogates for undecodable bytes, read as cp1252 (version 8)."""
    return run.group().encode("utf-8", "surrogateescape").decode("cp1252", "replace")


def as_replacement_decoded(text: str) -> str:
    """``text``, decoded from UTF-8 with ``surrogateescape`` (as the CLI decodes files), as
    the replacement decoding of the same bytes: what versions 1-6 read, one U+FFFD for each
    bad sequence, so that they fingerprint such a text exactly as they always did (the
    number of characters decides where a long text without spaces is cut into chunks).  Any
    other lone surrogate is one U+FFFD, as those versions read it.  O(len(text)); ASCII
    text and text without such surrogates are returned as they are."""
    if text.isascii() or _ANY_BYTE_ESCAPE(text) is None:
        return text
    escaped = _NOT_BYTE_ESCAPES.sub("\ufffd", text).encode("utf-8", "surrogateescape")
    return escaped.decode("utf-8", "replace")


def untracked(text: str) -> str:
    """``text`` without the tracking parameters of its URLs (version 5).  O(len(text)); a
    text without "=" is not searched."""
    return _TRACKING_PARAMETERS.sub(r"\1", text) if "=" in text else text


def canonical_urls(text: str) -> str:
    """``text`` with each URL in its canonical form (version 7; :func:`_canonical_url`),
    read once the text is normalised otherwise: a URL broken at a line end is joined and
    one disguised with look-alike letters is plain by then.  O(len(text)); a text without
    "://" or "www" is not searched."""
    if "://" in text or _WWW(text) is not None:
        return _URL.sub(_canonical_url, text)
    return text


def _canonical_url(url: re.Match[str]) -> str:
    """A URL as version 7 reads it: without its scheme, a leading "www.", "m.", "mobile." or
    "amp." of a host that has another dot, a last path segment "amp" before its query (an
    AMP page's address) and its fragment, unless that is a route of a one-page app
    ("#/inbox", "#!/p/2": another page), so that the links a post is shared with
    ("http://", "https://www.", "https://m.", ".../amp", "#comments") are one link: each of
    those parts was a token, and a short post with one link fell to J 0.75-0.79 against its
    copy."""
    whole = url.group()
    found = whole.rstrip(_AFTER_URL)
    address, _, fragment = _URL_PREFIX.sub("", found, count=1).partition("#")
    path, question, query = address.partition("?")
    last = path.lower().rstrip("/")
    if last.endswith("/amp"):
        path = path[: len(last) - len("/amp")]
    route = "#" + fragment if fragment.startswith(("/", "!")) else ""
    return path + question + query + route + whole[len(found) :]


def join_line_end_hyphens(text: str, normalization: int = NORMALIZATION) -> str:
    """``text`` with each word that a hyphen breaks across a line end joined again (version
    3; see the module docstring; from version 8 every hyphen between two letters, on one
    line or across a line end), else ``text`` itself.  O(len(text)); a text without both a
    hyphen and a line break is only searched for them."""
    if normalization < 3:
        return text
    if normalization >= 8:
        for hyphen, hyphen_between_letters in _HYPHENS_8:
            if hyphen in text:
                text = hyphen_between_letters.sub("", text)
        return text
    if normalization >= 5:
        if not any(line_break in text for line_break in _LINE_BREAKS_5):
            return text
        patterns = _LINE_END_HYPHENS_5
    elif "\n" in text or "\r" in text:
        patterns = _LINE_END_HYPHENS
    else:
        return text
    for hyphen, line_end_hyphen in patterns:
        if hyphen in text:
            text = line_end_hyphen.sub(_joined_if_lowercase, text)
    return text


def _joined_if_lowercase(match: re.Match[str]) -> str:
    """A line-end hyphen break deleted where the next line starts lowercase, else kept."""
    return "" if match.group(1).islower() else match.group(0)


@cache
def _token_finder(
    split_unspaced: bool, normalization: int = NORMALIZATION, undecodable: bool = False
) -> re.Pattern[str]:
    """The token regex of the general (non-ASCII) path: runs of word characters that are
    not underscores, with combining marks (from version 2, a run starts with a word
    character); with ``split_unspaced``, each unspaced character a token of its own.  With
    ``undecodable`` (version 7, a text holding undecodable bytes), the surrogates that stand
    for them are word characters too: a text read in the wrong encoding keeps its words as
    bytes, so copies of it are duplicates and other texts are not.  From version 8 a
    symbol (see :func:`_scanned_classes`) is a token, and a number keeps its sign."""
    marks, _, symbols, _ = _scanned_classes()
    unspaced = _unspaced_ranges(normalization)
    word = f"[^\\W_{unspaced}]" if split_unspaced else "[^\\W_]"
    if undecodable:  # an alternation, slower than the class, so only where it is needed
        word = f"(?:{word}|[{_BYTE_ESCAPES}])"
    run = f"{word}(?:{word}|[{marks}])*" if normalization >= 2 else f"(?:{word}|[{marks}])+"
    if normalization >= 8:
        run = f"{_SIGN}{run}|[{symbols}]"
    return re.compile(f"[{unspaced}]|{run}" if split_unspaced else run)


#: An HTML character reference: a decimal or hex number, or a name, ending in a semicolon
#: (the names HTML also takes without one, "&amp" or "&copy", are left: in "?a=1&copy=2"
#: they are no reference).
_CHARACTER_REFERENCE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


def references_decoded(text: str, normalization: int = NORMALIZATION) -> str:
    """``text`` with its HTML character references decoded (version 6; earlier versions
    return it as it is).  A text without "&" is only searched once; a name HTML does not
    know stays as written, whole ("&notes;" is no "&not;" and "es;").  Every entry point
    of the pipeline calls it exactly once, first: decoding twice would read "&amp;lt;" as
    "<".  O(len(text))."""
    if normalization < 6 or "&" not in text:
        return text
    return _CHARACTER_REFERENCE.sub(_decoded_reference, text)


def _decoded_reference(match: re.Match[str]) -> str:
    reference = match.group()
    if reference[1] == "#":
        return html.unescape(reference)  # a number; one that names no character becomes U+FFFD
    return html.entities.html5.get(reference[1:], reference)  # "name;", exactly


def references_escaped(text: str) -> str:
    """``text`` with every "&" that starts something shaped like a character reference
    written as "&amp;", so that :func:`references_decoded` gives ``text`` back: for text
    whose references were decoded already (an HTML page's visible text), which must not be
    decoded a second time.  O(len(text))."""
    if "&" not in text:
        return text
    return _CHARACTER_REFERENCE.sub(lambda reference: "&amp;" + reference.group()[1:], text)


def normalize(text: str, normalization: int = NORMALIZATION) -> str:
    """Return ``text`` with (from version 6) its HTML character references decoded, lone
    surrogates replaced by U+FFFD, (from version 2) invisible characters deleted and digits
    made ASCII, NFKC-normalised, casefolded, (from version 3) with diacritics dropped and
    line-end hyphens joined, and with apostrophes deleted (steps 1 to 3 of the module
    docstring).  O(len(text)); ASCII text is only lowercased, its line-end hyphens joined
    and (version 5) its tracking parameters and grave accents deleted
    (:func:`ascii_prepared`)."""
    return _normalized(references_decoded(text, normalization), normalization)


def _normalized(text: str, normalization: int) -> str:
    """:func:`normalize` of a text whose character references are decoded already."""
    if text.isascii():
        text = ascii_prepared(text, normalization).lower()
        return text.replace("'", "") if "'" in text else text
    if normalization >= 8 and _ANY_BYTE_ESCAPE(text) is not None:
        text = _CP1252_BYTE_RUN.sub(_cp1252_read, text)
    surrogates = _OTHER_SURROGATES if normalization >= 7 else _SURROGATES
    if surrogates.search(text):
        text = surrogates.sub("\ufffd", text)
    if normalization >= 5:
        text = untracked(text)
    if normalization >= 3 and "\u00ad" in text:
        text = _SOFT_HYPHEN_BREAK.sub("" if normalization >= 8 else _joined_if_lowercase, text)
    if normalization >= 2:
        # Before NFKC: a deleted joiner between a letter and its accent would otherwise
        # keep the two from composing.
        mapped, table = _version_2_mapping(8 if normalization >= 8 else 5 if normalization >= 5 else 2)
        if mapped.search(text):
            text = text.translate(table)
    text = unicodedata.normalize("NFKC", text)
    # Line-end hyphens after NFKC, which composes an accent before one ("e" and U+0301 are
    # "é", a letter) and makes fullwidth hyphens plain; before casefolding, which would hide
    # whether the next line starts with a capital.  Version 8's hyphens after the look-alike
    # letters: joined first, a compound of two scripts ("beho-МОЁ") was one word whose
    # capitals read as Latin and whose small letters did not.
    if normalization < 8:
        text = join_line_end_hyphens(text, normalization)
    if normalization >= 5:
        text = _latin_look_alikes_folded(text, normalization)
    if normalization >= 8:
        text = join_line_end_hyphens(text, normalization)
    text = text.casefold()
    if normalization >= 3:
        # After casefolding, which can leave a mark of its own ("İ" is "i" and a dot above).
        folded, table = _folding(7 if normalization >= 7 else 5 if normalization >= 5 else 3)
        if folded.search(text):
            text = text.translate(table)
    elif normalization >= 2 and "\u0307" in text:
        # The casefolded Turkish capital dotted I; composed again, as an accent after it
        # ("İ́") is then on a plain i, as in "í".
        text = unicodedata.normalize("NFC", text.replace("i\u0307", "i"))
    if normalization >= 7:
        text = canonical_urls(text)
    return text.translate(_APOSTROPHES)


def tokenize(text: str, split_unspaced: bool = True, normalization: int = NORMALIZATION) -> list[str]:
    """Return the tokens of ``text`` (the whole module pipeline, of version
    ``normalization``), in order.

    The empty text has no tokens, nor (before version 6) a text of punctuation or symbols
    only; from version 6 such a text's tokens are those characters (see
    :func:`iter_token_chunks`).  O(len(text)) time
    and memory; use :func:`iter_token_chunks` for texts too big to tokenise at once.
    """
    words = functools.partial(decoded_tokens, split_unspaced=split_unspaced, normalization=normalization)
    return cast("list[str]", list(text_tokens(text, words, normalization)))  # decoded_tokens' words are str


def text_tokens(
    text: str, word_tokens: Callable[[str], Sequence[str | bytes]], normalization: int = NORMALIZATION
) -> Sequence[str | bytes]:
    """The tokens of ``text`` taken whole, as one chunk: its words by ``word_tokens`` (of the
    decoded text), or, for a text without any, its symbols where :func:`_takes_symbols` says
    so.  :func:`iter_token_chunks` is the same for a text read chunk by chunk.  O(len(text))."""
    decoded = references_decoded(text, normalization)
    words = word_tokens(decoded)
    if _has_word(words) or not _takes_symbols(text, normalization):
        return words
    return symbol_tokens(decoded, normalization)


def _has_word(tokens: Sequence[str | bytes]) -> bool:
    """Whether ``tokens`` hold a word, not only symbols (version 8 takes symbols for tokens
    in any text; a text that has nothing else is read by all its symbols and punctuation,
    as a wordless text is from version 6, or "🔥!" and "🔥?" would be one text).  The first
    token decides for almost every text."""
    return any(len(token) != 1 or not _is_symbol(token) for token in tokens)


def _is_symbol(token: str | bytes) -> bool:
    """Whether a one-character token is a symbol (version 8's: So or Sc)."""
    return token == b"$" if isinstance(token, bytes) else unicodedata.category(token) in ("So", "Sc")


def _takes_symbols(text: str, normalization: int) -> bool:
    """Whether ``text``, which has no word, has its symbols for tokens: from version 6, unless
    it holds U+FFFD or a lone surrogate.  Such a text was most likely read in the wrong
    encoding, its letters lost, and its punctuation alone would make every such text each
    other's duplicate.  O(len(text)), only for texts without words."""
    return normalization >= 6 and "\ufffd" not in text and _SURROGATES.search(text) is None


def decoded_tokens(text: str, split_unspaced: bool = True, normalization: int = NORMALIZATION) -> list[str]:
    """The word tokens of ``text`` whose character references are decoded already (see
    :func:`references_decoded`), without the symbol tokens of a wordless text: the
    general path of :func:`tokenize`, for callers that decode a chunk themselves."""
    if text.isascii():
        prepared = ascii_prepared(text, normalization).encode("ascii")
        return [token.decode("ascii") for token in ascii_byte_tokens(prepared, normalization)]
    normalized = _normalized(text, normalization)
    undecodable = normalization >= 7 and _BYTE_ESCAPE_SEARCH(normalized) is not None
    return _token_finder(split_unspaced, normalization, undecodable).findall(normalized)


def symbol_tokens(text: str, normalization: int = NORMALIZATION) -> list[str]:
    """The tokens of a text without word tokens (version 6): each punctuation mark and
    symbol of it after normalisation (emoji too), so "👍" and "👎" differ.  Not U+FFFD,
    which stands for what could not be decoded (a text in another encoding than it was read
    with would otherwise be each other text's duplicate), nor control or private-use
    characters.  ``text``'s character references are decoded already.  O(len(text))."""
    return [
        character
        for character in _normalized(text, normalization)
        if character != "\ufffd" and unicodedata.category(character)[0] in "PS"
    ]


def has_unspaced(text: str) -> bool:
    """Whether ``text`` contains a character of a script written without spaces.  O(n)."""
    return _UNSPACED_SEARCH(text) is not None


def iter_chunks(text: str, chunk_chars: int = CHUNK_CHARS, normalization: int = NORMALIZATION) -> Iterator[str]:
    """Yield consecutive pieces of ``text`` of about ``chunk_chars`` characters, each cut
    just after a whitespace character so no token is split (unless a run of non-space
    characters is longer than a chunk).  A text shorter than a chunk is yielded whole.
    O(len(text)) time; each piece is a copy of at most ``chunk_chars`` characters."""
    length = len(text)
    if length <= chunk_chars:
        yield text
        return
    breaking_hyphens = _BREAKING_HYPHENS_8 if normalization >= 8 else _BREAKING_HYPHENS
    start = 0
    while start < length:
        end = start + chunk_chars
        if end >= length:
            yield text[start:]
            return
        # Cut after the last whitespace of the window.  Whitespace is a starter in every
        # normalisation form and never part of a token, so cutting there changes nothing.
        cut = _last_space(text, start, end)
        if normalization >= 3:
            cut = _before_broken_words(text, start, cut, breaking_hyphens)
        if cut <= start:
            cut = end - 1
            # No whitespace at all: do not separate a base character from its marks, nor
            # (version 2, which deletes them) from the invisible characters between them.
            # Looked up here, in this rare case, so ASCII work never builds the tables.
            ignorable = _version_2_mapping(2)[1] if normalization >= 2 else {}
            while cut > start and (
                unicodedata.category(text[cut + 1])[0] == "M"
                or (ord(text[cut + 1]) in ignorable and ignorable[ord(text[cut + 1])] is None)
            ):
                cut -= 1
        yield text[start : cut + 1]
        start = cut + 1


def _before_broken_words(text: str, start: int, cut: int, breaking_hyphens: str) -> int:
    """Where to cut ``text[start:]`` at or before ``cut`` (a space, tab or line feed) so as
    not to fall inside the spaces after a hyphen, across which version 3 may join the
    words: before the hyphenated word instead, and again while that is after a hyphen too
    (a word broken over three lines).  Where the words so joined fill the window back to
    ``start``, they make one word longer than a chunk, which is split as any such word is:
    at ``cut``.  O(cut - start): each step looks back over one word only (found by a
    probe: a step that searched the whole window, and chunks cut down to one word each,
    took hours on 300 KB of "-" cells or "word-" lines)."""
    first = cut
    while cut > start:
        before = cut
        while before > start and text[before - 1] in _SPACES_AND_BREAKS:
            before -= 1
        if before == start or text[before - 1] not in breaking_hyphens:
            return cut
        earlier = before - 2  # the last space, tab or line feed before the hyphen, if any
        while earlier >= start and text[earlier] not in " \t\n":
            earlier -= 1
        if earlier <= start:
            return first
        cut = earlier
    return cut


def _last_space(text: str, start: int, end: int) -> int:
    """The position of the last space, tab or line feed in ``text[start:end]``, else -1."""
    return max(text.rfind(" ", start, end), text.rfind("\n", start, end), text.rfind("\t", start, end))


def iter_token_chunks(
    text: str,
    split_unspaced: bool = True,
    chunk_chars: int = CHUNK_CHARS,
    normalization: int = NORMALIZATION,
    word_tokens: Callable[[str], Sequence[str | bytes]] | None = None,
) -> Iterator[Sequence[str | bytes]]:
    """Yield the tokens of ``text`` chunk by chunk (see :func:`iter_chunks`); concatenated,
    they are :func:`tokenize`'s result.  Each chunk's character references are decoded
    (version 6) and its words found by ``word_tokens`` (default :func:`decoded_tokens`; the
    fingerprinter passes its ASCII fast path, which gives the same words as bytes).  A text
    with no word in any chunk (version 6: stop words count as words) is read a second time
    for its symbols (:func:`symbol_tokens`) where :func:`_takes_symbols` says so, as
    :func:`text_tokens` reads a text whole.
    A run of non-space characters longer than a chunk is split (see :func:`iter_chunks`),
    and so is a character reference inside it.  Memory is bounded by the chunk size, but
    for a text whose first chunks hold symbols and no word (version 8): their tokens wait
    for a word, or for the text's end."""
    if word_tokens is None:
        word_tokens = functools.partial(decoded_tokens, split_unspaced=split_unspaced, normalization=normalization)
    any_words = False
    before_words: list[Sequence[str | bytes]] = []  # symbols only (version 8), held until a word comes
    for piece in iter_chunks(text, chunk_chars, normalization):
        tokens = word_tokens(references_decoded(piece, normalization))
        if not any_words and _has_word(tokens):
            any_words = True
            yield from before_words
            before_words = []
        if any_words:
            yield tokens
        elif tokens:
            before_words.append(tokens)
    if any_words or not _takes_symbols(text, normalization):
        yield from before_words
        return
    for piece in iter_chunks(text, chunk_chars, normalization):
        yield symbol_tokens(references_decoded(piece, normalization), normalization)


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
