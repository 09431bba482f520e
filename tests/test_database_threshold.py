"""Similarity thresholds, sketches and featureless documents in the database (issue #14),
checked against a brute-force oracle: every pair's similarity from the documents' sketches
(or fingerprints) filtered by the threshold."""

from __future__ import annotations

import math
import random
from itertools import combinations
from pathlib import Path

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_minhash import ref_similarity

import simdb
from simdb import codec
from simdb.database import CONFIG_KEY, FINGERPRINTER_KEY, SKETCHES
from simdb.threshold import candidate_distance, fingerprint_similarity
from tests.conftest import creating_format

WORDS = [f"w{i}" for i in range(300)]


def near_duplicate_texts(rng: random.Random, groups: int, size: int) -> list[str]:
    """Groups of texts: a random base and copies with a few words changed, plus a featureless
    text now and then."""
    texts = []
    for _ in range(groups):
        base = [rng.choice(WORDS) for _ in range(rng.randint(20, 60))]
        for _ in range(rng.randint(1, size)):
            copy = list(base)
            for _ in range(rng.randint(0, 4)):
                copy[rng.randrange(len(copy))] = rng.choice(WORDS)
            texts.append(" ".join(copy))
        if rng.random() < 0.2:
            texts.append(rng.choice(["", "...", "!!"]))
    return texts


class Oracle:
    """Every pair of documents with its distance and similarity, computed one by one."""

    def __init__(self, fingerprinter: simdb.Fingerprinter, rows: list[tuple[str, int, bytes | None]]) -> None:
        self.kind = fingerprinter.kind
        self.rows = rows  # (key, fingerprint, sketch or None) in insertion order

    def similarity(self, a: tuple[str, int, bytes | None], b: tuple[str, int, bytes | None]) -> float:
        """The joint estimate (minhash) or the sketch's (SimHash) when both have a sketch,
        else the fingerprint estimate, one pair at a time (test_minhash.ref_similarity)."""
        return ref_similarity(self.kind, (a[1], a[2]), (b[1], b[2]))

    def pairs(self, threshold: float, radius: int) -> set[tuple[str, str, int]]:
        found = set()
        for a, b in combinations(self.rows, 2):
            distance = simdb.hamming(a[1], b[1])
            if a[2] == b"" or b[2] == b"":
                continue  # featureless documents never pair
            if distance <= radius and self.similarity(a, b) >= threshold:
                found.add((a[0], b[0], distance))
        return found


def rows_of(db: simdb.Database, texts: list[str], fingerprint_only: set[int]) -> list[tuple[str, int, bytes | None]]:
    fingerprinter = db.fingerprinter
    assert fingerprinter is not None
    rows = []
    for i, text in enumerate(texts):
        fingerprint, sketch = fingerprinter.fingerprint_and_sketch(text)
        rows.append((f"k{i}", fingerprint, None if i in fingerprint_only else sketch))
    return rows


