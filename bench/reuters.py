"""Read the Reuters-21578 SGML files (reut2-*.sgm) into (doc_id, text) pairs, by path."""

from __future__ import annotations

import html
import re
from pathlib import Path

_ARTICLE = re.compile(r"<REUTERS[^>]*NEWID=\"(\d+)\"[^>]*>(.*?)</REUTERS>", re.S)
_TITLE = re.compile(r"<TITLE>(.*?)</TITLE>", re.S)
_BODY = re.compile(r"<BODY>(.*?)</BODY>", re.S)


def read_reuters(corpus: str | Path) -> list[tuple[int, str]]:
    """Every article of the corpus directory as (NEWID, title + body text), in file order.

    The files are Latin-1 with SGML character references; both are decoded.  Articles with
    neither title nor body give an empty text (kept, so callers decide).  O(corpus size)."""
    articles: list[tuple[int, str]] = []
    files = sorted(Path(corpus).glob("reut2-*.sgm"))
    if not files:
        raise SystemExit(f"no reut2-*.sgm files under {corpus}")
    for path in files:
        raw = path.read_bytes().decode("latin-1")
        for match in _ARTICLE.finditer(raw):
            body = match.group(2)
            parts = [m.group(1) for m in (_TITLE.search(body), _BODY.search(body)) if m]
            text = html.unescape("\n".join(parts)).replace("\x03", "")
            articles.append((int(match.group(1)), text))
    return articles
