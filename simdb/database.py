"""The database API: :func:`open` and :class:`Database`.

Sub-databases of the one LMDB environment:

- ``meta``: the configuration (format version, bits, k, block plan), the fingerprint
  settings, and the next document id;
- ``docs``: document id (8 bytes big-endian) -> msgpack ``[key, fingerprint, meta]``;
- ``keys``: the key index, the 16-byte digest of the UTF-8 key (see :mod:`simdb.keys`) ->
  document id;
- ``table.NN``: one per permutation table; key = permuted fingerprint and document id, 16
  bytes big-endian, value empty.  Putting the id in the key (instead of LMDB duplicate
  values) keeps every entry a plain, unique, fixed-size key: identical fingerprints under
  different keys stay separate entries, deletion names one exact key, and a prefix scan is one
  contiguous key range.

Every change to a document touches ``docs``, ``keys`` and all tables in one write
transaction, so no reader ever sees a document without its table entries, or the reverse.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

import lmdb
import numpy as np

from simdb import codec
from simdb.errors import (
    ConfigMismatchError,
    CorruptDatabaseError,
    DistanceError,
    FingerprinterError,
    FormatVersionError,
    InvalidInputError,
    InvalidKeyError,
    NotADatabaseError,
)
from simdb.keys import (
    FINGERPRINT_LIMIT,
    MAX_KEY_BYTES,
    TABLE_KEY_BYTES,
    check_fingerprint,
    check_key,
    decode_id,
    decode_table_keys,
    describe,
    encode_id,
    encode_id_range,
    index_key,
    index_key_order,
    index_keys,
    iterate,
    sorted_table_keys,
    table_entry_pairs,
    table_key,
)
from simdb.plan import BITS, TablePlan
from simdb.storage import MAX_MAP_SIZE, Storage

if TYPE_CHECKING:
    from simdb.fingerprint import Fingerprinter

FORMAT_VERSION = 1
DEFAULT_K = 3
DEFAULT_BATCH_SIZE = 100_000
#: query_many reads whole tables instead of seeking once per query when the batch has at
#: least 1/MERGE_COST_RATIO as many queries as there are documents (measured crossover, see
#: bench/bench_core.py --crossover).
MERGE_COST_RATIO = 5

META = b"meta"
DOCS = b"docs"
KEYS = b"keys"
CONFIG_KEY = b"config"
FINGERPRINTER_KEY = b"fingerprinter"
NEXT_ID_KEY = b"next_id"
#: Document ids are 8 bytes big-endian; the stored next id stays below 2**63, beyond any real
#: count of documents, so a valid one leaves room for any batch and anything higher is damage.
ID_LIMIT = 1 << 63
_RESTORE = "restore it from a backup or an export"
_RUN_CHECK = "run check(); restore from a backup or an export"


class Match(NamedTuple):
    """One query result."""

    key: str
    fingerprint: int
    distance: int
    meta: Any


class Document(NamedTuple):
    """One stored document."""

    key: str
    fingerprint: int
    meta: Any


class Skip(NamedTuple):
    """A document that ``if_new=True`` left out, and the stored key it duplicates."""

    key: str
    duplicate_of: str
    distance: int


@dataclass
class AddResult:
    """What an add did: counts of new and replaced keys, and the skipped near-duplicates."""

    added: int = 0
    replaced: int = 0
    skipped: list[Skip] = field(default_factory=list)

    def merge(self, other: AddResult) -> None:
        self.added += other.added
        self.replaced += other.replaced
        self.skipped.extend(other.skipped)


@dataclass
class CheckReport:
    """The result of :meth:`Database.check`; true when the database is consistent."""

    documents: int
    table_entries: int
    problems: list[str]

    def __bool__(self) -> bool:
        return not self.problems


@dataclass
class CompactResult:
    bytes_before: int
    bytes_after: int


@dataclass
class _Batch:
    """A validated batch in columns: keys, key-index keys, fingerprints, encoded records."""

    keys: list[str]
    index_keys: list[bytes]
    fingerprints: list[int]
    records: list[bytes]
    #: Positions in index-key order and the index keys in that order, once computed.
    key_order: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def prepare(cls, items: Iterable[Sequence[Any]], first_position: int) -> _Batch:
        """Validate and encode items; raises on the first bad one, naming its position."""
        rows = list(items)
        return cls._prepare_plain(rows) or cls._prepare_each(rows, first_position)

    @classmethod
    def _prepare_plain(cls, rows: list[Any]) -> _Batch | None:
        """The common case checked column-wise in C-level passes: tuples of a str key and an
        int fingerprint.  None at the first doubt; :meth:`_prepare_each` then finds and names
        the culprit."""
        if not rows or set(map(type, rows)) != {tuple} or not set(map(len, rows)) <= {2, 3}:
            return None
        keys = [row[0] for row in rows]
        fingerprints = [row[1] for row in rows]
        if set(map(type, keys)) != {str} or set(map(type, fingerprints)) != {int}:
            return None
        # A key longer than the limit in characters is too long in bytes: refuse it before
        # encoding, so a huge key is never copied.
        if min(fingerprints) < 0 or max(fingerprints) >= FINGERPRINT_LIMIT or not 0 < min(map(len, keys)) <= max(map(len, keys)) <= MAX_KEY_BYTES:
            return None
        try:
            encoded = list(map(str.encode, keys))
        except UnicodeEncodeError:
            return None
        if max(map(len, encoded)) > MAX_KEY_BYTES:
            return None
        metas = None if set(map(len, rows)) == {2} else [row[2] if len(row) == 3 else None for row in rows]
        records = codec.pack_documents(keys, fingerprints, metas)
        return None if records is None else cls(keys, index_keys(encoded), fingerprints, records)

    @classmethod
    def _prepare_each(cls, rows: list[Any], first_position: int) -> _Batch:
        """Item by item: lists, numpy integers and other accepted forms, and the precise
        error for a bad item."""
        batch = cls([], [], [], [])
        for position, item in enumerate(rows, first_position):
            if not isinstance(item, (tuple, list)) or not 2 <= len(item) <= 3:
                raise InvalidInputError(
                    f"item {position} ({describe(item)}) is not (key, fingerprint) or (key, fingerprint, meta)"
                )
            key = item[0]
            fingerprint = check_fingerprint(item[1])
            batch.index_keys.append(index_key(check_key(key)))
            batch.keys.append(key)
            batch.fingerprints.append(fingerprint)
            batch.records.append(codec.pack_document(key, fingerprint, item[2] if len(item) == 3 else None))
        return batch

    def once_per_key(self) -> tuple[_Batch, int]:
        """The batch with each key once, where it first occurs, holding its last occurrence's
        value; and how many repeats were folded in.  That is what adding the items one by one
        would leave, whatever the batch size.  O(n log n) in numpy."""
        order, ordered = index_key_order(self.index_keys)  # equal keys adjacent, in batch order
        repeats = (ordered[:-1] == ordered[1:]).all(axis=1)  # sorted item i + 1 repeats item i
        if not repeats.any():
            self.key_order = (order, ordered)
            return self, 0
        starts = np.flatnonzero(np.concatenate([[True], ~repeats]))
        ends = np.append(starts[1:], len(order)) - 1
        last_of = dict(zip(order[starts].tolist(), order[ends].tolist()))
        firsts = sorted(last_of)
        folded = _Batch(
            [self.keys[i] for i in firsts],
            [self.index_keys[i] for i in firsts],
            [self.fingerprints[last_of[i]] for i in firsts],
            [self.records[last_of[i]] for i in firsts],
        )
        return folded, len(self.keys) - len(firsts)

    def single(self, position: int) -> _Batch:
        return self.take([position])

    def take(self, positions: Sequence[int]) -> _Batch:
        """The batch of the items at ``positions``, in that order.  O(len(positions))."""
        return _Batch(
            [self.keys[i] for i in positions],
            [self.index_keys[i] for i in positions],
            [self.fingerprints[i] for i in positions],
            [self.records[i] for i in positions],
        )


def open(  # noqa: A001 - the public name is simdb.open, as in the spec
    path: str | os.PathLike[str],
    *,
    k: int | None = None,
    blocks: int | None = None,
    readonly: bool = False,
    fingerprinter: Fingerprinter | None = None,
    create: bool = True,
    map_size: int | None = None,
) -> Database:
    """Open the database at ``path``, creating it if missing (unless ``readonly`` or
    ``create=False``).

    ``k`` (default 3 at creation) is the largest distance answered with no false negatives;
    ``blocks`` is the block count m > k, by default the smallest giving every table about
    log2(1M) leading bits or more.  Both are stored at creation; giving a different value later
    raises :class:`ConfigMismatchError`.  ``fingerprinter`` fixes the text settings the same
    way.  ``map_size`` is the initial LMDB map size; the map grows by itself when needed.
    """
    return Database(path, k=k, blocks=blocks, readonly=readonly, fingerprinter=fingerprinter, create=create, map_size=map_size)


def _check_open_arguments(
    path: object, k: object, blocks: object, fingerprinter: object, map_size: object
) -> None:
    """Refuse arguments of the wrong type or range before anything is opened.  O(1)."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidInputError(f"path {describe(path)} is a {type(path).__name__}, not a str or path")
    for name, value, lowest in (("k", k, 0), ("blocks", blocks, 1), ("map_size", map_size, 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < lowest):
            raise InvalidInputError(f"{name}={describe(value)} is not an int >= {lowest}")
    if isinstance(map_size, int) and map_size > MAX_MAP_SIZE:
        raise InvalidInputError(f"map_size={map_size} is over the largest map simdb can address, {MAX_MAP_SIZE} (2**44)")
    if fingerprinter is None:
        return
    from simdb.fingerprint import Fingerprinter

    if not isinstance(fingerprinter, Fingerprinter):
        raise InvalidInputError(f"fingerprinter={describe(fingerprinter)} is not a Fingerprinter", "make one with simdb.Fingerprinter(...)")
    if fingerprinter.bits != BITS:
        raise InvalidInputError(
            f"fingerprinter {fingerprinter!r} makes {fingerprinter.bits}-bit fingerprints; the index stores {BITS}-bit ones",
            f"use bits={BITS}",
        )


class Database:
    """A persistent SimHash index.  Safe to share between threads; many processes may read
    while one writes.  Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        k: int | None = None,
        blocks: int | None = None,
        readonly: bool = False,
        fingerprinter: Fingerprinter | None = None,
        create: bool = True,
        map_size: int | None = None,
    ) -> None:
        _check_open_arguments(path, k, blocks, fingerprinter, map_size)
        if create and not readonly and not Storage.exists(path):
            # A new database's plan is checked before its directory is made, so that a
            # refused open leaves nothing behind for a later open to pick up.
            TablePlan.create(DEFAULT_K if k is None else k, blocks)
        self._storage = Storage.open(path, readonly=readonly, create=create, names=[META], map_size=map_size)
        try:
            self._setup(k, blocks, fingerprinter, create)
        except BaseException:
            self._storage.close()
            raise

    # -- configuration -------------------------------------------------------------------

    def _setup(self, k: int | None, blocks: int | None, fingerprinter: Fingerprinter | None, create: bool) -> None:
        storage = self._storage
        self._requested: Fingerprinter | None = None  # given to a read-only handle before any were stored
        stored = self._read_config()
        if stored is None:
            if storage.readonly or not create:
                hint = "create it by opening it writable" if storage.readonly else "create it with create=True"
                raise NotADatabaseError(f"{storage.path} holds no simdb database yet", hint)
            self._use_plan(TablePlan.create(DEFAULT_K if k is None else k, blocks))
            if not storage.write(lambda txn: self._initialise(txn, fingerprinter)):
                stored = self._read_config()  # another process created it first: theirs stands
        if stored is not None:
            self._use_plan(self._plan_from_config(stored, k, blocks))
        self._fingerprinter = self._settle_fingerprinter(fingerprinter)

    def _use_plan(self, plan: TablePlan) -> None:
        self.plan = plan
        self._table_names = [t.name.encode() for t in plan.tables]
        self._storage.reopen_with([META, DOCS, KEYS, *self._table_names])

    def _read_config(self) -> dict[str, Any] | None:
        with self._storage.read() as txn:
            try:
                meta = self._storage.db(META)
            except NotADatabaseError:
                if txn.stat(self._storage.env.open_db(None))["entries"]:
                    raise NotADatabaseError(f"{self._storage.path} holds an LMDB file that simdb did not write") from None
                return None
            raw = txn.get(CONFIG_KEY, db=meta)
        if raw is None:
            raise NotADatabaseError(f"{self._storage.path} has no simdb configuration", "is it a simdb database?")
        return self._parse_config(raw)

    def _parse_config(self, raw: bytes | None) -> dict[str, Any]:
        """Decode the stored configuration: a dict with a format_version, else
        CorruptDatabaseError.  O(size)."""
        config = codec.unpack(raw, "configuration", self.path)
        if not isinstance(config, dict):
            raise self._damaged("configuration", f"is {describe(config)}, not a dict", hint=_RESTORE)
        if "format_version" not in config:
            raise self._damaged("configuration", "has no format_version", field="format_version", hint=_RESTORE)
        return config

    def _plan_from_config(self, config: dict[str, Any], k: int | None, blocks: int | None) -> TablePlan:
        """The plan stored in ``config``, checked, then compared with the ``k`` and ``blocks``
        the caller gave.  Damage is a CorruptDatabaseError naming the field (the caller's
        arguments were checked before anything was opened); a newer format version is a
        FormatVersionError.  O(tables)."""
        path = self._storage.path
        version = config["format_version"]
        if type(version) is int and version > FORMAT_VERSION:
            raise FormatVersionError(
                f"{path} has format version {version}; this simdb reads up to {FORMAT_VERSION}",
                "upgrade simdb",
            )
        if type(version) is not int or version != FORMAT_VERSION:
            raise self._damaged(
                "configuration",
                f"has an invalid format_version {describe(version)} (this simdb writes {FORMAT_VERSION})",
                field="format_version",
                hint=_RESTORE,
            )
        for name in ("k", "blocks", "bits"):
            if name not in config and name != "bits":
                raise self._damaged("configuration", f"has no {name}", field=name, hint=_RESTORE)
            if name in config and type(config[name]) is not int:
                fault = f"has {name}={describe(config[name])}, not an int"
                raise self._damaged("configuration", fault, field=name, hint=_RESTORE)
        try:
            plan = TablePlan.create(config["k"], config["blocks"], config.get("bits", BITS))
        except InvalidInputError as exc:
            raise self._damaged("configuration", f"is invalid: {exc.message}", hint=_RESTORE) from None
        described = plan.describe()
        differing = [key for key, value in described.items() if config.get(key) != value]
        if differing:
            raise self._damaged("block plan", "does not match its k and blocks", field=differing[0], hint=_RESTORE)
        for name, given, stored in (("k", k, plan.k), ("blocks", blocks, plan.blocks)):
            if given is not None and given != stored:
                raise ConfigMismatchError(
                    f"{name}={given} was given, but the database at {path} was created with {name}={stored}",
                    f"omit {name}, or export and import into a new database to change it",
                )
        return plan

    def _damaged(
        self, record: str, fault: str, *, field: str | None = None, hint: str = _RUN_CHECK
    ) -> CorruptDatabaseError:
        """The error for a damaged record of this database (metadata or a table): one line
        naming the record, the database and what is wrong, with the same in its fields."""
        return CorruptDatabaseError(
            f"the {record} stored in {self.path} {fault}", hint, path=self.path, record=record, field=field
        )

    def _read_next_id(self, txn: lmdb.Transaction[bytes]) -> int:
        """The stored next document id, checked: an int in [0, 2**63) above every stored id
        (a lower one would hand out ids in use).  Damage raises CorruptDatabaseError naming
        it.  Cost: one get and one cursor seek."""
        next_id = codec.unpack(txn.get(NEXT_ID_KEY, db=self._storage.db(META)), "next document id", self.path)
        if type(next_id) is not int or not 0 <= next_id < ID_LIMIT:
            raise self._damaged("next document id", f"is {describe(next_id)}, not an int in [0, 2**63)")
        cursor = txn.cursor(self._storage.db(DOCS))
        if cursor.last() and decode_id(cursor.key()) >= next_id:
            last = decode_id(cursor.key())
            raise self._damaged("next document id", f"is {next_id}, not above the last document id {last}")
        return next_id

    def _stored_fingerprinter(self, raw: bytes) -> Fingerprinter:
        """The fingerprint settings stored as ``raw``; damage is a CorruptDatabaseError (a
        database problem), not the InvalidInputError that the same settings given as an
        argument would raise.  O(size of the IDF table)."""
        from simdb.fingerprint import SETTINGS_VERSION, Fingerprinter

        settings = codec.unpack(raw, "fingerprint settings", self.path)
        version = settings.get("version") if isinstance(settings, dict) else None
        if type(version) is int and version > SETTINGS_VERSION:
            raise FormatVersionError(
                f"{self.path} has fingerprint settings version {version}; this simdb reads up to {SETTINGS_VERSION}",
                "upgrade simdb",
            )
        try:
            return Fingerprinter.from_dict(settings)
        except InvalidInputError as exc:
            raise self._damaged("fingerprint settings", f"are invalid: {exc.message}", hint=_RESTORE) from None

    def _initialise(self, txn: lmdb.Transaction[bytes], fingerprinter: Fingerprinter | None) -> bool:
        """Write the configuration and create the sub-databases, unless another process has
        done so since we looked (then return False and change nothing)."""
        storage = self._storage
        storage.create(txn, META)
        meta = storage.db(META)
        if txn.get(CONFIG_KEY, db=meta) is not None:
            return False
        for name in (DOCS, KEYS, *self._table_names):
            storage.create(txn, name)
        config = {"format_version": FORMAT_VERSION, **self.plan.describe()}
        txn.put(CONFIG_KEY, codec.pack(config, "configuration"), db=meta)
        txn.put(NEXT_ID_KEY, codec.pack(0, "next id"), db=meta)
        if fingerprinter is not None:
            txn.put(FINGERPRINTER_KEY, codec.pack(fingerprinter.to_dict(), "fingerprint settings"), db=meta)
        return True

    def _settle_fingerprinter(self, given: Fingerprinter | None) -> Fingerprinter | None:
        with self._storage.read() as txn:
            raw = txn.get(FINGERPRINTER_KEY, db=self._storage.db(META))
        if raw is None:
            if given is not None and not self._storage.readonly:
                return self._store_fingerprinter(given)
            # A read-only handle cannot store them: they are checked when text is first used.
            self._requested = given
            return None
        stored = self._stored_fingerprinter(raw)
        if given is not None and given != stored:
            raise ConfigMismatchError(
                f"fingerprinter {given!r} was given, but the database at {self._storage.path} uses {stored!r}",
                "omit fingerprinter= to use the stored settings",
            )
        return stored

    def _store_fingerprinter(self, fingerprinter: Fingerprinter, *, given: bool = True) -> Fingerprinter:
        """Store settings the first time text is used; never overwrite other settings.  If
        another process stored some first, they stand: an error if ``fingerprinter`` was
        given explicitly, else they are returned."""
        if self._storage.readonly:
            raise FingerprinterError(
                f"{self._storage.path} has no fingerprint settings and is open read-only",
                "add text once with a writable database, or pass fingerprints",
            )

        def store(txn: lmdb.Transaction[bytes]) -> Fingerprinter:
            meta = self._storage.db(META)
            raw = txn.get(FINGERPRINTER_KEY, db=meta)
            if raw is not None:  # another process got there first: theirs stand
                return self._stored_fingerprinter(raw)
            txn.put(FINGERPRINTER_KEY, codec.pack(fingerprinter.to_dict(), "fingerprint settings"), db=meta)
            return fingerprinter

        stored = self._storage.write(store)
        if given and stored != fingerprinter:
            raise ConfigMismatchError(
                f"fingerprinter {fingerprinter!r} was given, but {self._storage.path} now uses {stored!r}"
            )
        return stored

    @property
    def path(self) -> str:
        return str(self._storage.path)

    @property
    def k(self) -> int:
        return self.plan.k

    @property
    def readonly(self) -> bool:
        return self._storage.readonly

    @property
    def fingerprinter(self) -> Fingerprinter | None:
        """The stored text settings, or None if only fingerprints were ever given."""
        return self._fingerprinter

    def fingerprint(self, text: str) -> int:
        """Fingerprint ``text`` with the database's own settings (storing the defaults the
        first time, if none were given)."""
        return self._text_fingerprinter().fingerprint(text)

    def _text_fingerprinter(self) -> Fingerprinter:
        if self._fingerprinter is None:
            from simdb.fingerprint import Fingerprinter

            # Another process may have stored settings since this handle opened: they stand.
            requested = self._requested
            self._fingerprinter = self._settle_fingerprinter(requested) or self._store_fingerprinter(requested or Fingerprinter(), given=requested is not None)
        return self._fingerprinter

    def _resolve(self, fingerprint: object, text: str | None) -> int:
        if text is not None:
            if fingerprint is not None:
                raise InvalidInputError("both a fingerprint and text= were given", "give one of them")
            return self.fingerprint(text)
        if fingerprint is None:
            raise InvalidInputError("no fingerprint was given", "pass a fingerprint or text=")
        return check_fingerprint(fingerprint)

    def _check_k(self, k: int | None) -> int:
        if k is None:
            return self.plan.k
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise DistanceError(f"k={describe(k)} is not a distance (a non-negative int)")
        if k > self.plan.k:
            raise DistanceError(
                f"k={k} is above the index's k={self.plan.k}, which it cannot answer exactly",
                f"query with k <= {self.plan.k}, or rebuild the database with a larger k",
            )
        return k

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the environment.  Idempotent."""
        self._storage.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._storage.closed else f"k={self.plan.k}, blocks={self.plan.blocks}"
        return f"<simdb.Database {self.path!r} {state}>"

    # -- writing -------------------------------------------------------------------------

    def add(self, key: str, fingerprint: int | None = None, meta: Any = None, *, text: str | None = None, if_new: bool = False) -> AddResult:
        """Store one document, replacing any document under the same key.  With
        ``if_new=True`` the document is skipped if one within k bits is already stored."""
        return self.add_many([(key, self._resolve(fingerprint, text), meta)], if_new=if_new)

    def add_many(
        self,
        items: Iterable[Sequence[Any]],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        if_new: bool = False,
        on_batch: Callable[[AddResult], None] | None = None,
    ) -> AddResult:
        """Store ``(key, fingerprint)`` or ``(key, fingerprint, meta)`` items.  Each batch of
        ``batch_size`` items is validated whole and then written in one transaction; a bad
        item rejects its batch before anything of it is written.  ``on_batch`` is called with
        the running totals after each commit.  Cost: O(b log b) per batch of b plus LMDB puts;
        a batch into empty tables (a bulk load) is written in append mode."""
        _check_batch_size(batch_size)
        total = AddResult()
        iterator = iterate(items, "items")
        position = 0
        while True:
            batch = _Batch.prepare(islice(iterator, batch_size), position)
            if not batch.keys:
                return total
            position += len(batch.keys)
            total.merge(self._commit(batch, if_new))
            if on_batch is not None:
                on_batch(total)

    def add_texts(
        self,
        items: Iterable[Sequence[Any]],
        *,
        workers: int | None = None,
        batch_size: int = 10_000,
        if_new: bool = False,
        on_batch: Callable[[AddResult], None] | None = None,
    ) -> AddResult:
        """Fingerprint ``(key, text)`` or ``(key, text, meta)`` items with the database's
        settings and store them as :meth:`add_many` does, ``batch_size`` per transaction.
        With ``workers`` > 1 one process pool serves the whole input, and fingerprints are
        stored as they come: memory holds the texts in flight and one batch."""
        fingerprinter = self._text_fingerprinter()
        waiting: deque[tuple[Any, Any]] = deque()  # (key, meta) of texts sent, in order

        item_iterator = iterate(items, "items")

        def texts() -> Iterator[Any]:
            for position, item in enumerate(item_iterator):
                if not isinstance(item, (tuple, list)) or len(item) not in (2, 3) or not isinstance(item[1], (str, bytes, bytearray, memoryview)):
                    raise InvalidInputError(f"item {position} ({describe(item)}) is not (key, text) or (key, text, meta)")
                waiting.append((item[0], item[2] if len(item) == 3 else None))
                yield item[1]

        def rows() -> Iterator[tuple[Any, int, Any]]:
            for fingerprint in fingerprinter.iter_fingerprints(texts(), workers):
                key, meta = waiting.popleft()  # fingerprints come back in the order sent
                yield key, fingerprint, meta

        return self.add_many(rows(), batch_size=batch_size, if_new=if_new, on_batch=on_batch)

    def _commit(self, batch: _Batch, if_new: bool) -> AddResult:
        # Room for every table entry (a 16-byte key and its node) and the records, with slack
        # for half-full pages; growing up front avoids redoing a whole batch.
        reserve = sum(map(len, batch.records)) * 2 + len(batch.keys) * (len(self.plan.tables) + 2) * 64
        if if_new:
            return self._storage.write(lambda txn: self._store_if_new(txn, batch), reserve)
        unique, repeats = batch.once_per_key()
        result = self._storage.write(lambda txn: self._store(txn, unique), reserve)
        result.replaced += repeats  # a repeated key replaced its earlier value in this batch
        return result

    def _store(self, txn: lmdb.Transaction[bytes], batch: _Batch) -> AddResult:
        """Write a batch with unique keys: new keys get fresh ids, existing keys keep theirs
        and lose their old table entries."""
        storage = self._storage
        docs, keys_db, meta = storage.db(DOCS), storage.db(KEYS), storage.db(META)
        next_id = self._read_next_id(txn)
        result = AddResult()
        new_positions: list[int] = []
        changed_ids: list[int] = []
        changed_fps: list[int] = []
        if txn.stat(keys_db)["entries"]:
            for position, (key, key_index, fingerprint, record) in enumerate(zip(batch.keys, batch.index_keys, batch.fingerprints, batch.records)):
                found = self._lookup(txn, key, key_index)
                if found is None:
                    new_positions.append(position)
                    continue
                doc_id, old = found
                txn.put(encode_id(doc_id), record, db=docs)
                result.replaced += 1
                if old.fingerprint != fingerprint:
                    self._delete_table_entries(txn, doc_id, old.fingerprint)
                    changed_ids.append(doc_id)
                    changed_fps.append(fingerprint)
        else:  # nothing stored yet: every key is new, no lookups needed
            new_positions = list(range(len(batch.keys)))
        ids = np.concatenate([np.arange(next_id, next_id + len(new_positions), dtype=np.uint64), np.array(changed_ids, dtype=np.uint64)])
        fingerprints = np.array([batch.fingerprints[i] for i in new_positions] + changed_fps, dtype=np.uint64)
        if changed_ids:  # replaced ids are older than the new ones: restore id order
            order = np.argsort(ids, kind="stable")
            ids, fingerprints = ids[order], fingerprints[order]
        # The tables' keys are permuted and sorted on a helper thread (numpy releases the GIL)
        # while LMDB writes the documents, the key index and then each table in turn.
        with ThreadPoolExecutor(max_workers=1) as sorter:
            pending = [sorter.submit(sorted_table_keys, table.permute_array, fingerprints, ids) for table in self.plan.tables] if len(ids) else []
            self._put_new_documents(txn, batch, new_positions, next_id)
            for name, future in zip(self._table_names, pending):
                entries = future.result()
                self._put_sorted(txn, storage.db(name), table_entry_pairs(entries), entries[0].tobytes(), len(entries))
        txn.put(NEXT_ID_KEY, codec.pack(next_id + len(new_positions), "next id"), db=meta)
        result.added = len(new_positions)
        return result

    def _put_new_documents(self, txn: lmdb.Transaction[bytes], batch: _Batch, new_positions: list[int], next_id: int) -> None:
        """Records and key index entries for the new documents, ids from ``next_id`` on."""
        if not new_positions:
            return
        all_new = len(new_positions) == len(batch.keys)
        new_ids = encode_id_range(next_id, len(new_positions))
        records = batch.records if all_new else [batch.records[i] for i in new_positions]
        self._put_sorted(txn, self._storage.db(DOCS), zip(new_ids, records), new_ids[0], len(new_ids))
        if all_new and batch.key_order is not None:
            order, ordered = batch.key_order
        else:
            order, ordered = index_key_order([batch.index_keys[i] for i in new_positions])
        # The i-th new document gets id next_id + i; list its keys and ids in key order.
        sorted_ids = (order.astype(np.uint64) + np.uint64(next_id)).astype(">u8").view("V8").tolist()
        sorted_keys = np.ascontiguousarray(ordered).view("V16").ravel().tolist()
        self._put_sorted(txn, self._storage.db(KEYS), zip(sorted_keys, sorted_ids), sorted_keys[0], len(sorted_keys))

    def _store_if_new(self, txn: lmdb.Transaction[bytes], batch: _Batch) -> AddResult:
        """Store each item unless one within k bits is stored (or stored earlier in this
        batch); the checks and inserts share the one transaction, so two writers cannot both
        store near-duplicates of each other."""
        result = AddResult()
        for position, (key, key_index, fingerprint) in enumerate(zip(batch.keys, batch.index_keys, batch.fingerprints)):
            own = self._lookup(txn, key, key_index)
            found = self._probe(txn, fingerprint, self.plan.k)
            if own is not None:
                found.pop(encode_id(own[0]), None)  # a key never duplicates its own earlier version
            if found:
                best_id, distance = min(found.items(), key=lambda pair: (pair[1], pair[0]))
                result.skipped.append(Skip(key, self._record(txn, best_id)[0], distance))
            else:
                result.merge(self._store(txn, batch.single(position)))
        return result

    @staticmethod
    def _put_sorted(txn: lmdb.Transaction[bytes], db: lmdb._Database, pairs: Iterable[tuple[bytes, bytes]], first_key: bytes, count: int) -> None:
        """Put ``count`` (key, value) pairs with ascending unique keys, starting at
        ``first_key``, in LMDB's append mode when they all follow the last stored key (always
        so for a bulk load into an empty sub-database)."""
        if not count:
            return
        cursor = txn.cursor(db)
        append = not cursor.last() or cursor.key() < first_key
        consumed, added = cursor.putmulti(pairs, append=append, overwrite=not append)
        if added != count:
            raise CorruptDatabaseError(f"only {added} of {count} entries could be written; the batch was not stored")

    def _lookup(self, txn: lmdb.Transaction[bytes], key: str, key_index: bytes) -> tuple[int, Document] | None:
        """The id and document stored under ``key``, if any; the full key is compared, so a
        key index that disagrees with the documents is reported, never trusted."""
        raw_id = txn.get(key_index, db=self._storage.db(KEYS))
        if raw_id is None:
            return None
        document = Document(*self._record(txn, raw_id))
        if document.key != key:
            raise CorruptDatabaseError(f"the key index entry for {describe(key)} points at {describe(document.key)}", "run check()")
        return decode_id(raw_id), document

    def _delete_table_entries(self, txn: lmdb.Transaction[bytes], doc_id: int, fingerprint: int) -> None:
        for table, name in zip(self.plan.tables, self._table_names):
            txn.delete(table_key(table.permute(fingerprint), doc_id), db=self._storage.db(name))

    def _record(self, txn: lmdb.Transaction[bytes], raw_id: bytes) -> tuple[str, int, Any]:
        if len(raw_id) != 8:  # LMDB would refuse an empty key with an error of its own
            raise self._damaged("key index", f"holds a document id {describe(raw_id)} that is not 8 bytes long")
        raw = txn.get(raw_id, db=self._storage.db(DOCS))
        if raw is None:
            raise CorruptDatabaseError(f"document id {decode_id(raw_id)} is indexed but missing", "run check()")
        return codec.unpack_document(raw, raw_id)

    def remove(self, key: str) -> bool:
        """Remove the document under ``key``; returns whether there was one."""
        return self.remove_many([key]) == 1

    def remove_many(self, keys: Iterable[str], *, batch_size: int = DEFAULT_BATCH_SIZE) -> int:
        """Remove the documents under ``keys`` (absent keys are ignored), one transaction per
        batch; returns how many were removed.  Cost: O(tables) deletes per key."""
        _check_batch_size(batch_size)
        removed = 0
        remaining = iterate(keys, "keys")
        while batch := [(key, index_key(check_key(key))) for key in islice(remaining, batch_size)]:
            removed += self._storage.write(partial(self._delete, batch=batch))
        return removed

    def _delete(self, txn: lmdb.Transaction[bytes], batch: list[tuple[str, bytes]]) -> int:
        storage = self._storage
        removed = 0
        for key, key_index in batch:
            found = self._lookup(txn, key, key_index)
            if found is None:
                continue
            doc_id, document = found
            txn.delete(encode_id(doc_id), db=storage.db(DOCS))
            txn.delete(key_index, db=storage.db(KEYS))
            self._delete_table_entries(txn, doc_id, document.fingerprint)
            removed += 1
        return removed

    # -- reading -------------------------------------------------------------------------

    def _scan(
        self,
        cursor: lmdb.Cursor[bytes],
        name: bytes,
        low: bytes,
        bound: bytes,
        query: int,
        k: int,
        found: dict[bytes, int],
    ) -> bool:
        """Add to ``found`` the ids of entries in [low, bound) of table ``name`` within ``k``
        bits of ``query`` (all permuted alike: permutations preserve Hamming distance).
        Returns False when the table holds nothing at or after ``low``.  A matching entry
        that is not 16 bytes long raises CorruptDatabaseError.  Cost: one seek plus one step
        per candidate."""
        if not cursor.set_range(low):
            return False
        entry = cursor.key()
        while entry < bound:
            distance = (int.from_bytes(entry[:8], "big") ^ query).bit_count()
            if distance <= k:
                if len(entry) != TABLE_KEY_BYTES:
                    fault = f"holds a key {describe(entry)} of {len(entry)} bytes, not {TABLE_KEY_BYTES}"
                    raise self._damaged(name.decode(), fault)
                found[entry[8:]] = distance
            if not cursor.next():
                break
            entry = cursor.key()
        return True

    def _read_table(
        self, txn: lmdb.Transaction[bytes], name: bytes, *, every_key: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(permuted, id) uint64 arrays of every entry of table ``name``, in key order, read in
        one scan.  Keys of the wrong length raise CorruptDatabaseError naming the table: all
        those that change the total length, which is one comparison, or with ``every_key``
        (for :meth:`check`) any, at one more C-level pass.  O(n)."""
        db = self._storage.db(name)
        keys: Iterable[bytes] = txn.cursor(db).iternext(values=False)
        if every_key:
            keys = list(keys)
            if keys and set(map(len, keys)) != {TABLE_KEY_BYTES}:
                raise self._damaged(name.decode(), f"holds keys that are not {TABLE_KEY_BYTES} bytes long")
        joined = b"".join(keys)
        if len(joined) != TABLE_KEY_BYTES * txn.stat(db)["entries"]:
            raise self._damaged(name.decode(), f"holds keys that are not {TABLE_KEY_BYTES} bytes long")
        return decode_table_keys(joined)

    def _probe(self, txn: lmdb.Transaction[bytes], fingerprint: int, k: int) -> dict[bytes, int]:
        """Ids (8-byte) of stored fingerprints within ``k`` bits of one query, with their
        distances: one range scan per table over the query's leading bits."""
        found: dict[bytes, int] = {}
        for table, name in zip(self.plan.tables, self._table_names):
            query = table.permute(fingerprint)
            low = query & table.prefix_mask
            bound = low + table.prefix_span
            cursor = txn.cursor(self._storage.db(name))
            bound_bytes = bound.to_bytes(8, "big") if bound >> BITS == 0 else _PAST_END
            self._scan(cursor, name, low.to_bytes(8, "big"), bound_bytes, query, k, found)
        return found

    def _probe_many(self, txn: lmdb.Transaction[bytes], queries: np.ndarray, k: int) -> list[dict[bytes, int]]:
        """:meth:`_probe` for many queries: bounds are computed vectorised per table and the
        queries visit each table in key order, so successive seeks touch nearby pages."""
        found: list[dict[bytes, int]] = [{} for _ in range(len(queries))]
        for table, name in zip(self.plan.tables, self._table_names):
            permuted = table.permute_array(queries)
            lows = permuted & np.uint64(table.prefix_mask)
            order = np.argsort(lows, kind="stable")
            lows = lows[order]
            bounds = lows + np.uint64(table.prefix_span)  # wraps to 0 past the last prefix
            bound_bytes = bounds.astype(">u8").view("V8").tolist()
            for position in np.flatnonzero(bounds == 0).tolist():
                bound_bytes[position] = _PAST_END
            cursor = txn.cursor(self._storage.db(name))
            for index, low, bound, query in zip(order.tolist(), lows.astype(">u8").view("V8").tolist(), bound_bytes, permuted[order].tolist()):
                if not self._scan(cursor, name, low, bound, query, k, found[index]):
                    break  # no entries at or after this low, nor after the larger ones to come
        return found

    def _merge_many(self, txn: lmdb.Transaction[bytes], queries: np.ndarray, k: int) -> list[dict[bytes, int]]:
        """The batch form of :meth:`_probe_many` (Manku's batch queries): each table is read
        once in key order and merged with the sorted queries in numpy, instead of one seek
        per query.  Cost: O(n + q log q) per table for n stored and q queries."""
        query_ids: list[np.ndarray] = []
        doc_ids: list[np.ndarray] = []
        distances: list[np.ndarray] = []
        for table, name in zip(self.plan.tables, self._table_names):
            stored, ids = self._read_table(txn, name)
            permuted = table.permute_array(queries)
            lows = permuted & np.uint64(table.prefix_mask)
            starts = np.searchsorted(stored, lows, side="left")
            counts = np.searchsorted(stored, lows | np.uint64(table.prefix_span - 1), side="right") - starts
            owners = np.repeat(np.arange(len(queries)), counts)
            # Position of every candidate: its range's start plus its rank within the range.
            ranks = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            candidates = np.repeat(starts, counts) + ranks
            distance = np.bitwise_count(stored[candidates] ^ permuted[owners])
            near = distance <= k
            query_ids.append(owners[near])
            doc_ids.append(ids[candidates[near]])
            distances.append(distance[near])
        found: list[dict[bytes, int]] = [{} for _ in range(len(queries))]
        encoded = np.concatenate(doc_ids).astype(">u8").view("V8").tolist()
        for owner, doc_id, distance in zip(np.concatenate(query_ids).tolist(), encoded, np.concatenate(distances).tolist()):
            found[owner][doc_id] = distance  # a match found by several tables is kept once
        return found

    def _matches(self, txn: lmdb.Transaction[bytes], found: dict[bytes, int], limit: int | None) -> list[Match]:
        ranked = sorted(found.items(), key=lambda pair: (pair[1], pair[0]))
        if limit is not None:
            ranked = ranked[:limit]
        docs = self._storage.db(DOCS)
        matches = []
        for raw_id, distance in ranked:
            raw = txn.get(raw_id, db=docs)
            if raw is None:
                raise CorruptDatabaseError(f"document id {decode_id(raw_id)} is in a table but missing", "run check()")
            key, fingerprint, meta = codec.unpack_document(raw, raw_id)
            matches.append(Match(key, fingerprint, distance, meta))
        return matches

    def query(self, fingerprint: int | None = None, k: int | None = None, *, text: str | None = None, limit: int | None = None) -> list[Match]:
        """Every stored document within ``k`` bits (default: the index's k), nearest first
        (ties in insertion order).  Cost: one range scan per table plus one read per match."""
        query = self._resolve(fingerprint, text)
        k = self._check_k(k)
        limit = self._check_limit(limit)
        with self._storage.read() as txn:
            return self._matches(txn, self._probe(txn, query, k), limit)

    def query_many(self, fingerprints: Iterable[int] | None = None, k: int | None = None, *, texts: Iterable[str] | None = None, limit: int | None = None) -> list[list[Match]]:
        """:meth:`query` for many fingerprints (or ``texts``) in one read transaction, with
        the permutations computed vectorised; one result list per query, in order."""
        if texts is not None:
            if fingerprints is not None:
                raise InvalidInputError("both fingerprints and texts= were given", "give one of them")
            queries = self._text_fingerprinter().fingerprint_many(list(iterate(texts, "texts")))
        elif fingerprints is None:
            raise InvalidInputError("no fingerprints were given", "pass fingerprints or texts=")
        else:
            queries = [check_fingerprint(fp) for fp in iterate(fingerprints, "fingerprints")]
        k = self._check_k(k)
        limit = self._check_limit(limit)
        if not queries:
            return []
        query_array = np.array(queries, dtype=np.uint64)
        with self._storage.read() as txn:
            stored = txn.stat(self._storage.db(DOCS))["entries"]
            if len(queries) * MERGE_COST_RATIO >= stored:
                found = self._merge_many(txn, query_array, k)
            else:
                found = self._probe_many(txn, query_array, k)
            return [self._matches(txn, one, limit) for one in found]

    @staticmethod
    def _check_limit(limit: int | None) -> int | None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInputError(f"limit={describe(limit)} is not a non-negative int")
        return limit

    def get(self, key: str) -> Document | None:
        """The document stored under ``key``, or None."""
        key_index = index_key(check_key(key))
        with self._storage.read() as txn:
            found = self._lookup(txn, key, key_index)
        return None if found is None else found[1]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            return self.get(key) is not None
        except InvalidKeyError:  # empty, too long or not valid Unicode: no such key is stored
            return False

    def __len__(self) -> int:
        with self._storage.read() as txn:
            return int(txn.stat(self._storage.db(DOCS))["entries"])

    def items(self, *, chunk: int = 10_000) -> Iterator[Document]:
        """Every document, in insertion order.  Reads ``chunk`` documents per transaction,
        so a slow consumer never pins old pages (documents changed meanwhile may be seen in
        their new state, or not at all if removed)."""
        after = b""
        while True:
            with self._storage.read() as txn:
                cursor = txn.cursor(self._storage.db(DOCS))
                if not cursor.set_range(after):
                    return
                if cursor.key() == after:
                    if not cursor.next():
                        return
                rows = []
                for raw_id, raw in cursor:
                    rows.append(codec.unpack_document(raw, raw_id))
                    after = raw_id
                    if len(rows) >= chunk:
                        break
            yield from (Document(*row) for row in rows)
            if len(rows) < chunk:
                return

    def keys(self) -> Iterator[str]:
        """Every key, in insertion order."""
        return (document.key for document in self.items())

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def fingerprint_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, fingerprints) as uint64 arrays in insertion order, read from the first
        table in one scan (no per-document decoding).  O(n log n)."""
        table = self.plan.tables[0]
        with self._storage.read() as txn:
            permuted, ids = self._read_table(txn, self._table_names[0])
        order = np.argsort(ids, kind="stable")
        return ids[order], table.unpermute_array(permuted[order])

    # -- maintenance ---------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts, plan, sizes and settings.  O(tables)."""
        storage = self._storage
        with storage.read() as txn:
            documents = int(txn.stat(storage.db(DOCS))["entries"])
            page_size = int(txn.stat(storage.db(DOCS))["psize"])
            table_pages = [
                sum(int(s[kind]) for kind in ("branch_pages", "leaf_pages", "overflow_pages"))
                for s in (txn.stat(storage.db(name)) for name in self._table_names)
            ]
            info = storage.env.info()
        leading = [table.leading_bits for table in self.plan.tables]
        size = storage.size_on_disk()
        return {
            "path": self.path,
            "format_version": FORMAT_VERSION,
            "documents": documents,
            "bits": self.plan.bits,
            "k": self.plan.k,
            "blocks": self.plan.blocks,
            "block_widths": self.plan.widths,
            "tables": len(self.plan.tables),
            "leading_bits": leading,
            # A random fingerprint shares a table's leading bits with N / 2**bits others.
            "expected_candidates_per_probe": sum(documents / 2**bits for bits in leading) / len(leading),
            "size_bytes": size,
            "bytes_per_document": size / documents if documents else None,
            "bytes_per_table_entry": (sum(table_pages) * page_size / (documents * len(leading))) if documents else None,
            "map_size": int(info["map_size"]),
            "generation": storage.generation,
            "fingerprinter": self._fingerprinter.to_dict() if self._fingerprinter is not None else None,
        }

    def check(self) -> CheckReport:
        """Verify the stored metadata (configuration, fingerprint settings, next id), that
        every document record is valid and in every table exactly once, that nothing else is
        in the tables, and that the key index and documents agree.  Damage is reported in the
        result, never raised.  One read transaction; O(n log n) with n documents, vectorised
        per table."""
        storage = self._storage
        problems: list[str] = []
        entries_seen = 0
        with storage.read() as txn:
            ids: list[int] = []
            fingerprints: list[int] = []
            id_by_index_key: dict[bytes, int] = {}
            problems.extend(self._metadata_problems(txn))
            try:
                next_id: int | None = self._read_next_id(txn)
            except CorruptDatabaseError as exc:
                problems.append(exc.message)
                next_id = None
            for raw_id, raw in txn.cursor(storage.db(DOCS)):
                doc_id = decode_id(raw_id)
                try:
                    key, fingerprint, _ = codec.unpack_document(raw, raw_id)
                    id_by_index_key[index_key(check_key(key))] = doc_id
                except CorruptDatabaseError as exc:
                    problems.append(exc.message)
                    continue
                except InvalidKeyError as exc:  # a str key that is not valid Unicode, or too long in bytes
                    problems.append(f"document {doc_id}: {exc.message}")
                    continue
                if next_id is not None and doc_id >= next_id:
                    problems.append(f"document {doc_id} is at or above the next id {next_id}")
                ids.append(doc_id)
                fingerprints.append(fingerprint)
            for key_index, raw_id in txn.cursor(storage.db(KEYS)):
                if id_by_index_key.pop(key_index, None) != decode_id(raw_id):
                    problems.append(f"key index entry {describe(key_index)} -> {decode_id(raw_id)} has no matching document")
            for key_index, doc_id in id_by_index_key.items():
                problems.append(f"document {doc_id} ({describe(key_index)}) is missing from the key index")
            id_array = np.array(ids, dtype=np.uint64)
            fp_array = np.array(fingerprints, dtype=np.uint64)
            for table, name in zip(self.plan.tables, self._table_names):
                try:
                    permuted, entry_ids = self._read_table(txn, name, every_key=True)
                except CorruptDatabaseError as exc:
                    problems.append(exc.message)
                    continue
                entries_seen += len(entry_ids)
                expected = np.sort(table_keys_as_pairs(table.permute_array(fp_array), id_array))
                actual = np.sort(table_keys_as_pairs(permuted, entry_ids))
                missing = np.setdiff1d(expected, actual)
                extra = np.setdiff1d(actual, expected)
                for label, wrong in (("missing from", missing), ("unexpected in", extra)):
                    if len(wrong):
                        shown = ", ".join(f"id {int(pair['id'])}" for pair in wrong[:5])
                        problems.append(f"{len(wrong)} entries {label} {name.decode()} ({shown}{', ...' if len(wrong) > 5 else ''})")
        return CheckReport(documents=len(ids), table_entries=entries_seen, problems=problems)

    def _metadata_problems(self, txn: lmdb.Transaction[bytes]) -> list[str]:
        """What is wrong with the stored configuration and fingerprint settings, each checked
        as open() checks them, for :meth:`check`.  O(size of the settings)."""
        meta = self._storage.db(META)
        problems = []
        try:
            if self._plan_from_config(self._parse_config(txn.get(CONFIG_KEY, db=meta)), None, None) != self.plan:
                problems.append(f"the configuration stored in {self.path} changed since it was opened")
        except (CorruptDatabaseError, FormatVersionError) as exc:
            problems.append(exc.message)
        settings = txn.get(FINGERPRINTER_KEY, db=meta)
        try:
            if settings is not None:
                self._stored_fingerprinter(settings)
        except (CorruptDatabaseError, FormatVersionError) as exc:
            problems.append(exc.message)
        return problems

    def compact(self) -> CompactResult:
        """Rewrite the database into a fresh file, every sub-database in key order with full
        pages, and swap it in atomically.  Writers in other processes wait, then continue
        in the new file; readers move over at their next transaction.  O(size)."""
        names = [META, DOCS, KEYS, *self._table_names]

        def rewrite(source: lmdb.Transaction[bytes], target: lmdb.Environment) -> None:
            for name in names:
                with target.begin(write=True) as txn:
                    cursor = txn.cursor(target.open_db(name, txn=txn))
                    cursor.putmulti(source.cursor(self._storage.db(name)).iternext(), append=True)

        before = self._storage.swap_in_rewrite(rewrite)
        return CompactResult(before, self._storage.size_on_disk())

    # -- all pairs -----------------------------------------------------------------------

    def pairs(self, k: int | None = None) -> Iterator[tuple[str, str, int]]:
        """Every near-duplicate pair ``(key_a, key_b, distance)`` within ``k`` bits, each
        unordered pair once (``key_a`` added first), identical fingerprints included.
        Reads the fingerprints once (no per-document decoding), then streams blocks of pairs
        with memory O(n + block).  The pairs are those of the fingerprints as read at the
        start; a document removed before its key is read is left out."""
        from simdb.allpairs import iter_pair_blocks

        k = self._check_k(k)
        ids, fingerprints = self.fingerprint_arrays()
        names = _KeyNames(self, ids)
        for left, right, distances in iter_pair_blocks(fingerprints, self.plan, k):
            # Positions follow insertion order and left < right, so key_a was added first.
            for key_a, key_b, distance in zip(names.fetch(left), names.fetch(right), distances.tolist()):
                if key_a is not None and key_b is not None:
                    yield key_a, key_b, distance

    def clusters(self, k: int | None = None, *, singletons: bool = False) -> Iterator[list[str]]:
        """Connected groups of the "within k bits" graph, each a list of keys with the
        first-added key first, in order of their first-added key.  Singletons are left out
        unless asked for.  Identical fingerprints are grouped without expanding their pairs."""
        from simdb.allpairs import cluster_labels, iter_clusters

        k = self._check_k(k)
        ids, fingerprints = self.fingerprint_arrays()
        names = _KeyNames(self, ids)
        for members in iter_clusters(cluster_labels(fingerprints, self.plan, k), singletons):
            keys = [key for key in names.fetch(members) if key is not None]
            if len(keys) > 1 or (singletons and keys):
                yield keys


