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
from simdb.features import NORMALIZATION

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

#: Negations: stop words of the text pipeline before version 4, whose dropping made "you
#: should not take it" and "you should take it" the same text.  Version 4 keeps them.
_ENGLISH_NEGATIONS = """
no nor not cannot couldnt didnt doesnt dont hadnt hasnt havent isnt mustnt shant shouldnt
wasnt werent wont wouldnt
"""

#: The built-in lists of the text pipeline from version 4 on, by language name.
STOPWORD_LISTS: dict[str, frozenset[str]] = {
    "english": frozenset(_ENGLISH_WORDS.split()) - frozenset(_ENGLISH_NEGATIONS.split()),
}
#: The lists of the pipeline versions before 4, where they differ: the databases made with
#: them keep them.
_LISTS_BEFORE_VERSION_4: dict[str, frozenset[str]] = {"english": frozenset(_ENGLISH_WORDS.split())}


def stopword_list(language: str, normalization: int = NORMALIZATION) -> frozenset[str]:
    """Return the stop-word set for ``language`` (a name from :data:`STOPWORD_LISTS`) in
    text pipeline version ``normalization`` (see :data:`simdb.features.NORMALIZATION`).

    Raises :class:`InvalidInputError` naming the setting ``stopwords`` for an unknown
    language.  O(1).
    """
    try:
        current = STOPWORD_LISTS[language]
        return _LISTS_BEFORE_VERSION_4.get(language, current) if normalization < 4 else current
    except (KeyError, TypeError):
        raise InvalidInputError(
            f"stopwords={language!r} is not a known stop-word list",
            f"use None or one of {sorted(STOPWORD_LISTS)}",
            argument="stopwords",
            value=language,
            expected="none or one of " + ", ".join(sorted(STOPWORD_LISTS)),
        ) from None