def fill(db: simdb.Database, texts: list[str], fingerprint_only: set[int]) -> list[tuple[str, int, bytes | None]]:
    db.add_texts([(f"k{i}", text) for i, text in enumerate(texts)])
    rows = rows_of(db, texts, fingerprint_only)
    # Some documents come as fingerprints alone: no sketch, the fingerprint estimate.
    db.add_many([(key, fingerprint) for key, fingerprint, sketch in rows if sketch is None])
    return rows


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32),
    threshold=st.sampled_from([0.5, 0.8, 0.9, 1.0]),
    kind=st.sampled_from(["minhash", "simhash"]),
)
def test_threshold_pairs_clusters_and_queries_equal_the_oracle(
    tmp_path_factory, seed: int, threshold: float, kind: str
) -> None:
    rng = random.Random(seed)
    texts = near_duplicate_texts(rng, groups=rng.randint(1, 6), size=5)
    fingerprint_only = {i for i in range(len(texts)) if rng.random() < 0.15}
    fingerprinter = simdb.Fingerprinter(kind=kind)
    with simdb.open(tmp_path_factory.mktemp("t") / "db", k=3, fingerprinter=fingerprinter) as db:
        oracle = Oracle(fingerprinter, fill(db, texts, fingerprint_only))
        # candidates are checked with sketches when some document has one
        radius = candidate_distance(threshold, kind, verified=any(row[2] for row in oracle.rows))
        expected = oracle.pairs(threshold, radius)
        got = list(db.pairs(threshold=threshold))
        assert {pair[:3] for pair in got} == expected
        assert len(got) == len(expected)
        for pair in got:
            a = next(row for row in oracle.rows if row[0] == pair.key_a)
            b = next(row for row in oracle.rows if row[0] == pair.key_b)
            assert pair.similarity == pytest.approx(oracle.similarity(a, b))
        # clusters are the connected groups of those pairs
        groups = {key: {key} for key, _, _ in oracle.rows}
        for a, b, _ in expected:
            merged = groups[a] | groups[b]
            for key in merged:
                groups[key] = merged
        want = sorted(
            sorted(group, key=lambda key: int(key[1:]))
            for group in {frozenset(g) for g in groups.values()}
            if len(group) > 1
        )
        assert sorted(db.clusters(threshold=threshold)) == want
        # leaders: in the order added, a document no earlier leader took takes every later
        # one it pairs with that none took yet (keys k0, k1, ... in that order)
        paired = {frozenset((a, b)) for a, b, _ in expected}
        order = sorted((row[0] for row in oracle.rows), key=lambda key: int(key[1:]))
        taken: set[str] = set()
        want_leaders = []
        for position, leader in enumerate(order):
            if leader not in taken:
                later = order[position + 1 :]
                group = [leader] + [key for key in later if key not in taken and {leader, key} in paired]
                taken.update(group)
                want_leaders.append(group)
        leaders = list(db.clusters_with_spread(threshold=threshold, mode="leaders"))
        assert [cluster.keys for cluster in leaders] == [group for group in want_leaders if len(group) > 1]
        assert all(cluster.to_representative >= threshold for cluster in leaders)
        # a query finds the stored documents at similarity >= threshold within the threshold's
        # radius, as pairs() does, also past the index k (3 here; found by a probe: capped at
        # the index k, query(threshold=0.7) found 56 of 119 true pairs, pairs() 115)
        for i in rng.sample(range(len(texts)), min(4, len(texts))):
            key, fingerprint, _ = oracle.rows[i]
            query_row = (key, fingerprint, fingerprinter.fingerprint_and_sketch(texts[i])[1])
            query_radius = candidate_distance(threshold, kind, verified=bool(query_row[2]))
            want_matches = {
                row[0]
                for row in oracle.rows
                if simdb.hamming(row[1], fingerprint) <= query_radius
                and (oracle.similarity(query_row, row) if row[2] != b"" and query_row[2] != b"" else 0.0) >= threshold
            }
            matches = db.query(text=texts[i], threshold=threshold)
            assert {match.key for match in matches} == want_matches
            assert [match.similarity for match in matches] == sorted(
                (match.similarity for match in matches), reverse=True
            )
            assert db.query_many(texts=[texts[i]], threshold=threshold) == [matches]
            assert db.query_many([fingerprint], sketches=[query_row[2]], threshold=threshold) == [matches]
            # A query without a sketch beside it does not narrow this one's radius (a review).
            assert db.query_many([fingerprint, 0], sketches=[query_row[2], None], threshold=threshold)[0] == matches


def test_pairs_run_at_any_k_beyond_the_index_k(db_path) -> None:
    rng = random.Random(3)
    stored = [(f"k{i}", rng.getrandbits(64)) for i in range(60)]
    with simdb.open(db_path, k=2) as db:
        db.add_many(stored)
        for k in (0, 2, 7, 20, 40, 64):
            want = {
                (a, b, simdb.hamming(x, y)) for (a, x), (b, y) in combinations(stored, 2) if simdb.hamming(x, y) <= k
            }
            assert {pair[:3] for pair in db.pairs(k=k)} == want
            assert sum(db.pair_histogram(k=k).values()) == len(want)
        with pytest.raises(simdb.DistanceError):
            list(db.pairs(k=65))


