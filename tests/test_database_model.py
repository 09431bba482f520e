"""Model-based tests: a Database beside a plain dict, through add, replace, remove, query,
compact, close and reopen; every query must equal a brute-force Hamming scan."""

from __future__ import annotations

import random
import shutil
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule

import simdb
from tests.conftest import brute_force_query, flip_bits
from tests.test_minhash import ref_similarity

K = 3
fingerprints = st.integers(min_value=0, max_value=2**64 - 1)
storable_ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what msgpack can hold


def near(base: int, seed: int, distance: int) -> int:
    return flip_bits(base, distance, random.Random(seed))


class DatabaseBesideDict(RuleBasedStateMachine):
    keys = Bundle("keys")

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="simdb-model-")
        self.db = simdb.open(self.directory + "/db", k=K, map_size=1 << 20)
        self.model: dict[str, int] = {}
        self.meta: dict[str, object] = {}
        self.texts: dict[str, str] = {}  # keys stored from text, which carry a sketch

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def anchor(self, seed: int) -> int:
        """A stored fingerprint (or a random one), so that queries and adds cluster."""
        if self.model and seed % 4:
            return sorted(self.model.values())[seed % len(self.model)]
        return random.Random(seed).getrandbits(64)

    @rule(
        target=keys,
        key=st.text(min_size=1, max_size=12).filter(lambda s: s < "\ud800" or True),
        seed=st.integers(0, 10**6),
        distance=st.integers(0, 5),
        meta=st.none() | storable_ints | st.dictionaries(st.text(max_size=3), storable_ints, max_size=2),
    )
    def add(self, key: str, seed: int, distance: int, meta: object) -> str:
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            key = "k" + str(seed)
        fp = near(self.anchor(seed), seed, distance)
        self.db.add(key, fp, meta=meta)
        self.model[key] = fp
        self.meta[key] = meta
        self.texts.pop(key, None)
        return key

    @rule(
        target=keys,
        key=st.sampled_from(["a", "b", "t1", "t2", "t3"]),
        words=st.lists(st.sampled_from(["w1", "w2", "w3", "w4", "w5", "w6", "."]), max_size=8),
    )
    def add_text(self, key: str, words: list[str]) -> str:
        text = " ".join(words)
        self.db.add(key, text=text)
        fingerprinter = self.db.fingerprinter
        assert fingerprinter is not None
        self.model[key] = fingerprinter.fingerprint(text)
        self.meta[key] = None
        self.texts[key] = text
        return key

    @rule(
        items=st.lists(
            st.tuples(
                st.sampled_from(["a", "b", "c", "d", "e", "f", "é", "x" * 600]),
                st.integers(0, 10**6),
                st.integers(0, 4),
            ),
            max_size=8,
        )
    )
    def add_many(self, items: list[tuple[str, int, int]]) -> None:
        rows = [(key, near(self.anchor(seed), seed, d)) for key, seed, d in items]
        self.db.add_many(rows, batch_size=3)
        for key, fp in rows:
            self.model[key] = fp
            self.meta[key] = None
            self.texts.pop(key, None)

    @rule(key=keys)
    def replace(self, key: str) -> None:
        fp = random.Random(key).getrandbits(64) ^ self.model.get(key, 0)
        self.db.add(key, fp)
        self.model[key] = fp
        self.meta[key] = None
        self.texts.pop(key, None)

    @rule(key=keys)
    def remove(self, key: str) -> None:
        assert self.db.remove(key) == (key in self.model)
        self.model.pop(key, None)
        self.meta.pop(key, None)
        self.texts.pop(key, None)

    @rule(seed=st.integers(0, 10**6), distance=st.integers(0, 6))
    def query(self, seed: int, distance: int) -> None:
        probe = near(self.anchor(seed), seed, distance)
        for k in range(K + 1):
            found = self.db.query(probe, k=k)
            assert sorted((m.key, m.distance) for m in found) == brute_force_query(self.model, probe, k)
            assert [m.distance for m in found] == sorted(m.distance for m in found)
            for match in found:
                assert match.fingerprint == self.model[match.key] and match.meta == self.meta[match.key]

    @rule(seeds=st.lists(st.integers(0, 10**6), max_size=5))
    def query_many(self, seeds: list[int]) -> None:
        probes = [near(self.anchor(s), s, s % 5) for s in seeds]
        results = self.db.query_many(probes, k=K)
        assert len(results) == len(probes)
        for probe, found in zip(probes, results):
            assert sorted((m.key, m.distance) for m in found) == brute_force_query(self.model, probe, K)

    @rule()
    def compact(self) -> None:
        self.db.compact()

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self.db = simdb.open(self.directory + "/db")

    @invariant()
    def contents_agree(self) -> None:
        assert len(self.db) == len(self.model)
        assert {d.key: d.fingerprint for d in self.db.items()} == self.model
        assert self.db.stats()["sketch_count"] == len(self.texts)

    @rule()
    def pairs_use_the_sketches_of_text_documents(self) -> None:
        fingerprinter = self.db.fingerprinter
        for pair in self.db.pairs(threshold=0.5):
            if fingerprinter is not None and pair.key_a in self.texts and pair.key_b in self.texts:
                a = fingerprinter.fingerprint_and_sketch(self.texts[pair.key_a])
                b = fingerprinter.fingerprint_and_sketch(self.texts[pair.key_b])
                assert pair.similarity == ref_similarity(fingerprinter.kind, a, b)

    @precondition(lambda self: len(self.model) % 3 == 0)
    @invariant()
    def check_is_clean(self) -> None:
        report = self.db.check()
        assert report, report.problems


DatabaseBesideDict.TestCase.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestDatabaseBesideDict = DatabaseBesideDict.TestCase


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["random", "clustered", "identical"]),
    seed=st.integers(0, 2**32),
    count=st.integers(1, 300),
    blocks=st.sampled_from([None, 4, 6]),
)
def test_query_equals_brute_force(tmp_path_factory, kind: str, seed: int, count: int, blocks: int | None) -> None:
    from tests.conftest import clustered

    rng = random.Random(seed)
    if kind == "random":
        fps = [rng.getrandbits(64) for _ in range(count)]
    elif kind == "clustered":
        fps = clustered(count, rng, spread=4)
    else:
        fps = [rng.getrandbits(64)] * count
    stored = {f"d{i}": fp for i, fp in enumerate(fps)}
    with simdb.open(tmp_path_factory.mktemp("q") / "db", k=K, blocks=blocks) as db:
        db.add_many(stored.items(), batch_size=97)
        probes = [flip_bits(rng.choice(fps), rng.randint(0, 4), rng) for _ in range(20)] + [rng.getrandbits(64)]
        many = db.query_many(probes)
        for probe, batch_result in zip(probes, many):
            for k in range(K + 1):
                single = db.query(probe, k=k)
                assert sorted((m.key, m.distance) for m in single) == brute_force_query(stored, probe, k)
            assert sorted((m.key, m.distance) for m in batch_result) == brute_force_query(stored, probe, K)
