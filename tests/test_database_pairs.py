"""Database.pairs() and Database.clusters() against brute force."""

from __future__ import annotations

import random
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simdb
from tests.conftest import clustered


def brute_pairs(stored: list[tuple[str, int]], k: int) -> set[tuple[str, str, int]]:
    return {(a, b, (fa ^ fb).bit_count()) for (a, fa), (b, fb) in combinations(stored, 2) if (fa ^ fb).bit_count() <= k}


def brute_clusters(stored: list[tuple[str, int]], k: int) -> list[list[str]]:
    parent = list(range(len(stored)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for (i, (_, fa)), (j, (_, fb)) in combinations(enumerate(stored), 2):
        if (fa ^ fb).bit_count() <= k:
            parent[root(j)] = root(i)
    groups: dict[int, list[str]] = {}
    for i, (key, _) in enumerate(stored):
        groups.setdefault(root(i), []).append(key)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: [key for key, _ in stored].index(g[0]))


def brute_leaders(stored: list[tuple[str, int]], k: int) -> list[list[str]]:
    """Leader clustering, one document at a time in the order added: a document that no
    earlier leader took leads every later one within k bits that none took yet."""
    leader_of: dict[str, str] = {}
    groups: list[list[str]] = []
    for i, (key, fingerprint) in enumerate(stored):
        if key in leader_of:
            continue
        group = [key]
        leader_of[key] = key
        for other, other_fingerprint in stored[i + 1 :]:
            if other not in leader_of and (fingerprint ^ other_fingerprint).bit_count() <= k:
                leader_of[other] = key
                group.append(other)
        groups.append(group)
    return [group for group in groups if len(group) > 1]


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32), count=st.integers(0, 120), kind=st.sampled_from(["random", "clustered", "duplicates"])
)
def test_pairs_and_clusters_equal_brute_force(tmp_path_factory, seed: int, count: int, kind: str) -> None:
    rng = random.Random(seed)
    if kind == "random":
        fps = [rng.getrandbits(64) for _ in range(count)]
    elif kind == "clustered":
        fps = clustered(count, rng, spread=4, bases=4)
    else:
        fps = [rng.choice([1, 2**63, 12345]) for _ in range(count)]
    stored = [(f"k{i}", fp) for i, fp in enumerate(fps)]
    with simdb.open(tmp_path_factory.mktemp("p") / "db", k=3) as db:
        db.add_many(stored)
        db.remove_many(key for key, _ in stored[::7])  # removal leaves no trace in pairs
        stored = [row for i, row in enumerate(stored) if i % 7]
        for k in (0, 1, 2, 3, 5, 9):  # any k: pairs() runs in memory, beyond the index k too
            got = [pair[:3] for pair in db.pairs(k=k)]
            assert len(got) == len(set(got))
            assert set(got) == brute_pairs(stored, k)
            assert list(db.clusters(k=k)) == brute_clusters(stored, k)
            leaders = list(db.clusters_with_spread(k=k, mode="leaders"))
            assert [cluster.keys for cluster in leaders] == brute_leaders(stored, k)
            # Every member pairs with its leader: no chain reaches past the radius.
            fingerprint_of = dict(stored)
            assert all(
                (fingerprint_of[cluster.keys[0]] ^ fingerprint_of[member]).bit_count() <= k
                for cluster in leaders
                for member in cluster.keys
            )
        everyone = list(db.clusters(singletons=True))
        assert sorted(key for group in everyone for key in group) == sorted(key for key, _ in stored)


def test_first_added_key_leads_its_cluster_even_after_replacement(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add_many([("first", 0), ("second", 1), ("third", 3)])
        db.add("first", 0, meta={"replaced": True})  # a replacement keeps its place
        assert list(db.clusters(k=3)) == [["first", "second", "third"]]
        assert list(db.clusters()) == [["first", "second", "third"]]  # the default threshold
        assert ("first", "second", 1) in {pair[:3] for pair in db.pairs(k=3)}


def test_keys_read_by_one_scan_name_every_pair_right(db_path, monkeypatch) -> None:
    """Large outputs read all keys in one scan; the pairs and clusters must be the same."""
    from simdb.database import _KeyNames

    monkeypatch.setattr(_KeyNames, "SCAN_SHARE", 10**9)  # always the scan of all documents
    rng = random.Random(9)
    stored = [(f"k{i}", fp) for i, fp in enumerate(clustered(200, rng, spread=2, bases=12))]
    with simdb.open(db_path) as db:
        db.add_many(stored)
        assert {pair[:3] for pair in db.pairs(k=3)} == brute_pairs(stored, 3)
        assert list(db.clusters(k=3)) == brute_clusters(stored, 3)


@pytest.mark.parametrize("scan_share", [1, 10**9], ids=["look-up", "scan"])
def test_documents_removed_after_the_fingerprints_were_read_have_no_key(db_path, monkeypatch, scan_share: int) -> None:
    """pairs() reads fingerprints first and keys later; a removal in between must not look
    like damage: the removed document simply has no key, and its pairs are left out."""
    import numpy as np

    from simdb.database import _KeyNames

    monkeypatch.setattr(_KeyNames, "SCAN_SHARE", scan_share)
    with simdb.open(db_path) as db:
        db.add_many([("a", 0), ("b", 1), ("c", 3), ("d", 2**63)])
        ids, _ = db.fingerprint_arrays()
        db.remove("c")
        assert _KeyNames(db, ids).fetch(np.arange(4)) == ["a", "b", None, "d"]