def test_featureless_documents_are_counted_and_never_pair_unless_asked(db_path) -> None:
    # Punctuation-only texts were featureless before text pipeline version 6.
    with simdb.open(db_path, fingerprinter=simdb.Fingerprinter(normalization=5)) as db:
        result = db.add_texts(
            [("empty", ""), ("dots", "..."), ("text", "a real text with some words in it"), ("bang", "!")]
        )
        assert (result.added, result.featureless) == (4, 3)
        assert list(db.pairs()) == []
        assert list(db.pairs(k=3)) == []  # fingerprint 0 thrice: still no pairs
        assert list(db.clusters()) == []
        both = {pair[:2]: pair.similarity for pair in db.pairs(include_featureless=True)}
        assert both == {("empty", "dots"): 1.0, ("empty", "bang"): 1.0, ("dots", "bang"): 1.0}
        assert db.query(text="", threshold=0.5) == []
        skipped = db.add_texts([("again", "")], if_new=True)
        assert (skipped.added, skipped.featureless, skipped.skipped) == (1, 1, [])


def test_wordless_texts_pair_with_their_copies_only(db_path) -> None:
    """An answers probe: "🔥🔥🔥 😂😂😂" posted twice was never a pair (featureless), and with
    include_featureless every emoji-only post paired with every other at 1.0.  From text
    pipeline version 6 such texts are fingerprinted by their symbols; a blank one is still
    featureless."""
    with simdb.open(db_path) as db:
        result = db.add_texts(
            [
                ("fire", "🔥🔥🔥 😂😂😂"),
                ("fire-again", "🔥🔥🔥  😂😂😂"),
                ("up", "👍"),
                ("down", "👎"),
                ("blank", " \n"),
            ]
        )
        assert (result.added, result.featureless) == (5, 1)
        assert [pair[:2] for pair in db.pairs()] == [("fire", "fire-again")]
        assert [pair[:2] for pair in db.pairs(include_featureless=True)] == [("fire", "fire-again")]
        assert [match.key for match in db.query(text="👍", threshold=0.9)] == ["up"]


def test_if_new_with_a_threshold_checks_the_batch_and_the_stored_documents(db_path) -> None:
    base = " ".join(f"w{i}" for i in range(60))
    edited = base.replace("w30", "x30")
    other = " ".join(f"v{i}" for i in range(60))
    with simdb.open(db_path) as db:
        db.add("stored", text=base)
        result = db.add_texts(
            [("copy", base), ("other", other), ("other-copy", other), ("edited", edited)], if_new=True, threshold=0.9
        )
        assert [(skip.key, skip.duplicate_of) for skip in result.skipped] == [
            ("copy", "stored"),
            ("other-copy", "other"),
            ("edited", "stored"),
        ]
        assert all(skip.similarity >= 0.9 for skip in result.skipped)
        assert result.added == 1 and sorted(db.keys()) == ["other", "stored"]
        # at threshold 1.0 the one-word edit is new
        assert db.add("edited", text=edited, if_new=True, threshold=1.0).added == 1
        # a key never duplicates its own stored version: the same text is unchanged, an edit replaces it
        again = db.add("other", text=other, if_new=True)
        assert (again.skipped, again.unchanged) == ([], 1)
        assert db.add("other", text=other.replace("v7", "y7"), if_new=True).replaced == 1


def test_if_new_counts_a_document_stored_as_it_is_unchanged_not_a_duplicate(db_path) -> None:
    """Two copies stored without if_new, then both added again as they are with if_new: each
    was reported as the other's near-duplicate and skipped, though both stay stored and
    adding them writes nothing.  A changed version is still checked."""
    words = [f"w{i}" for i in range(200)]
    text = " ".join(words)
    with simdb.open(db_path) as db:
        db.add_texts([("a", text), ("b", text)])
        again = db.add_texts([("a", text), ("b", text), ("b", text)], if_new=True)
        assert (again.skipped, again.unchanged, again.added, again.replaced) == ([], 3, 0, 0)
        edit = " ".join([*words[:7], "x7", *words[8:]])
        edited = db.add_texts([("b", edit), ("b", text)], if_new=True)
        assert [(skip.key, skip.duplicate_of) for skip in edited.skipped] == [("b", "a")]
        assert edited.unchanged == 1  # the edit was skipped, so b is still stored as it is


