"""Text in the database: the fingerprint settings are stored once and always used."""

from __future__ import annotations

import pytest

import simdb

TEXT = "The quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill."
NEAR = TEXT.replace("warm", "sunny")


def test_text_uses_the_stored_settings(db_path) -> None:
    chosen = simdb.Fingerprinter(features="word", stopwords=None, kind="simhash", weights="tf")
    with simdb.open(db_path, fingerprinter=chosen) as db:
        db.add("fox", text=TEXT)
        assert db.get("fox").fingerprint == chosen.fingerprint(TEXT) != simdb.simhash(TEXT)
    with simdb.open(db_path) as db:  # settings come back from the database
        assert db.fingerprinter == chosen
        assert [m.key for m in db.query(text=TEXT, k=0)] == ["fox"]
        distance = (chosen.fingerprint(NEAR) ^ chosen.fingerprint(TEXT)).bit_count()
        assert [(m.key, m.distance) for m in db.query(text=NEAR)] == ([("fox", distance)] if distance <= 3 else [])
        assert [[m.key for m in found] for found in db.query_many(texts=[TEXT, "unrelated words here"], k=0)] == [
            ["fox"],
            [],
        ]


def test_other_explicit_settings_are_refused(db_path) -> None:
    simdb.open(db_path, fingerprinter=simdb.Fingerprinter(features="word", kind="simhash", weights="tf")).close()
    with pytest.raises(simdb.ConfigMismatchError, match="features='char'.*uses.*features='word'"):
        simdb.open(db_path, fingerprinter=simdb.Fingerprinter(features="char", kind="simhash", weights="tf"))
    simdb.open(
        db_path, fingerprinter=simdb.Fingerprinter(features="word", kind="simhash", weights="tf")
    ).close()  # the same is fine