def _check_batch_size(batch_size: object) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInputError(f"batch_size={describe(batch_size)} is not a positive int")


#: Sorts after every 16-byte table key: the bound for the last prefix of a table.
_PAST_END = b"\xff" * 17


def table_keys_as_pairs(permuted: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """(permuted, id) as a structured array, for set operations in :meth:`Database.check`."""
    pairs = np.empty(len(ids), dtype=[("fp", np.uint64), ("id", np.uint64)])
    pairs["fp"] = permuted
    pairs["id"] = ids
    return pairs


class _KeyNames:
    """Keys of documents by their position in :meth:`Database.fingerprint_arrays`: looked
    up on demand in one transaction per request, or read in one scan of the documents once a
    large share of them is wanted.  A document removed since the fingerprints were read has
    no key (None), and its pairs are left out."""

    SCAN_SHARE = 16  # scan every document once more than 1/16 of them are wanted at once

    def __init__(self, database: Database, ids: np.ndarray) -> None:
        self._database = database
        self._ids = ids
        self._names = np.full(len(ids), None, dtype=object)
        self._known = np.zeros(len(ids), dtype=bool)

    def fetch(self, positions: np.ndarray) -> list[str | None]:
        """The keys at ``positions`` (an int array), None for removed documents."""
        missing = np.unique(positions[~self._known[positions]])
        if len(missing) * self.SCAN_SHARE > len(self._ids):
            self._scan_all()
        elif len(missing):
            self._look_up(missing)
        return self._names[positions].tolist()

    def _look_up(self, positions: np.ndarray) -> None:
        storage = self._database._storage
        with storage.read() as txn:
            docs = storage.db(DOCS)
            for position, raw_id in zip(positions.tolist(), self._ids[positions].astype(">u8").view("V8").tolist()):
                raw = txn.get(raw_id, db=docs)
                self._names[position] = None if raw is None else codec.unpack_document(raw, raw_id)[0]
        self._known[positions] = True

    def _scan_all(self) -> None:
        storage = self._database._storage
        ids: list[int] = []
        keys: list[str] = []
        with storage.read() as txn:
            for raw_id, raw in txn.cursor(storage.db(DOCS)):
                ids.append(decode_id(raw_id))
                keys.append(codec.unpack_document(raw, raw_id)[0])
        found = np.array(ids, dtype=np.uint64)
        at = np.minimum(np.searchsorted(found, self._ids), max(len(found) - 1, 0))
        present = (found[at] == self._ids) if len(found) else np.zeros(len(self._ids), dtype=bool)
        key_array = np.array(keys + [None], dtype=object)
        # numpy's stubs leave None out of ArrayLike; np.where takes it as an object scalar.
        self._names = np.where(present, key_array[at], None)  # type: ignore[call-overload]
        self._known[:] = True