def test_if_new_probes_once_and_writes_once_per_batch(db_path, monkeypatch) -> None:
    """The cause of `add --if-new` being 50x slower: one store (a thread pool and an id
    read) per document.  Now one per batch."""
    from simdb.writes import Writes

    calls = []
    original = Writes.store

    def counting(self, txn, batch):  # type: ignore[no-untyped-def]
        calls.append(len(batch.keys))
        return original(self, txn, batch)

    monkeypatch.setattr(Writes, "store", counting)
    rng = random.Random(1)
    with simdb.open(db_path) as db:
        db.add_many([(f"k{i}", rng.getrandbits(64)) for i in range(500)], if_new=True, batch_size=250)
    assert calls == [250, 250]


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32), batch_size=st.integers(1, 8))
def test_if_new_equals_adding_one_by_one(tmp_path_factory, seed: int, batch_size: int) -> None:
    rng = random.Random(seed)
    texts = near_duplicate_texts(rng, groups=3, size=4)
    items = [(f"k{rng.randrange(len(texts) + 2)}", text) for text in texts]
    root = tmp_path_factory.mktemp("n")
    with simdb.open(root / "batched") as batched, simdb.open(root / "single") as single:
        got = batched.add_texts(items, if_new=True, batch_size=batch_size)
        want = simdb.AddResult()
        for key, text in items:
            want.merge(single.add(key, text=text, if_new=True))
        assert got.skipped == want.skipped
        assert list(batched.items()) == list(single.items())


def test_if_new_names_the_nearest_duplicate_whether_stored_or_in_the_batch(tmp_path: Path) -> None:
    """q is 3 bits from a stored document and 1 bit from an item kept earlier in its batch:
    one by one, q duplicates that item; batched (add_many, the writer) it was reported as
    a duplicate of the stored one, whatever was nearer (a probe found it)."""
    items = [("b", 1 << 40), ("q", 0)]  # b: 1 bit from q, 4 from the stored 0b111
    results = {}
    for how in ("one by one", "batch", "writer"):
        with simdb.open(tmp_path / how, k=3) as db:
            db.add("stored", 0b111)
            if how == "one by one":
                results[how] = [skip for key, fp in items for skip in db.add(key, fp, if_new=True).skipped]
            elif how == "batch":
                results[how] = db.add_many(items, if_new=True).skipped
            else:
                with db.writer(if_new=True) as writer:
                    for key, fp in items:
                        writer.add(key, fp)
                results[how] = writer.total.skipped
    assert [(skip.key, skip.duplicate_of, skip.distance) for skip in results["one by one"]] == [("q", "b", 1)]
    assert results["batch"] == results["writer"] == results["one by one"]


def mixed_items(rng: random.Random, fingerprinter: simdb.Fingerprinter) -> list[tuple]:
    """Documents as sketched_items gives them back: texts with their sketches, featureless
    texts (b""), and fingerprints without one (None), some of them near the texts'."""
    texts = [*near_duplicate_texts(rng, groups=3, size=4), "", "!!!", "..."]
    items: list[tuple] = []
    for text in texts:
        fingerprint, sketch = fingerprinter.fingerprint_and_sketch(text)
        if rng.random() < 0.3:  # the same document added as a bare fingerprint
            sketch = None
        items.append((f"k{rng.randrange(len(texts) + 2)}", fingerprint, {"n": len(items)}, sketch))
    items += [(f"f{i}", rng.getrandbits(64), None, None) for i in range(3)]
    # Two documents whose sketches agree but whose fingerprints are 4 bits apart: beyond the
    # radius of an item without a sketch, within that of one with.
    twin, sketch = rng.getrandbits(64), rng.randbytes(192)
    items += [("twin-a", twin, None, sketch), ("twin-b", twin ^ 0b1111 << rng.randrange(61), None, sketch)]
    rng.shuffle(items)
    return items


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32), batch_size=st.integers(1, 8))
def test_items_with_sketches_add_as_one_by_one_whatever_the_batch(tmp_path_factory, seed: int, batch_size: int) -> None:
    # Within a batch, a pair where either item has no sketch is compared by fingerprint and a
    # featureless later item is similar to nothing, as a later add compares with a stored one.
    rng = random.Random(seed)
    fingerprinter = simdb.Fingerprinter()
    items = mixed_items(rng, fingerprinter)
    root = tmp_path_factory.mktemp("s")
    with (
        simdb.open(root / "batched", fingerprinter=fingerprinter) as batched,
        simdb.open(root / "single", fingerprinter=fingerprinter) as single,
    ):
        got = batched.add_many(items, if_new=True, batch_size=batch_size)
        want = simdb.AddResult()
        for item in items:
            want.merge(single.add_many([item], if_new=True))
        # The same items skipped, each as similar to what it duplicates (of equally similar
        # ones, a batch names a stored document before one of its own).
        assert got.skipped == want.skipped
        assert (got.added, got.replaced) == (want.added, want.replaced)
        assert list(batched.sketched_items()) == list(single.sketched_items())


