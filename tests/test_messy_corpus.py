"""The messy mailing-list corpus generator (bench/messy_corpus.py) makes the repetition the
issue is about, reproducibly, and quality.py reads it as a corpus."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

from simdb.fingerprint import Fingerprinter

_BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str) -> object:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", _BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"bench_{name}"] = module
    spec.loader.exec_module(module)
    return module


messy = _load("messy_corpus")


def test_posts_are_reproducible_and_have_repeated_features_and_duplicates() -> None:
    posts = messy.messy_posts(400, seed=3)  # type: ignore[attr-defined]
    assert posts == messy.messy_posts(400, seed=3)  # type: ignore[attr-defined]
    assert posts != messy.messy_posts(400, seed=4)  # type: ignore[attr-defined]
    fingerprinter = Fingerprinter()
    top_counts = [max((weight for _, weight in fingerprinter.weighted_features(post)), default=0) for post in posts]
    assert max(top_counts) >= 20  # a repeated-pattern signature or an attachment line
    assert sum(count >= 10 for count in top_counts) >= 20
    assert any("> " in post for post in posts) and any("begin 644" in post or "base64" in post for post in posts)
    copies = Counter(posts)
    assert max(copies.values()) >= 2  # planted reposts


def test_quality_reads_a_generated_corpus() -> None:
    quality = _load("quality")
    documents = quality.read_corpus("messy:50:2")  # type: ignore[attr-defined]
    assert documents == messy.messy_posts(50, 2)  # type: ignore[attr-defined]
