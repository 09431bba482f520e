"""A database's configuration, merged once at open: the stored settings (format version, k,
blocks and the block plan, the fingerprint settings) read, checked and compared with those
given to :func:`simdb.open`, or written when the database is created.

They live in the ``meta`` sub-database: ``config`` (msgpack dict: format_version, bits, k,
blocks, block widths) and ``fingerprinter`` (the fingerprint settings, once text is used).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import lmdb

from simdb import codec
from simdb.errors import (
    RESTORE_HINT,
    ConfigMismatchError,
    CorruptDatabaseError,
    DatabaseMissingError,
    DatabaseReplacedError,
    FormatVersionError,
    InvalidInputError,
    NoFingerprinterError,
    NotADatabaseError,
    damaged,
)
from simdb.keys import describe
from simdb.plan import BITS, MAX_DATABASE_TABLES, TablePlan
from simdb.storage import READ_RECHECK_SECONDS, Storage

if TYPE_CHECKING:
    from simdb.fingerprint import Fingerprinter

#: Format 2 adds the ``sketches`` sub-database; format 1 databases (no sketches) are still
#: read and written as format 1, with similarities estimated from the fingerprints.  Format 4
#: stores the tables log-structured, in size-tiered runs (:mod:`simdb.tables`); formats 1 and
#: 2 keep one B-tree per table and are read and written as they are (export and import to
#: convert one).  Format 5 stores the key index log-structured too (:mod:`simdb.key_index`);
#: format 4 (development builds of 0.2.0) keeps its B-tree key index.  Format 6 adds a filter
#: of each sparse run's prefixes (:mod:`simdb.prefix_filters`); format 5 databases are read
#: and written without them.
FORMAT_VERSION = 6
READABLE_FORMATS = (1, 2, 4, 5, 6)
#: Formats no release reads: 3 held leveled tables (development builds of 0.2.0 only).
RETIRED_FORMATS = (3,)
#: The default index: k=5 in 6 blocks (6 tables).  A query at the default threshold then
#: finds 98-99.8% of what pairs() finds at it, at about 380 bytes per document after
#: compact(); k=3 finds 90-96%, k=4 96-98.5% (bench/threshold_recall.py, bench/RESULTS.md).
DEFAULT_K = 5
DEFAULT_BLOCKS = 6

META = b"meta"
CONFIG_KEY = b"config"
FINGERPRINTER_KEY = b"fingerprinter"

#: What the database's other layers need at open: the sub-databases of a plan in a format,
#: and creating them (with their first records) in a new database's first transaction.
LayerNames = Callable[[TablePlan, int], list[bytes]]
CreateLayers = Callable[["lmdb.Transaction[bytes]", TablePlan, int], None]


def new_plan(k: int | None, blocks: int | None) -> TablePlan:
    """The plan of a new database: :data:`DEFAULT_K` in :data:`DEFAULT_BLOCKS` blocks when
    neither is given, or when k is given as the default (``-k 5`` makes the database that
    leaving k out makes, not the 56 tables of the prefix rule); else the given k with the
    given block count or :func:`~simdb.plan.default_blocks`'s."""
    if k is None or (k == DEFAULT_K and blocks is None):
        return TablePlan.create(DEFAULT_K, DEFAULT_BLOCKS if blocks is None else blocks, max_tables=MAX_DATABASE_TABLES)
    return TablePlan.create(k, blocks, max_tables=MAX_DATABASE_TABLES)