def test_a_copy_through_sketched_items_answers_as_the_original(tmp_path: Path) -> None:
    rng = random.Random(7)
    fingerprinter = simdb.Fingerprinter()
    texts = near_duplicate_texts(rng, groups=4, size=5)
    with simdb.open(tmp_path / "original", fingerprinter=fingerprinter) as original:
        original.add_texts([(f"t{i}", text, {"i": i}) for i, text in enumerate(texts)])
        original.add_texts([("empty", ""), ("dots", "..."), ("bangs", "!!!")])  # featureless
        original.add_many([(f"f{i}", fingerprinter.fingerprint(text)) for i, text in enumerate(texts[:6])])
        copied = list(original.sketched_items(snapshot=True, chunk=7))
        assert {sketch for _, sketch in copied if sketch is not None and len(sketch) != 192} == {b""}
        assert sum(sketch is None for _, sketch in copied) == 6
        with simdb.open(tmp_path / "copy", fingerprinter=fingerprinter) as copy:
            copy.add_many([(*document, sketch) for document, sketch in copied], batch_size=5)
            assert list(copy.sketched_items()) == copied
            assert list(copy.items()) == list(original.items())
            assert list(copy.pairs()) == list(original.pairs()) != []
            assert sorted(map(sorted, copy.clusters())) == sorted(map(sorted, original.clusters()))
            assert list(copy.pairs(include_featureless=True)) == list(original.pairs(include_featureless=True))
            for text in [*texts[::3], ""]:
                assert copy.query(text=text, threshold=0.5) == original.query(text=text, threshold=0.5)


def test_items_with_sketches_are_checked(tmp_path: Path) -> None:
    sketch = simdb.Fingerprinter().fingerprint_and_sketch("a few words of text here")[1]
    with simdb.open(tmp_path / "plain") as db:
        with pytest.raises(simdb.InvalidInputError, match="no fingerprint settings"):
            db.add_many([("a", 1, None, sketch)])
        assert len(db) == 0
    with simdb.open(tmp_path / "text", fingerprinter=simdb.Fingerprinter()) as db:
        for bad, message in ((sketch[:-1], "sketch="), ("x" * 192, "sketch="), (b"", "featureless")):
            with pytest.raises(simdb.InvalidInputError, match=message):
                db.add_many([("ok", 5, None, None), ("b", 5, None, bad)])
        assert len(db) == 0  # the batch was refused whole
        assert db.add_many([("e", 0, None, b""), ("s", 7, None, sketch)]).featureless == 1


