"""Copies that a reader calls the same text: found at a threshold by each text pipeline version.

    python bench/bench_normalization.py [--docs 300] [--words 250] [--seed 0] [--threshold 0.9] [--versions 6,7,8]

Generates documents of Zipfian words, a fifth of them accented (French/Spanish/German-like,
plus Greek and Russian words), then for each document one copy of each kind a crawl meets:

- ``pdf``: the text wrapped at 64 columns as a PDF's text layer gives it, long words broken
  by a hyphen at the line end;
- ``unaccented``: the text with its accents stripped, as an ASCII-only pipeline leaves it;
- ``capitals``: the first 40 words (a title and lead) in capitals, the rest as it was, Greek
  words without their accents, as Greek capitals are written;
- ``pages``: the PDF copy with a page break (a form feed, as pdftotext writes one) after
  every 8th line;
- ``look-alikes``: a tenth of the words with their letters that have a Cyrillic or Greek
  look-alike written with it, as spam that evades filters does;
- ``apostrophes``: every apostrophe typed as an acute or a grave accent;
- ``tracking``: the document's link shared with tracking parameters;
- ``arabic``: the Arabic words as informal writing and a Persian keyboard spell them (ة as
  ه and ى as ي at a word's end, ي as ی and ك as ک);
- ``escaped``: the text as a scraper that did not decode HTML leaves it: apostrophes as
  ``&#39;`` or ``&rsquo;``, every other accented letter of Latin script as its named
  reference (``&eacute;``), and one space in ten as ``&nbsp;``;
- ``korean``: half the spaces after a Korean word left out, as Korean writers often space
  otherwise ("할 수 있다", "할수 있다");
- ``nukta``: the Hindi words typed without their nukta ("ज़रूर" as "जरूर") and with an
  anusvara for a candrabindu ("माँ" as "मां");
- ``capital-look-alikes``: a tenth of the words capitalised, their capital written with the
  Cyrillic or Greek capital drawn like it ("Вitcoin"), as spam does;
- ``link-forms``: the document's link as another share of it writes it: ``http://`` with
  ``www.``, ``m.``, an AMP page's ``/amp`` or a ``#comments`` fragment;
- ``rewrapped``: the text wrapped at 40 columns, a line broken after the hyphen of a
  compound ("state-" then "owned") where it falls at the margin, as an email client that
  quotes it or a subtitle editor does.

Every document ends with a link to itself, and its words include contractions ("don't",
"l'homme"), Arabic, Korean and Hindi words, and one pair of words in twenty is a hyphenated
compound.

A second table: ``--wordless N`` posts without words (emoji, symbols and punctuation, 1 to 8
of them, all different), each with a copy spaced otherwise, as reposts and replies are; a
copy found is one paired with its source, and any other pair is false.

A third table: ``--misread N`` Russian news items of 40 words (generated Cyrillic words, each
with the same dateline "12.05.2024"), saved in cp1251 and given as bytes, which are not
UTF-8 (as a crawler that assumes UTF-8 reads them), each with a copy that has one more word.

A fourth: ``--western N`` French, German and Spanish items of 40 words (a quarter of them
accented), each in UTF-8 and its copy saved in cp1252, given as bytes, as a directory that
mixes the two holds them.

A fifth: ``--opposites N`` short posts (12 words) in two forms that mean different things
and differ only in an emoji, a number's sign, a currency sign or a superscript, each form
with a copy spaced otherwise: a copy found is one paired with its own form, and a pair of
the two forms is false.

Truth is by construction (a copy and its source are the same text); a pair between two
different documents is a false pair.  For each ``normalization`` version the benchmark adds
every text to a fresh database and counts, among ``pairs(threshold=t)``, the copies found per
kind and the false pairs.  Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import html.entities
import random
import tempfile
import textwrap
import time
import unicodedata

import simdb

_ACCENTED = [
    "café", "élève", "déjà", "naïve", "façade", "über", "straße", "mañana", "niño", "corazón",
    "après", "garçon", "fiancée", "crème", "rôle", "señor", "müde", "häuser", "été", "noël",
    "καφές", "θάλασσα", "ελευθερία", "πόλη", "ήλιος", "ёлка", "всё", "ещё", "идём", "моё",
]  # fmt: skip
_CONTRACTIONS = ["don't", "it's", "we're", "they've", "isn't", "l'homme", "aujourd'hui", "c'est", "o'clock"]
_ARABIC = ["المدرسة", "الكبيرة", "على", "الى", "مدينة", "كتاب", "كبير", "في", "الطريق", "جميلة", "مستشفى", "يكون"]
_KOREAN = ["정부는", "다음", "달부터", "새로운", "정책을", "시행할", "수", "있다고", "밝혔다", "하지만", "목소리도"]
_HINDI = ["ज़रूर", "फ़ायदा", "ख़बर", "माँ", "हँसी", "सरकार", "नया", "क़ानून", "बाज़ार", "ग़रीब", "आँख", "शहर"]
# Latin capitals and the Cyrillic or Greek capitals drawn like them whose small letters are not.
_CAPITAL_LOOK_ALIKES = {"B": "ВΒ", "E": "Ε", "H": "НΗ", "K": "К", "M": "МΜ", "N": "Ν", "T": "ТΤ", "Z": "Ζ"}
_CYRILLIC = "абвгдежзийклмнопрстуфхцчшщыэюя"
# Latin letters and the Cyrillic or Greek letters drawn like them.
_LOOK_ALIKES = {"a": "аα", "c": "с", "e": "е", "i": "і", "o": "оο", "p": "рρ", "s": "ѕ", "x": "х", "y": "у"}
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "de", "fa", "gu", "ho", "ji", "be", "zo", "wy"]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words = {"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 5))) for _ in range(size)}
    return (
        sorted(words)
        + _ACCENTED * max(1, size // (5 * len(_ACCENTED)))
        + _CONTRACTIONS * max(1, size // (10 * len(_CONTRACTIONS)))
        + _ARABIC * max(1, size // (10 * len(_ARABIC)))
        + _KOREAN * max(1, size // (5 * len(_KOREAN)))
        + _HINDI * max(1, size // (10 * len(_HINDI)))
    )


def _strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", "".join(char for char in decomposed if not unicodedata.combining(char)))


def _pdf_layer(text: str, width: int = 64) -> str:
    """``text`` wrapped at ``width`` columns, a word that would cross the margin broken by a
    hyphen where at least three letters stay on each side (a compound broken at its own
    hyphen keeps that one, as typesetting does)."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            room = width - len(line) - 2
            if len(word) >= 6 and room >= 3:
                cut = min(room, len(word) - 3)
                head, tail = word[:cut], word[cut:]
                if tail.startswith("-"):
                    head, tail = head + "-", tail[1:]
                elif not head.endswith("-"):
                    head += "-"
                lines.append(f"{line} {head}")
                line = tail
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


