"""Stop-word lists, one per language, for the optional stop-word filter of the fingerprinter.

Each list holds words in their *normalised* form (NFKC, casefolded, apostrophes removed),
because the filter runs on tokens after normalisation: "don't" becomes the token "dont", so
the list holds "dont".  The lists are frozen sets, so a membership test is O(1).

The English list is deliberately short: function words (articles, pronouns, auxiliaries,
conjunctions, common prepositions and adverbs) that carry almost no information about which
document a text is.  Removing them makes word shingles span more content words, which helps
some corpora and hurts others; ``bench/quality.py`` measures it.
"""

from __future__ import annotations

from simdb.errors import InvalidInputError

_ENGLISH_WORDS = """
a about above after again against all am an and any are as at
be because been before being below between both but by
can cannot could couldnt
did didnt do does doesnt doing dont down during
each either
few for from further
had hadnt has hasnt have havent having he hed hell her here heres hers herself hes him
himself his how hows
i id if ill im in into is isnt it its itself ive
just
lets
me more most much must mustnt my myself
no nor not now
of off on once only or other ought our ours ourselves out over own
same shall shant she shed shell shes should shouldnt so some such
than that thats the their theirs them themselves then there theres these they theyd
theyll theyre theyve this those through to too
under until up upon us
very
was wasnt we wed well were werent weve what whats when whens where wheres which while
who whom whos why whys will with wont would wouldnt
you youd youll your youre yours yourself yourselves youve
"""

#: The built-in lists, by language name.
STOPWORD_LISTS: dict[str, frozenset[str]] = {
    "english": frozenset(_ENGLISH_WORDS.split()),
}


def stopword_list(language: str) -> frozenset[str]:
    """Return the stop-word set for ``language`` (a name from :data:`STOPWORD_LISTS`).

    Raises :class:`InvalidInputError` naming the setting ``stopwords`` for an unknown
    language.  O(1).
    """
    try:
        return STOPWORD_LISTS[language]
    except (KeyError, TypeError):
        raise InvalidInputError(
            f"stopwords={language!r} is not a known stop-word list",
            f"use None or one of {sorted(STOPWORD_LISTS)}",
            argument="stopwords",
            value=language,
            expected="none or one of " + ", ".join(sorted(STOPWORD_LISTS)),
        ) from None