@pytest.mark.parametrize("weighting", ["tf", "log", "idf"])
def test_weighted_simhash_thresholds_apply_to_the_weighted_cosine_of_the_fingerprints(
    tmp_path: Path, weighting: str
) -> None:
    # Weighted SimHash bits estimate the cosine of the weighted vectors, which bounds no
    # Jaccard of the sets: a page and its copy with one block repeated 40 times have the
    # same set, and were left out by pairs(threshold=) though the sketch put them at 1.0.
    rng = random.Random(11)
    texts = near_duplicate_texts(rng, groups=6, size=4)
    block = " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(6))
    page = " ".join(f"w{rng.randrange(10**6)}" for _ in range(300))
    texts += [f"{page} {block} {block}", f"{page} {' '.join([block] * 40)}", ""]
    settings_ = {"weights": "binary" if weighting == "idf" else weighting}
    fingerprinter = simdb.Fingerprinter(kind="simhash", **settings_)
    if weighting == "idf":
        fingerprinter = fingerprinter.fit_idf(texts)
    with simdb.open(tmp_path / "db", fingerprinter=fingerprinter) as db:
        db.add_texts([(f"t{i}", text) for i, text in enumerate(texts)])
        assert db.stats()["similarity"] == "weighted-simhash"
        stored = {document.key: document.fingerprint for document, sketch in db.sketched_items() if sketch}
        for threshold in (0.7, 0.9):
            expected = {}
            for (a, fa), (b, fb) in combinations(stored.items(), 2):
                cosine = max(0.0, math.cos(math.pi * (fa ^ fb).bit_count() / 64))
                if cosine >= threshold:
                    expected[a, b] = cosine
            got = {(pair.key_a, pair.key_b): pair.similarity for pair in db.pairs(threshold=threshold)}
            assert got.keys() == expected.keys() and expected
            assert all(got[pair] == pytest.approx(expected[pair]) for pair in got)
            for key in list(stored)[::5]:
                for match in db.query(text=texts[int(key[1:])], threshold=threshold):
                    distance = (stored[key] ^ match.fingerprint).bit_count()
                    assert match.similarity == pytest.approx(max(0.0, math.cos(math.pi * distance / 64)))


def make_format_1(path: Path) -> None:
    """A database as the code before issue #14 wrote it: format_version 1, no sketches
    sub-database, SimHash tf settings stored without "kind"."""
    old_settings = {k: v for k, v in simdb.Fingerprinter(kind="simhash", weights="tf").to_dict().items() if k != "kind"}
    texts = {
        "a": "the quick brown fox jumps over the lazy dog",
        "b": "the quick brown fox jumps over the lazy dog!",
        "c": "something else",
    }
    with creating_format(2), simdb.open(path, k=3) as db:
        db.add_many([(key, simdb.simhash(text, weights="tf")) for key, text in texts.items()])
        env = db._storage.env
        with env.begin(write=True) as txn:
            meta = env.open_db(b"meta", txn=txn)
            config = codec.unpack(txn.get(CONFIG_KEY, db=meta), "config")
            txn.put(CONFIG_KEY, codec.pack({**config, "format_version": 1}, "config"), db=meta)
            txn.put(FINGERPRINTER_KEY, codec.pack(old_settings, "settings"), db=meta)
            txn.drop(env.open_db(SKETCHES, txn=txn), delete=True)


def test_a_format_1_database_opens_and_works_with_fingerprint_estimates(db_path) -> None:
    make_format_1(db_path)
    with simdb.open(db_path) as db:
        stats = db.stats()
        assert (stats["format_version"], stats["kind"], stats["sketches"]) == (1, "simhash", False)
        assert db.fingerprinter == simdb.Fingerprinter(kind="simhash", weights="tf")
        matches = db.query(text="the quick brown fox jumps over the lazy dog", threshold=0.9)
        assert {match.key for match in matches} == {"a", "b"}
        assert all(match.similarity == fingerprint_similarity(match.distance, "simhash") for match in matches)
        assert {pair[:2] for pair in db.pairs()} == {("a", "b")}
        result = db.add_texts([("d", "the quick brown fox jumps over the lazy dog"), ("e", "")])
        assert (result.added, result.featureless) == (2, 1)
        assert db.check()
    with simdb.open(db_path) as db:
        assert db.stats()["format_version"] == 1  # still readable by the code that wrote it
        env = db._storage.env
        with pytest.raises(lmdb.NotFoundError):
            env.open_db(SKETCHES, create=False)