def _pages(text: str, lines_per_page: int = 8) -> str:
    lines = _pdf_layer(text).split("\n")
    return "".join(
        line + ("\n\f" if number % lines_per_page == lines_per_page - 1 else "\n") for number, line in enumerate(lines)
    )


def _look_alikes(text: str) -> str:
    rng = random.Random(text)
    words = text.split(" ")
    for index in rng.sample(range(len(words)), len(words) // 10):
        words[index] = "".join(
            rng.choice(_LOOK_ALIKES[char]) if char in _LOOK_ALIKES else char for char in words[index]
        )
    return " ".join(words)


def _apostrophes(text: str) -> str:
    rng = random.Random(text)
    return "".join(rng.choice("\u00b4`") if char == "'" else char for char in text)


def _tracking(text: str) -> str:
    return text + "?utm_source=twitter&utm_medium=social&utm_campaign=spring&fbclid=IwAR0abc123def456"


def _arabic(text: str) -> str:
    words = []
    for word in text.split(" "):
        if any("\u0600" <= char <= "\u06ff" for char in word):
            word = word[:-1] + {"ة": "ه", "ى": "ي"}.get(word[-1], word[-1])
            word = word.replace("ي", "ی").replace("ك", "ک")
        words.append(word)
    return " ".join(words)


def _korean_spacing(text: str) -> str:
    rng = random.Random(text)
    words = text.split(" ")
    # Half the spaces after a Korean word left out, as Korean writers often do.
    return "".join(
        word + ("" if "\uac00" <= word[-1:] <= "\ud7af" and rng.random() < 0.5 else " ") for word in words
    ).rstrip(" ")


def _escaped(text: str) -> str:
    rng = random.Random(text)
    out = []
    for char in text:
        name = html.entities.codepoint2name.get(ord(char))
        if char == "'":
            out.append(rng.choice(["&#39;", "&rsquo;"]))
        elif char == " " and rng.random() < 0.1:
            out.append("&nbsp;")
        elif name is not None and char.isalpha() and rng.random() < 0.5:
            out.append(f"&{name};")
        else:
            out.append(char)
    return "".join(out)


def _nukta(text: str) -> str:
    return text.replace("\u093c", "").replace("\u0901", "\u0902")


def _link_forms(text: str) -> str:
    rng = random.Random(text)
    before, _, link = text.rpartition(" https://")
    host, _, path = link.partition("/")
    form = rng.choice(["http://www.{}/{}", "https://m.{}/{}", "https://{}/{}/amp", "http://{}/{}#comments"])
    return f"{before} {form.format(host, path)}"


def _capital_look_alikes(text: str) -> str:
    rng = random.Random(text)
    words = text.split(" ")
    for index in rng.sample(range(len(words)), len(words) // 10):
        word = words[index][:1].upper() + words[index][1:]
        if word[:1] in _CAPITAL_LOOK_ALIKES and len(word) > 1:
            word = rng.choice(_CAPITAL_LOOK_ALIKES[word[0]]) + word[1:]
        words[index] = word
    return " ".join(words)


def _rewrapped(text: str) -> str:
    return "\n".join(textwrap.wrap(text, width=40, break_on_hyphens=True, break_long_words=False))


COPIES = {
    "pdf": _pdf_layer,
    "unaccented": _strip_accents,
    "capitals": _capitals,
    "pages": _pages,
    "look-alikes": _look_alikes,
    "apostrophes": _apostrophes,
    "tracking": _tracking,
    "arabic": _arabic,
    "escaped": _escaped,
    "korean": _korean_spacing,
    "nukta": _nukta,
    "capital-look-alikes": _capital_look_alikes,
    "link-forms": _link_forms,
    "rewrapped": _rewrapped,
}


def corpus(docs: int, words: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng, 4000)
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    rng.shuffle(weights)
    texts = []
    for number in range(docs):
        chosen = rng.choices(vocabulary, weights, k=words)
        for position in reversed(range(0, words - 1, 20)):  # a hyphenated compound in every 20 words
            chosen[position : position + 2] = [f"{chosen[position]}-{chosen[position + 1]}"]
        source = " ".join(chosen) + f" https://news.example.com/2026/story-{number}"
        texts.append((f"doc{number}", source))
        texts.extend((f"doc{number}:{kind}", copy(source)) for kind, copy in COPIES.items())
    return texts


_SYMBOLS = [*"🔥😂👍👎❤🙏🎉😭😍🤔👀💯✨🙌😅🥲!?.-+*#~=<>/", "...", ":)", ":(", ";)"]


def wordless_posts(posts: int, seed: int) -> list[tuple[str, str]]:
    """``posts`` different wordless posts and a copy of each with other spacing."""
    rng = random.Random(seed)
    seen: set[str] = set()
    texts = []
    while len(seen) < posts:
        symbols = rng.choices(_SYMBOLS, k=rng.randint(1, 8))
        source = "".join(symbols)
        if source in seen:
            continue
        seen.add(source)
        texts.append((f"post{len(seen)}", source))
        texts.append((f"post{len(seen)}:copy", " ".join(symbols) + " "))
    return texts


def misread_items(items: int, seed: int) -> list[tuple[str, bytes]]:
    """``items`` different Russian news items in cp1251 bytes and a copy of each with one
    more word."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choices(_CYRILLIC, k=rng.randint(2, 9))) for _ in range(3000)]
    texts = []
    for number in range(items):
        item = "12.05.2024 " + " ".join(rng.choices(vocabulary, k=40))
        texts.append((f"item{number}", item.encode("cp1251")))
        texts.append((f"item{number}:copy", f"{item} {rng.choice(vocabulary)}".encode("cp1251")))
    return texts


_WESTERN = [
    "président", "réunion", "ministère", "après", "marché", "déjà", "été", "français", "économie", "société",
    "Größe", "Straße", "für", "über", "Bürger", "Regierung", "Präsident", "Ärzte", "schön", "während",
    "año", "niños", "señor", "política", "económica", "según", "más", "también", "Nuñez", "corazón",
]  # fmt: skip


def western_items(items: int, seed: int) -> list[tuple[str, str | bytes]]:
    """``items`` different French/German/Spanish items in UTF-8 and a copy of each saved in
    cp1252 (bytes)."""
    rng = random.Random(seed)
    plain = ["".join(rng.choices(_SYLLABLES, k=rng.randint(1, 4))) for _ in range(3000)]
    texts: list[tuple[str, str | bytes]] = []
    for number in range(items):
        words = [rng.choice(_WESTERN) if rng.random() < 0.25 else rng.choice(plain) for _ in range(40)]
        item = " ".join(words) + "."
        texts.append((f"item{number}", item))
        texts.append((f"item{number}:copy", item.encode("cp1252")))
    return texts


# Pairs of forms of one post that say different things.
_OPPOSITES = [("👍", "👎"), ("🎉", "🙄"), ("-5", "5"), ("+1", "-1"), ("$20", "20"), ("€20", "£20"), ("10⁶", "106")]


def opposite_posts(posts: int, seed: int) -> list[tuple[str, str]]:
    """``posts`` short posts in two forms each (see the module docstring), each form with a
    copy spaced otherwise."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choices(_SYLLABLES, k=rng.randint(1, 4))) for _ in range(3000)]
    texts = []
    for number in range(posts):
        words = rng.choices(vocabulary, k=12)
        position = rng.randrange(13)
        for form, inserted in enumerate(rng.choice(_OPPOSITES)):
            text = " ".join([*words[:position], inserted, *words[position:]])
            texts.append((f"post{number}-{form}", text))
            texts.append((f"post{number}-{form}:copy", "  ".join(text.split(" ")) + " "))
    return texts


def measure_copies(
    texts: list[tuple[str, str]] | list[tuple[str, bytes]] | list[tuple[str, str | bytes]],
    normalization: int,
    threshold: float,
) -> tuple[float, int, int]:
    """Share of copies (keys ``NAME:copy``) paired with their source, false pairs and
    featureless documents."""
    with tempfile.TemporaryDirectory() as directory:
        fingerprinter = simdb.Fingerprinter(normalization=normalization)
        with simdb.open(f"{directory}/db", fingerprinter=fingerprinter) as db:
            featureless = db.add_texts(texts).featureless
            found = false_pairs = 0
            for pair in db.pairs(threshold=threshold):
                same = pair.key_a.partition(":")[0] == pair.key_b.partition(":")[0]
                found += same
                false_pairs += not same
    return found / (len(texts) // 2), false_pairs, featureless


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
                source_a, _, kind_a = pair.key_a.partition(":")
                source_b, _, kind_b = pair.key_b.partition(":")
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
    parser.add_argument("--versions", default="6,7,8", help="pipeline versions to compare, comma-separated")
    parser.add_argument("--wordless", type=int, default=1000, help="wordless posts of the second table (0: none)")
    parser.add_argument("--misread", type=int, default=300, help="cp1251 news items of the third table (0: none)")
    parser.add_argument("--western", type=int, default=300, help="UTF-8/cp1252 items of the fourth table (0: none)")
    parser.add_argument("--opposites", type=int, default=300, help="two-form posts of the fifth table (0: none)")
    arguments = parser.parse_args()
    texts = corpus(arguments.docs, arguments.words, arguments.seed)
    print(
        f"# {arguments.docs} documents of {arguments.words} words, {len(COPIES)} copies each, "
        f"seed {arguments.seed}, threshold {arguments.threshold}: share of copies paired with their source"
    )
    print(f"| normalization | {' | '.join(COPIES)} | false pairs | add_texts s |")
    print("|---|" + "---|" * (len(COPIES) + 2))
    for version in map(int, arguments.versions.split(",")):
        row = measure(texts, version, arguments.threshold)
        shares = " | ".join(f"{row[kind]:.3f}" for kind in COPIES)
        print(f"| {version} | {shares} | {row['false']:.0f} | {row['seconds']:.2f} |")
    tables: list[tuple[str, list[tuple[str, str]] | list[tuple[str, bytes]] | list[tuple[str, str | bytes]]]] = []
    if arguments.wordless:
        tables.append((f"{arguments.wordless} wordless posts", wordless_posts(arguments.wordless, arguments.seed)))
    if arguments.misread:
        items = misread_items(arguments.misread, arguments.seed)
        tables.append((f"{arguments.misread} cp1251 items read as UTF-8", items))
    if arguments.western:
        western = western_items(arguments.western, arguments.seed)
        tables.append((f"{arguments.western} Western European items in UTF-8, copies in cp1252", western))
    if arguments.opposites:
        opposites = opposite_posts(arguments.opposites, arguments.seed)
        tables.append((f"{arguments.opposites} posts in two forms of opposite meaning", opposites))
    for title, copies in tables:
        print(f"\n# {title} and a copy of each, threshold {arguments.threshold}")
        print("| normalization | copies paired with their source | false pairs | featureless documents |")
        print("|---|---|---|---|")
        for version in map(int, arguments.versions.split(",")):
            share, false_pairs, featureless = measure_copies(copies, version, arguments.threshold)
            print(f"| {version} | {share:.3f} | {false_pairs} | {featureless} |")


if __name__ == "__main__":
    main()
