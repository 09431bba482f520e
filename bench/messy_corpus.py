"""A seeded corpus of mailing-list-like posts, with the repetition that real lists have.

    python bench/messy_corpus.py N [--seed S]     # prints a summary

:func:`messy_posts` builds N posts: a body of Zipfian words, sometimes a quoted reply
("> " lines from an earlier post), the author's signature (shared by all posts of that
author; some signatures are repeated-pattern lines such as ``^~^~^~^~`` or ``v~v~v~v~``),
list footers and disclaimers, sometimes a uuencoded or base64 attachment block, and planted
near-duplicates (reposts, forwarded copies with headers, one-word edits).  What is planted
is not the ground truth: :mod:`quality` computes the truth from the exact Jaccard similarity
of the posts' feature sets.  Pure Python, no corpus files; the same seed gives the same posts.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import random

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "de", "fa", "gu", "ho", "ji", "be", "zo", "wy"]
_FOOTERS = [
    (
        "_______________________________________________\nlist-users mailing list\nlist-users@lists.example.org\n"
        "https://lists.example.org/mailman/listinfo/list-users"
    ),
    (
        '--\nYou received this message because you are subscribed to the Google Groups "dev" group.\n'
        "To unsubscribe from this group and stop receiving emails from it, "
        "send an email to dev+unsubscribe@example.com."
    ),
]
_DISCLAIMER = (
    "CONFIDENTIALITY NOTICE: This e-mail message, including any attachments, is for the sole use of the intended "
    "recipient(s) and may contain confidential and privileged information. Any unauthorized review, use, disclosure "
    "or distribution is prohibited. If you are not the intended recipient, please contact the sender by reply e-mail "
    "and destroy all copies of the original message."
)
_PATTERNS = ["^~", "v~", "=-", "*", "-=x=-", "~"]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def _zipf_words(rng: random.Random, vocabulary: list[str], weights: list[float], count: int) -> list[str]:
    return rng.choices(vocabulary, weights, k=count)


def _signature(rng: random.Random, author: int, vocabulary: list[str]) -> str:
    name = f"{rng.choice(vocabulary).title()} {rng.choice(vocabulary).title()}"
    lines = ["-- ", name, f"{rng.choice(vocabulary)} {rng.choice(vocabulary)} project, author {author}"]
    if rng.random() < 0.5:
        # The repeated-pattern line that makes one shingle occur dozens of times.
        lines.append(rng.choice(_PATTERNS) * rng.randint(20, 60))
    if rng.random() < 0.3:
        lines.append(" ".join(rng.choice(vocabulary) for _ in range(rng.randint(4, 10))))
    return "\n".join(lines)


def _attachment(rng: random.Random) -> str:
    payload = rng.randbytes(rng.randint(300, 3000))
    if rng.random() < 0.5:
        encoded = base64.encodebytes(payload).decode("ascii")
        return f"--boundary\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\n{encoded}"
    # Real uuencoding (binascii) of a payload with long zero runs, as binary attachments
    # have: each all-zero line is "M" followed by backquotes, i.e. the token "m" once per
    # line, so one shingle ("m m m") repeats hundreds of times.
    zeros = bytes(rng.randint(2000, 20000))
    data = payload[: len(payload) // 2] + zeros + payload[len(payload) // 2 :]
    lines = ["begin 644 data.bin"]
    lines += [
        binascii.b2a_uu(data[start : start + 45], backtick=True).decode("ascii").rstrip("\n")
        for start in range(0, len(data), 45)
    ]
    return "\n".join([*lines, "`", "end"])


def _edit(rng: random.Random, text: str, vocabulary: list[str]) -> str:
    words = text.split(" ")
    for _ in range(rng.randint(1, 3)):
        position = rng.randrange(len(words))
        words[position] = rng.choice(vocabulary)
    return " ".join(words)


def messy_posts(count: int, seed: int = 0) -> list[str]:
    """``count`` mailing-list-like posts (see the module docstring), reproducible from
    ``seed``.  About 1.5 KB each on average; O(count) time."""
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng, 5000)
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    authors = max(2, count // 15)
    signatures = [_signature(rng, author, vocabulary) for author in range(authors)]
    posts: list[str] = []
    while len(posts) < count:
        if posts and rng.random() < 0.15:
            # A planted near-duplicate of an earlier post.
            original = rng.choice(posts)
            choice = rng.random()
            if choice < 0.35:
                posts.append(original)  # a repost
            elif choice < 0.7:
                header = (
                    f"---------- Forwarded message ----------\nFrom: user{rng.randint(1, 999)}@example.org\n"
                    f"Subject: Fwd: {' '.join(rng.choices(vocabulary, k=4))}\n\n"
                )
                posts.append(header + original)
            else:
                posts.append(_edit(rng, original, vocabulary))
            continue
        author = rng.randrange(authors)
        paragraphs = []
        for _ in range(rng.randint(1, 4)):
            paragraphs.append(" ".join(_zipf_words(rng, vocabulary, weights, rng.randint(8, 70))) + ".")
        parts = []
        if posts and rng.random() < 0.4:
            quoted = rng.choice(posts).splitlines()[: rng.randint(2, 12)]
            parts.append(
                f"On a weekday, author {rng.randrange(authors)} wrote:\n" + "\n".join("> " + line for line in quoted)
            )
        parts.append("\n\n".join(paragraphs))
        parts.append(signatures[author])
        if rng.random() < 0.08:
            parts.append(_attachment(rng))
        if rng.random() < 0.6:
            parts.append(_FOOTERS[author % len(_FOOTERS)])
        if rng.random() < 0.15:
            parts.append(_DISCLAIMER)
        posts.append("\n\n".join(parts))
    return posts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("count", type=int)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    posts = messy_posts(args.count, args.seed)
    print(f"{len(posts)} posts, {sum(map(len, posts)) / len(posts):.0f} characters on average")
    print(posts[-1])


if __name__ == "__main__":
    main()