def test_new_databases_are_format_6_and_a_newer_format_is_refused(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add("a", text="some words here")
        assert db.stats()["format_version"] == simdb.FORMAT_VERSION == 6
        assert db.stats()["sketch_count"] == 1
        env = db._storage.env
        with env.begin(write=True) as txn:
            meta = env.open_db(b"meta", txn=txn)
            config = codec.unpack(txn.get(CONFIG_KEY, db=meta), "config")
            txn.put(CONFIG_KEY, codec.pack({**config, "format_version": 7}, "config"), db=meta)
    with pytest.raises(simdb.FormatVersionError):
        simdb.open(db_path)


def test_sketches_follow_replacement_removal_and_compact(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add_texts([("a", "one two three four five six"), ("b", "seven eight nine ten eleven")])
        db.add("a", 12345)  # replaced by a fingerprint: its sketch goes
        db.remove("b")
        assert db.stats()["sketch_count"] == 0
        db.add("c", text="one two three four five six")
        db.compact()
        assert db.stats()["sketch_count"] == 1 and db.check()


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, float("nan"), "0.9", True, None])
def test_bad_thresholds_are_refused(db_path, bad) -> None:
    with simdb.open(db_path) as db:
        db.add("a", 1)
        calls = [
            lambda: db.query(1, threshold=bad),
            lambda: list(db.pairs(threshold=bad)),
            lambda: db.add("b", 2, if_new=True, threshold=bad),
        ]
        if bad is None:
            return
        for call in calls:
            with pytest.raises(simdb.InvalidInputError):
                call()


def test_candidate_distance_matches_the_contract() -> None:
    assert candidate_distance(0.9, "minhash", verified=False) == 3
    assert candidate_distance(0.9, "simhash", verified=False) == 9
    assert candidate_distance(1.0, "minhash", verified=True) == 0
    assert candidate_distance(0.9, "minhash", verified=True) >= 6
    assert simdb.DEFAULT_THRESHOLD == 0.9


@pytest.mark.parametrize(("threshold", "kind"), [(0.7, "minhash"), (0.9, "minhash"), (0.95, "simhash")])
def test_share_within_is_the_share_of_simulated_pairs_at_the_threshold(threshold: float, kind: str) -> None:
    """Two fingerprints of texts at similarity t, bit by bit: each of the 64 bits differs
    with probability (1 - t) / 2 (minhash) or arccos(t) / pi (simhash), drawn here one bit
    at a time, 40,000 pairs; the share within d bits matches share_within to 4 sigma."""
    import math

    import numpy as np

    from simdb.threshold import share_within

    flip = (1 - threshold) / 2 if kind == "minhash" else math.acos(threshold) / math.pi
    distances = (np.random.default_rng(17).random((40_000, 64)) < flip).sum(axis=1)
    for distance in (0, 3, 5, 7, 11, 15):
        expected = share_within(distance, threshold, kind)
        sigma = math.sqrt(max(expected * (1 - expected), 1e-6) / len(distances))
        assert abs((distances <= distance).mean() - expected) <= 4 * sigma + 1e-9


@pytest.mark.parametrize("threshold", [0.5, 0.8, 0.9, 0.95])
def test_the_verified_radius_keeps_97_percent_under_the_joint_estimate(threshold: float) -> None:
    """Pairs simulated from the joint model (bits agree with probability (1 + J) / 2, bytes
    with J + (1 - J) / 256): of the pairs at J = t, and of those the joint estimate accepts
    at J in [t - 0.03, t + 0.03], at least 97% lie within candidate_distance(t, verified)."""
    import numpy as np

    from simdb.fingerprint import SKETCH_BYTES
    from simdb.threshold import joint_similarities

    rng = np.random.default_rng(14)
    radius = candidate_distance(threshold, "minhash", verified=True)
    for jaccard in (threshold - 0.03, threshold, min(1.0, threshold + 0.03)):
        bits = rng.binomial(64, (1 + jaccard) / 2, 200_000)
        agreeing = rng.binomial(SKETCH_BYTES, jaccard + (1 - jaccard) / 256, 200_000)
        within = 64 - bits <= radius
        accepted = joint_similarities(bits, agreeing) >= threshold
        assert within[accepted].mean() >= 0.97
        if jaccard >= threshold:
            assert within.mean() >= 0.97


