"""HTML reduced to the text a reader sees, before it is fingerprinted."""

from __future__ import annotations

from html.parser import HTMLParser

from simdb.features import references_escaped


class _TextExtractor(HTMLParser):
    """Visible text of an HTML page: the data outside script, style and similar elements.
    Any tag but an inline one (``<b>``, ``<a>``, ``<span>``, ...) separates words, so
    ``<p>one</p><p>two</p>`` is "one two" while ``<b>Im</b>portant`` stays one word."""

    # The head's only text is its title; named rather than "head", whose end tag HTML lets a
    # page leave out (a review: such a page's whole body was hidden).
    _HIDDEN = frozenset({"script", "style", "noscript", "template", "title"})
    _INLINE = frozenset(
        {
            "a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "del", "dfn", "em", "font", "i", "ins", "kbd",
            "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u", "var",
            "wbr",
        }
    )  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._HIDDEN:
            self._hidden_depth += 1
        elif tag not in self._INLINE:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN and self._hidden_depth:
            self._hidden_depth -= 1
        elif tag not in self._INLINE:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._hidden_depth:
            self.parts.append(data)


def visible_text(html: str) -> str:
    """The text a browser shows of the HTML page ``html``, words separated by single spaces
    (see :class:`_TextExtractor`), for fingerprinting: a page's tags, attribute values,
    scripts and styles would otherwise be words of it, shared by every page of its site.
    What looks like a character reference in the shown text is escaped, so that the text
    pipeline, which decodes references (version 6), reads it as shown.  ``simdb add`` reads
    ``.html`` files and web-archive pages through this.  O(len(html))."""
    extractor = _TextExtractor()
    extractor.feed(html)
    extractor.close()
    # The parser decoded the page's references; what still looks like one is visible text
    # ("write &lt;p&gt;"), which the text pipeline must not decode a second time.
    return references_escaped(" ".join("".join(extractor.parts).split()))
