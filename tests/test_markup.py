"""``simdb.visible_text``: HTML reduced to what a reader sees, before fingerprinting."""

from __future__ import annotations

import random

import simdb
from simdb.features import tokenize


def page(article: str, rng: random.Random) -> str:
    """A page of one site's template around ``article``: attributes, scripts and styles."""
    links = "".join(
        f'<li class="nav-item nav-{n}"><a href="/section/{n}?utm_source=site" data-track="nav-{n}">S{n}</a></li>'
        for n in range(40)
    )
    return (
        "<!DOCTYPE html><html><head><title>Site</title>"
        "<style>.nav-item { float: left; margin: 0 4px } body { font: 14px sans-serif }</style>"
        "<script>window.dataLayer = window.dataLayer || []; function track(e) { dataLayer.push(e) }</script>"
        f'</head><body><ul class="navigation main-nav">{links}</ul>'
        f'<article class="story-body" itemprop="articleBody"><p>{article}</p></article>'
        f"<script>track({{page: {rng.randrange(10**6)}}})</script></body></html>"
    )


def test_pages_of_one_template_are_as_alike_as_their_articles() -> None:
    rng = random.Random(7)
    words = [f"w{n}" for n in range(3000)]
    first, second = (" ".join(rng.choices(words, k=120)) for _ in range(2))
    raw_first, raw_second = page(first, rng), page(second, rng)
    shown = simdb.visible_text(raw_first), simdb.visible_text(raw_second)
    # The markup is shared; the articles are not: raw, the two pages look like near-copies.
    assert simdb.jaccard(raw_first, raw_second) > 0.5
    # What a reader sees: the links' words, then the article.
    links = " ".join(f"S{n}" for n in range(40))
    assert shown == (f"{links} {first}", f"{links} {second}")
    assert simdb.jaccard(*shown) < 0.2


def test_inline_tags_join_words_and_block_tags_separate_them() -> None:
    assert simdb.visible_text("<p>Im<b>port</b>ant</p><p>next</p>") == "Important next"
    assert simdb.visible_text("<div>a</div><div>b</div>") == "a b"
    # A page that shows a reference as text ("&lt;p&gt;") is read as shown: the pipeline,
    # which decodes references, does not decode it a second time into "<p>".
    shown = simdb.visible_text("<p>write &amp;lt;p&amp;gt; for a paragraph</p>")
    assert tokenize(shown) == ["write", "lt", "p", "gt", "for", "a", "paragraph"]