def test_damaged_sketches_are_reported_by_check_and_readers(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add_texts([("a", "one two three four five"), ("b", "six seven eight nine ten")])
        env = db._storage.env
        with env.begin(write=True) as txn:
            sketches = env.open_db(SKETCHES, txn=txn)
            txn.put((0).to_bytes(8, "big"), b"short", db=sketches)
            txn.put((1).to_bytes(8, "big"), bytes(128), db=sketches)  # the old 128-byte size is damage too
            txn.put((99).to_bytes(8, "big"), bytes(192), db=sketches)
        problems = db.check().problems
        assert any("sketch of document 0" in problem for problem in problems)
        assert any("sketch of document 1 is 128 bytes" in problem for problem in problems)
        assert any("has no matching document" in problem for problem in problems)
        with pytest.raises(simdb.CorruptDatabaseError, match="sketches"):
            list(db.pairs())
        with pytest.raises(simdb.CorruptDatabaseError, match="sketches"):
            db.query(text="one two three four five", threshold=0.5)


def test_large_thresholds_spans_use_a_cheap_plan_or_compare_every_pair() -> None:
    from simdb.pairsearch import pairs_plan as _pairs_plan

    assert _pairs_plan(3, 1_000_000) is not None
    assert _pairs_plan(64, 10) is None and _pairs_plan(40, 100_000) is None
    plan = _pairs_plan(9, 200_000)
    assert plan is not None and len(plan.tables) <= 1000


def test_pairs_clusters_and_histograms_take_workers(db_path, monkeypatch) -> None:
    rng = random.Random(11)
    bases = [rng.getrandbits(64) for _ in range(400)]
    stored = [(f"d{i}", base ^ (1 << rng.randrange(64)) if i % 3 else base) for i, base in enumerate(bases * 3)]
    want = {(a, b) for (a, x), (b, y) in combinations(stored, 2) if simdb.hamming(x, y) <= 4}
    seen: list[object] = []
    search = simdb.pairsearch.iter_pair_blocks

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(kwargs.get("workers"))
        return search(*args, **kwargs)

    monkeypatch.setattr(simdb.pairsearch, "iter_pair_blocks", spy)
    with simdb.open(db_path, k=2) as db:
        db.add_many(stored)
        for workers in (1, 2):
            assert {pair[:2] for pair in db.pairs(k=4, workers=workers)} == want
            assert sum(db.pair_histogram(k=4, workers=workers).values()) == len(want)
            assert sorted(map(sorted, db.clusters(k=4, workers=workers))) == sorted(
                map(sorted, db.clusters(k=4, workers=1))
            )
        assert 2 in seen and 1 in seen  # the search itself was given the thread count
        for bad in (0, -1, True, 1.5, "2"):
            with pytest.raises(simdb.InvalidInputError):
                list(db.pairs(workers=bad))
            with pytest.raises(simdb.InvalidInputError):
                list(db.clusters(workers=bad))
            with pytest.raises(simdb.InvalidInputError):
                db.pair_histogram(workers=bad)


def test_an_if_new_add_warns_once_when_its_threshold_lies_mostly_beyond_k(tmp_path) -> None:
    """An answers probe: at 0.7 on a default database, if_new left three times the
    duplicates MinHash LSH did, and only the command line said why."""
    import warnings

    from simdb.threshold import share_within

    with simdb.open(tmp_path / "db") as db:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            db.add_texts([("a", "one two three four five six")], if_new=True)  # 0.9: 90% within k=5
            db.add_many([("f", 1)], if_new=True)
            assert caught == []
            db.add_texts([("b", "one two three four five seven")], if_new=True, threshold=0.7)
            db.add_texts([("c", "one two three four five eight")], if_new=True, threshold=0.7)
            db.writer(if_new=True, threshold=0.6).close()
            db.add("d", text="one two three four five nine", if_new=True, threshold=0.65)
            db.add_many([("e", 5)], if_new=True, threshold=0.66)
        assert [warning.category for warning in caught] == [simdb.IfNewReachWarning] * 4
        assert all(warning.filename == __file__ for warning in caught)  # the caller's line
        within = share_within(db.k, 0.7, "minhash")
        assert within < 0.75 and f"{within:.0%} of the pairs at similarity 0.7" in str(caught[0].message)
    with simdb.open(tmp_path / "wide", k=15) as db, warnings.catch_warnings():
        warnings.simplefilter("error")
        db.add_texts([("a", "one two three four five six")], if_new=True, threshold=0.7)