def test_a_fingerprint_only_database_takes_settings_once(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add("n", 12345)
        assert db.fingerprinter is None
    chosen = simdb.Fingerprinter(features="char", ngram=4, kind="simhash", weights="tf")
    with simdb.open(db_path, fingerprinter=chosen) as db:  # given the first time: stored
        db.add("t", text=TEXT)
    with simdb.open(db_path) as db:
        assert db.fingerprinter == chosen
    with pytest.raises(simdb.ConfigMismatchError):
        simdb.open(db_path, fingerprinter=simdb.Fingerprinter(kind="simhash", weights="tf"))


def test_first_text_without_settings_stores_the_defaults(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add("t", text=TEXT)
        assert db.get("t").fingerprint == simdb.Fingerprinter(kind="minhash").fingerprint(TEXT)
    with simdb.open(db_path) as db:
        assert db.fingerprinter == simdb.Fingerprinter()
        assert db.fingerprinter.kind == "minhash" and db.stats()["sketches"]


def test_read_only_without_settings_cannot_fingerprint(db_path) -> None:
    simdb.open(db_path).close()
    with simdb.open(db_path, readonly=True) as db:
        with pytest.raises(simdb.FingerprinterError, match="no fingerprint settings"):
            db.query(text=TEXT)


def test_fitted_idf_settings_round_trip(db_path) -> None:
    corpus = [TEXT, NEAR, "a completely different sentence about databases and disks", "the the the"]
    fitted = simdb.Fingerprinter(kind="simhash", weights="tf").fit_idf(corpus)
    with simdb.open(db_path, fingerprinter=fitted) as db:
        db.add_texts((f"d{i}", text) for i, text in enumerate(corpus))
    with simdb.open(db_path) as db:
        assert db.fingerprinter == fitted
        assert db.get("d0").fingerprint == fitted.fingerprint(TEXT)


def test_fingerprint_and_text_together_are_refused(db_path) -> None:
    with simdb.open(db_path) as db:
        with pytest.raises(simdb.InvalidInputError, match="both"):
            db.add("x", 1, text=TEXT)
        with pytest.raises(simdb.InvalidInputError, match="no fingerprint"):
            db.add("x")


def test_only_64_bit_settings_fit_the_index(db_path) -> None:
    with pytest.raises(simdb.InvalidInputError, match="128-bit"):
        simdb.open(db_path, fingerprinter=simdb.Fingerprinter(bits=128, kind="simhash", weights="tf"))


@pytest.mark.parametrize("text", ["", "!!! ... ???", "word", "\ud800 broken surrogate"])
def test_edge_case_texts_are_stored(db_path, text: str) -> None:
    with simdb.open(db_path) as db:
        db.add("edge", text=text)
        assert db.get("edge").fingerprint == simdb.Fingerprinter().fingerprint(text)


def test_a_100_mb_text_is_fingerprinted_and_stored(db_path) -> None:
    import tracemalloc

    text = "lorem ipsum dolor sit amet consectetur adipiscing elit " * (100 * 2**20 // 56)
    with simdb.open(db_path) as db:
        tracemalloc.start()
        db.add("big", text=text)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert db.get("big").fingerprint == simdb.Fingerprinter().fingerprint(text)
    assert peak < 64 * 2**20  # streamed: far below the text's own 100 MB


@pytest.mark.parametrize("workers", [None, 2])
def test_add_texts_streams_with_keys_and_meta_in_step(db_path, workers: int | None) -> None:
    import random

    rng = random.Random(workers or 1)
    vocabulary = [f"w{i}" for i in range(400)]
    rows = [(f"doc-{i}", " ".join(rng.choices(vocabulary, k=rng.randint(0, 60))), {"n": i}) for i in range(2_500)]
    batches: list[int] = []
    with simdb.open(db_path) as db:
        result = db.add_texts(
            iter(rows), workers=workers, batch_size=600, on_batch=lambda total: batches.append(total.added)
        )
        assert result.added == len(rows) and batches == [600, 1200, 1800, 2400, 2500]
        for key, text, meta in rows:
            assert db.get(key) == simdb.Document(key, simdb.Fingerprinter().fingerprint(text), meta)


def test_add_texts_rejects_a_bad_item_naming_it(db_path) -> None:
    with simdb.open(db_path) as db:
        with pytest.raises(simdb.InvalidInputError, match="item 1"):
            db.add_texts([("a", "text"), ("b", 42)], batch_size=10)
        assert len(db) == 0


class _Unreadable(Exception):
    pass


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("failing", ["bad item", "iterator"])
def test_a_failure_mid_stream_keeps_the_batches_before_it_whatever_the_workers(
    tmp_path, workers: int, failing: str
) -> None:
    """A bad item (or the items' own iterator raising) rejects the batch it falls in and
    every batch before it is stored, as add_many does.  With a pool of workers, which reads
    ahead of the batches, the error came out before any of them was committed: 0 stored
    where one worker stored 2,100 (a probe found it)."""

    def items():
        for number in range(300):
            if number == 250:
                if failing == "iterator":
                    raise _Unreadable("the source broke")
                yield ("bad", 5)
            yield (f"doc-{number}", f"text number {number} of the stream, in words")

    expected = simdb.InvalidInputError if failing == "bad item" else _Unreadable
    with simdb.open(tmp_path / "db") as db:
        with pytest.raises(expected):
            db.add_texts(items(), workers=workers, batch_size=70)
        assert sorted(db.keys()) == sorted(f"doc-{number}" for number in range(210))


def test_a_database_keeps_the_text_pipeline_version_it_was_made_with(db_path) -> None:
    # Version 1 is what a database made before pipeline versions stored (from_dict reads
    # settings without the field as version 1; tests/test_fingerprint.py checks that).
    hyphenated = TEXT.replace("windowsill", "win\u00addow\u00adsill").replace("quick", "qu\u00adick")
    with simdb.open(db_path, fingerprinter=simdb.Fingerprinter(normalization=1)) as db:
        db.add("fox", text=hyphenated)
    with simdb.open(db_path) as db:
        assert db.fingerprinter == simdb.Fingerprinter(normalization=1)
        [match] = db.query(text=hyphenated, k=0)
        assert match.key == "fox" and match.similarity == 1.0
        assert all(m.similarity < 1.0 for m in db.query(text=TEXT))  # the soft hyphens split words
    # The same settings given again, the version left out, take the database's version;
    # only a version given explicitly can disagree.
    with simdb.open(db_path, fingerprinter=simdb.Fingerprinter()) as db:
        assert db.fingerprinter.normalization == 1
    with pytest.raises(simdb.ConfigMismatchError, match="normalization=2.*normalization=1"):
        simdb.open(db_path, fingerprinter=simdb.Fingerprinter(normalization=2))
    with pytest.raises(simdb.ConfigMismatchError, match="features='char'"):
        simdb.open(db_path, fingerprinter=simdb.Fingerprinter(features="char"))
    other = db_path.parent / "new"
    with simdb.open(other) as db:  # a new database takes the current version
        db.add("fox", text=hyphenated)
        assert db.fingerprinter.normalization == simdb.features.NORMALIZATION == 8
        assert [(m.key, m.similarity) for m in db.query(text=TEXT)] == [("fox", 1.0)]


def test_a_query_by_a_text_without_features_matches_nothing(db_path) -> None:
    """Featureless texts never pair; a query by one listed every stored featureless
    document (fingerprint 0, distance 0) at similarity 0.0 (a probe found it)."""
    with simdb.open(db_path) as db:
        db.add_texts([("empty", ""), ("dots", " \t "), ("fox", TEXT)])  # blank: featureless in every version
        for query in ("", "\t", " \n"):
            assert db.query(text=query) == [] and db.query(text=query, k=5) == []
            assert db.query(text=query, threshold=0.1) == []
        assert [[m.key for m in found] for found in db.query_many(texts=["  ", TEXT])] == [[], ["fox"]]
        assert {m.key for m in db.query(0)} >= {"empty", "dots"}  # a bare fingerprint 0 still finds them


def test_a_version_3_database_keeps_its_stop_words_when_opened_with_default_settings(tmp_path) -> None:
    """Version 4 keeps negations out of the English stop words; a database made at version
    3 (a development build) with stopwords="english" goes on dropping them, so new texts
    fingerprint as its stored ones did."""
    positive, negative = "you should not take the pills with food", "you should take the pills with food"
    with simdb.open(tmp_path / "v3", fingerprinter=simdb.Fingerprinter(stopwords="english", normalization=3)) as db:
        db.add("stored", text=positive)
    with simdb.open(tmp_path / "v3", fingerprinter=simdb.Fingerprinter(stopwords="english")) as db:
        assert db.fingerprinter.normalization == 3
        assert [match.key for match in db.query(text=negative, k=0)] == ["stored"]
    with simdb.open(tmp_path / "v4", fingerprinter=simdb.Fingerprinter(stopwords="english")) as db:
        db.add("stored", text=positive)
        assert db.query(text=negative, k=0) == []