class Config:
    """The settings of the database in ``storage``: :attr:`plan`, :attr:`format` and the
    :attr:`fingerprinter` (None until text is used; settings given to a read-only handle
    before any were stored wait in :attr:`requested`)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.plan: TablePlan
        self.format = FORMAT_VERSION
        self.fingerprinter: Fingerprinter | None = None
        self.requested: Fingerprinter | None = None
        self._next_settings_check = 0.0

    @property
    def path(self) -> str:
        return str(self.storage.path)

    @classmethod
    def open(
        cls,
        storage: Storage,
        k: int | None,
        blocks: int | None,
        fingerprinter: Fingerprinter | None,
        create: bool,
        layer_names: LayerNames,
        create_layers: CreateLayers,
    ) -> Config:
        """Read the stored settings and merge the given ones into them, or create the
        database with them: reopen ``storage`` with every sub-database (``layer_names``)
        and, for a new database, make them (``create_layers``) in the transaction that
        stores the configuration.  Raises on damage and on a mismatch.  O(tables)."""
        config = cls(storage)
        stored = config.read()
        if stored is None:
            if storage.readonly or not create:
                hint = "create it by opening it writable" if storage.readonly else "create it with create=True"
                raise DatabaseMissingError(f"{storage.path} holds no simdb database yet", hint, path=storage.path)
            config.plan = new_plan(k, blocks)
            storage.reopen_with([META, *layer_names(config.plan, config.format)])

            def initialise(txn: lmdb.Transaction[bytes]) -> bool:
                return config.initialise(
                    txn, fingerprinter, lambda layers_txn: create_layers(layers_txn, config.plan, config.format)
                )

            if not storage.write(initialise):
                stored = config.read()  # another process created it first: theirs stand
        if stored is not None:
            config.plan, config.format = config.plan_from(stored, k, blocks)
            storage.reopen_with([META, *layer_names(config.plan, config.format)])
        config.fingerprinter = config.settle_fingerprinter(fingerprinter)
        storage.follow_check = weakref.WeakMethod(config.check_followed)
        return config

    def check_followed(self, txn: lmdb.Transaction[bytes], handles: dict[bytes, lmdb._Database]) -> None:
        """Check the settings of a generation the storage is about to follow (``txn`` reads
        it, ``handles`` are its sub-databases) before this handle uses it: another process's
        compaction keeps them, but a database removed and made again at the path may have
        others.  Other k, blocks or format, or other or no fingerprint settings where this
        handle has some, raise DatabaseReplacedError: table entries or fingerprints made by
        the old ones would damage the new database.  Settings where this handle has none are
        adopted.  O(size of the settings)."""
        meta = handles.get(META)
        raw = txn.get(CONFIG_KEY, db=meta) if meta is not None else None
        if raw is None:
            raise NotADatabaseError(f"{self.path} no longer holds a simdb database", path=self.path)
        plan, version = self.plan_from(self.parse(raw), None, None)
        for setting, held, stored in (
            ("k", self.plan.k, plan.k),
            ("blocks", self.plan.blocks, plan.blocks),
            ("format", self.format, version),
        ):
            if held != stored:
                raise self._replaced(setting, held, stored)
        raw_settings = txn.get(FINGERPRINTER_KEY, db=meta)
        settings = None if raw_settings is None else self.stored_fingerprinter(raw_settings)
        if settings is None:
            if self.fingerprinter is not None:
                # Texts fingerprinted here by the old settings would be stored without them.
                raise self._replaced("fingerprinter", self.fingerprinter, None)
        elif self.fingerprinter is None:
            self.fingerprinter = self._adopted(settings)
        elif settings != self.fingerprinter:
            raise self._replaced("fingerprinter", self.fingerprinter, settings)

    def _replaced(self, setting: str, held: object, stored: object) -> DatabaseReplacedError:
        made_with = f"{setting}={stored!r}" if stored is not None else f"no {setting}"
        return DatabaseReplacedError(
            f"the database at {self.path} was removed and made again with {made_with} "
            f"while this handle, which has {setting}={held!r}, had it open",
            setting=setting,
            held=held,
            stored=stored,
            path=self.path,
        )

    def current_fingerprinter(self) -> Fingerprinter | None:
        """The fingerprint settings, read again while this handle has none, since another
        process may have stored some: pairs, thresholds and ``if_new`` then estimate
        similarity their way, as every other handle does.  Read at most every
        READ_RECHECK_SECONDS (a read transaction costs about 12 us, a tenth of a query), so
        settings another process stored reach this handle as late as its compactions do.
        O(1) otherwise."""
        if self.fingerprinter is None and time.monotonic() >= self._next_settings_check:
            with self.storage.read() as txn:
                raw = txn.get(FINGERPRINTER_KEY, db=self.storage.db(META))
            if raw is not None:  # settings that disagree with those requested raise on every call
                self.fingerprinter = self._adopted(self.stored_fingerprinter(raw))
            self._next_settings_check = time.monotonic() + READ_RECHECK_SECONDS
        return self.fingerprinter

    def _adopted(self, stored: Fingerprinter) -> Fingerprinter:
        """``stored``, the settings another process stored since this handle opened, once
        checked against those requested at open."""
        if self.requested is not None and not self.requested.agrees_with(stored):
            raise self._fingerprinter_mismatch(self.requested, stored, f"{self.path} now uses")
        return stored

    def read(self) -> dict[str, Any] | None:
        """The stored configuration, None in an empty environment.  One read transaction."""
        storage = self.storage
        with storage.read() as txn:
            try:
                meta = storage.db(META)
            except NotADatabaseError:
                if txn.stat(storage.env.open_db(None))["entries"]:
                    raise NotADatabaseError(f"{storage.path} holds an LMDB file that simdb did not write") from None
                return None
            raw = txn.get(CONFIG_KEY, db=meta)
        if raw is None:
            raise NotADatabaseError(f"{storage.path} has no simdb configuration", "is it a simdb database?")
        return self.parse(raw)

    def parse(self, raw: bytes | None) -> dict[str, Any]:
        """Decode the stored configuration: a dict with a format_version, else
        CorruptDatabaseError.  O(size)."""
        config = codec.unpack(raw, "configuration", self.path)
        if not isinstance(config, dict):
            raise damaged(self.path, "configuration", f"is {describe(config)}, not a dict", hint=RESTORE_HINT)
        if "format_version" not in config:
            raise damaged(
                self.path, "configuration", "has no format_version", field="format_version", hint=RESTORE_HINT
            )
        return config

    def plan_from(self, config: dict[str, Any], k: int | None, blocks: int | None) -> tuple[TablePlan, int]:
        """The plan and format version stored in ``config``, checked, then compared with
        the ``k`` and ``blocks`` the caller gave.  Damage is a CorruptDatabaseError naming
        the field (the caller's arguments were checked before anything was opened); a newer
        format version is a FormatVersionError.  O(tables)."""
        path = self.path
        version = config["format_version"]
        if type(version) is int and version > FORMAT_VERSION:
            raise FormatVersionError(
                f"{path} has format version {version}; this simdb reads up to {FORMAT_VERSION}",
                "upgrade simdb",
            )
        if version in RETIRED_FORMATS:
            raise FormatVersionError(
                f"{path} has format version {version}, the leveled tables of a development build of simdb 0.2.0, "
                "which this release does not read",
                "run `simdb export` with the build that made it and `simdb import` the export into a new database",
            )
        if type(version) is not int or version not in READABLE_FORMATS:
            raise damaged(
                path,
                "configuration",
                f"has an invalid format_version {describe(version)} (this simdb writes {FORMAT_VERSION})",
                field="format_version",
                hint=RESTORE_HINT,
            )
        for name in ("k", "blocks", "bits"):
            if name not in config and name != "bits":
                raise damaged(path, "configuration", f"has no {name}", field=name, hint=RESTORE_HINT)
            if name in config and type(config[name]) is not int:
                fault = f"has {name}={describe(config[name])}, not an int"
                raise damaged(path, "configuration", fault, field=name, hint=RESTORE_HINT)
        try:
            plan = TablePlan.create(config["k"], config["blocks"], config.get("bits", BITS))
        except InvalidInputError as exc:
            raise damaged(path, "configuration", f"is invalid: {exc.message}", hint=RESTORE_HINT) from None
        described = plan.describe()
        differing = [key for key, value in described.items() if config.get(key) != value]
        if differing:
            raise damaged(path, "block plan", "does not match its k and blocks", field=differing[0], hint=RESTORE_HINT)
        for name, given, stored in (("k", k, plan.k), ("blocks", blocks, plan.blocks)):
            if given is not None and given != stored:
                raise ConfigMismatchError(
                    f"{name}={given} was given, but the database at {path} was created with {name}={stored}",
                    f"omit {name}, or export and import into a new database to change it",
                    setting=name,
                    given=given,
                    stored=stored,
                    path=path,
                )
        return plan, version

    def stored_fingerprinter(self, raw: bytes) -> Fingerprinter:
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
            made = Fingerprinter.from_dict(settings)
        except InvalidInputError as exc:
            raise damaged(self.path, "fingerprint settings", f"are invalid: {exc.message}", hint=RESTORE_HINT) from None
        # Checks across the records, which from_dict cannot make (found by a probe: a
        # record saying 32 bits, or without its kind, opened and passed check, and queries
        # then found nothing).  Every database since format 2 stores the kind.
        if self.format >= 2 and "kind" not in settings:
            raise damaged(self.path, "fingerprint settings", "have no kind", field="kind", hint=RESTORE_HINT)
        plan = getattr(self, "plan", None)
        if plan is not None and made.bits != plan.bits:
            fault = f"are for {made.bits}-bit fingerprints, but its index holds {plan.bits}-bit ones"
            raise damaged(self.path, "fingerprint settings", fault, field="bits", hint=RESTORE_HINT)
        return made

    def initialise(
        self,
        txn: lmdb.Transaction[bytes],
        fingerprinter: Fingerprinter | None,
        create_layers: Callable[[lmdb.Transaction[bytes]], None],
    ) -> bool:
        """Write the configuration and create the sub-databases, unless another process has
        done so since we looked (then return False and change nothing)."""
        self.storage.create(txn, META)
        meta = self.storage.db(META)
        if txn.get(CONFIG_KEY, db=meta) is not None:
            return False
        create_layers(txn)
        config = {"format_version": self.format, **self.plan.describe()}
        txn.put(CONFIG_KEY, codec.pack(config, "configuration"), db=meta)
        if fingerprinter is not None:
            txn.put(FINGERPRINTER_KEY, codec.pack(fingerprinter.to_dict(), "fingerprint settings"), db=meta)
        return True

    def settle_fingerprinter(self, given: Fingerprinter | None) -> Fingerprinter | None:
        """The stored fingerprint settings, checked against ``given``; ``given`` stored when
        none are and the handle is writable.  One read transaction."""
        with self.storage.read() as txn:
            raw = txn.get(FINGERPRINTER_KEY, db=self.storage.db(META))
        if raw is None:
            if given is not None and not self.storage.readonly:
                return self.store_fingerprinter(given)
            # A read-only handle cannot store them: they are checked when text is first used.
            self.requested = given
            return None
        stored = self.stored_fingerprinter(raw)
        if given is not None and not given.agrees_with(stored):
            raise self._fingerprinter_mismatch(given, stored, f"the database at {self.path} uses")
        return stored

    def _fingerprinter_mismatch(self, given: Fingerprinter, stored: Fingerprinter, holder: str) -> ConfigMismatchError:
        """The error for fingerprint settings ``given`` where ``holder`` (say, "the database
        at PATH uses") names the ``stored`` ones."""
        return ConfigMismatchError(
            f"fingerprinter {given!r} was given, but {holder} {stored!r}",
            "omit fingerprinter= to use the stored settings",
            setting="fingerprinter",
            given=given,
            stored=stored,
            path=self.storage.path,
        )

    def store_fingerprinter(self, fingerprinter: Fingerprinter, *, given: bool = True) -> Fingerprinter:
        """Store settings the first time text is used; never overwrite other settings.  If
        another process stored some first, they stand: an error if ``fingerprinter`` was
        given explicitly, else they are returned."""
        if self.storage.readonly:
            raise NoFingerprinterError(
                f"{self.storage.path} has no fingerprint settings and is open read-only", path=self.storage.path
            )

        def store(txn: lmdb.Transaction[bytes]) -> Fingerprinter:
            meta = self.storage.db(META)
            raw = txn.get(FINGERPRINTER_KEY, db=meta)
            if raw is not None:  # another process got there first: theirs stand
                return self.stored_fingerprinter(raw)
            txn.put(FINGERPRINTER_KEY, codec.pack(fingerprinter.to_dict(), "fingerprint settings"), db=meta)
            return fingerprinter

        stored = self.storage.write(store)
        if given and not fingerprinter.agrees_with(stored):
            raise self._fingerprinter_mismatch(fingerprinter, stored, f"{self.storage.path} now uses")
        return stored

    def text_fingerprinter(self) -> Fingerprinter:
        """The settings for text: the stored ones, else those requested at open or the
        defaults, stored now (another process may have stored some since this handle
        opened: they stand)."""
        if self.fingerprinter is None:
            from simdb.fingerprint import Fingerprinter

            requested = self.requested
            self.fingerprinter = self.settle_fingerprinter(requested) or self.store_fingerprinter(
                requested or Fingerprinter(), given=requested is not None
            )
        return self.fingerprinter

    def problems(self, txn: lmdb.Transaction[bytes]) -> list[str]:
        """What is wrong with the stored configuration and fingerprint settings, each checked
        as open checks them, for :meth:`simdb.Database.check`.  O(size of the settings)."""
        meta = self.storage.db(META)
        problems = []
        try:
            if self.plan_from(self.parse(txn.get(CONFIG_KEY, db=meta)), None, None)[0] != self.plan:
                problems.append(f"the configuration stored in {self.path} changed since it was opened")
        except (CorruptDatabaseError, FormatVersionError) as exc:
            problems.append(exc.message)
        settings = txn.get(FINGERPRINTER_KEY, db=meta)
        try:
            if settings is not None:
                self.stored_fingerprinter(settings)
        except (CorruptDatabaseError, FormatVersionError) as exc:
            problems.append(exc.message)
        return problems
