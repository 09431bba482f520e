"""Value encoding with msgpack: the only module that imports it.

Unpacking is bounded: msgpack sizes every string, array and map limit by the length of the
buffer it is given, so a damaged record cannot make it allocate more than the record's size.
Nothing is ever deserialised with pickle.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgpack

from simdb.errors import CorruptDatabaseError, InvalidInputError, Remedy
from simdb.keys import FINGERPRINT_LIMIT, MAX_KEY_BYTES, decode_id, describe

# msgpack writes a tuple as an array, which reads back as a list, and a list cannot key a
# dict: a record with a tuple as a map key would be written fine and then never read again.
_MAP_KEY_TYPES = (str, int, float, bytes, bool, type(None))
#: Deepest nesting of lists and dicts stored.  Far beyond real metadata, and low enough that
#: anything reading it back (repr, JSON) stays clear of Python's recursion limit.
MAX_DEPTH = 100


_CONTAINERS = (dict, list, tuple)
# msgpack packs and unpacks these natively, but no export can carry them as JSON and simdb
# never writes extension types: refused as meta, and in msgpack read from outside.
_EXTENSIONS = (msgpack.Timestamp, msgpack.ExtType)


def _refuse_extension_value(value: Any, what: str) -> None:
    raise InvalidInputError(
        f"{what} holds a msgpack {type(value).__name__} ({describe(value)}), an extension type simdb does not store",
        "use plain data: None, bool, int, float, str, bytes, lists and dicts",
    )


def _check_storable(values: list[Any], what: str) -> None:
    """Raise InvalidInputError if one of ``values`` nests deeper than :data:`MAX_DEPTH` or
    has a dict with a key that would not read back as a dict key, or holds a msgpack extension
    value (a Timestamp, an ExtType).  Walks the values level by level, all together, so a
    batch of flat dicts costs one loop over them.  O(size)."""
    level = []
    for value in values:
        if isinstance(value, _EXTENSIONS):  # first: an ExtType is a tuple
            _refuse_extension_value(value, what)
        elif isinstance(value, _CONTAINERS):
            level.append(value)
    depth = 0
    while level:
        if depth > MAX_DEPTH:
            raise InvalidInputError(f"{what} is nested more than {MAX_DEPTH} levels deep", "store flatter data")
        deeper = []
        for item in level:
            parts: Iterable[Any] = item
            if isinstance(item, dict):
                for key in item:
                    if not isinstance(key, _MAP_KEY_TYPES) or isinstance(key, _EXTENSIONS):
                        raise InvalidInputError(
                            f"{what} has a dict key {describe(key)} of type {type(key).__name__}, "
                            "which cannot be stored",
                            "use str, int, float, bytes, bool or None as dict keys",
                        )
                parts = item.values()
            for part in parts:
                if isinstance(part, _EXTENSIONS):  # first: an ExtType is a tuple
                    _refuse_extension_value(part, what)
                elif isinstance(part, _CONTAINERS):
                    deeper.append(part)
        level = deeper
        depth += 1


def pack(value: Any, what: str) -> bytes:
    """Encode plain data (None, bool, int, float, str, bytes, list, tuple, dict).  O(size)."""
    _check_storable([value], what)
    return _packb(value, what)


def _packb(value: Any, what: str, shown: Any = None) -> bytes:
    """``value`` as msgpack, or InvalidInputError naming ``what`` and ``shown`` (the part of
    ``value`` at fault; by default all of it)."""
    try:
        return msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError) as exc:
        raise InvalidInputError(
            f"{what} {describe(value if shown is None else shown)} cannot be stored: {exc}",
            "use plain data: None, bool, int, float, str, bytes, lists and dicts",
        ) from None


def unpack(encoded: bytes | None, what: str, path: str | None = None) -> Any:
    """Decode a value written by :func:`pack`; damage, or a missing value (None), raises
    CorruptDatabaseError naming ``what`` (the record) and ``path`` (the database), if given."""
    where = f"the {what} stored in {path}" if path else what
    if encoded is None:
        raise CorruptDatabaseError(f"{where} is missing", path=path, record=what, remedy=Remedy.RUN_CHECK)
    try:
        return msgpack.unpackb(encoded, raw=False, strict_map_key=False, use_list=True)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        detail = str(exc) or type(exc).__name__  # msgpack raises some errors with no message
        raise CorruptDatabaseError(
            f"{where} is damaged: {detail}", path=path, record=what, remedy=Remedy.RUN_CHECK
        ) from None


def unpack_input(encoded: bytes, what: str) -> Any:
    """Decode msgpack that came from outside the database (an export file): as
    :func:`unpack`, but damage is bad input, InvalidInputError naming ``what``.  Extension
    types, which simdb never writes, are refused, the Timestamp msgpack decodes natively
    included, as is what :func:`pack` would refuse.  Bounded by ``len(encoded)``."""

    def refuse_extension(code: int, data: bytes) -> Any:
        raise ValueError(f"extension type {code}, which simdb never writes")

    try:
        value = msgpack.unpackb(encoded, raw=False, strict_map_key=False, use_list=True, ext_hook=refuse_extension)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        detail = str(exc) or ("nested too deeply" if isinstance(exc, msgpack.StackError) else type(exc).__name__)
        raise InvalidInputError(f"{what} is not valid msgpack: {detail}") from None
    _check_storable([value], what)
    return value


def pack_stored(value: Any) -> bytes:
    """Encode a value read back from the database as it is, without :func:`pack`'s checks
    (a database written before them may hold what they refuse): for output only.  O(size)."""
    return bytes(msgpack.packb(value, use_bin_type=True))


def pack_documents(keys: list[str], fingerprints: list[int], metas: list[Any] | None) -> list[bytes] | None:
    """Encode many document records in one C-level pass (``metas=None``: no metadata); None
    if any cannot be encoded (:func:`pack_document` then names the culprit)."""
    if metas is None:
        metas = [None] * len(keys)
    else:
        try:
            _check_storable(metas, "meta")
        except InvalidInputError:
            return None
    packer = msgpack.Packer(use_bin_type=True, autoreset=True)
    try:
        return list(map(packer.pack, zip(keys, fingerprints, metas)))  # tuples pack as arrays
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError):
        return None


def pack_document(key: str, fingerprint: int, meta: Any) -> bytes:
    """Encode one document record as ``[key, fingerprint, meta]``; bad meta raises
    InvalidInputError naming the key."""
    what = meta_of(key)
    _check_storable([meta], what)  # the meta alone, so its depth counts as in pack_documents
    return _packb([key, fingerprint, meta], what, shown=meta)  # key and fingerprint were checked


def meta_of(key: str) -> str:
    """How an error names the meta of the document ``key``."""
    return f"meta of key {describe(key)}"


def unpack_document(encoded: bytes, raw_id: bytes) -> tuple[str, int, Any]:
    """Decode and validate the document record stored under ``raw_id``: ``[key, fingerprint,
    meta]`` with a non-empty str key and an int fingerprint in [0, 2**64).  Every reader of
    documents goes through here, so damage raises CorruptDatabaseError naming the document and
    the bad field, never a value the index cannot hold.  O(size of the record)."""
    name = document_name(raw_id)
    if len(raw_id) != 8:
        raise CorruptDatabaseError(
            f"{name} is stored under {len(raw_id)} bytes, not 8", record=name, remedy=Remedy.RUN_CHECK
        )
    record = unpack(encoded, name)
    if type(record) is list and len(record) == 3:
        key, fingerprint, meta = record
        good_key = type(key) is str and 0 < len(key) <= MAX_KEY_BYTES
        if good_key and type(fingerprint) is int and 0 <= fingerprint < FINGERPRINT_LIMIT:
            return key, fingerprint, meta
    raise _damaged_document(record, decode_id(raw_id))


def document_name(raw_id: bytes) -> str:
    """How an error names the document stored under ``raw_id``: by its id, or, where the
    stored id is damaged (not 8 bytes: read whole, it could be an int of thousands of
    digits, which Python refuses to print), by its shortened bytes."""
    return f"document {decode_id(raw_id)}" if len(raw_id) == 8 else f"document entry {describe(raw_id)}"


def _damaged_document(record: Any, doc_id: int) -> CorruptDatabaseError:
    """The error for a decoded document record that fails :func:`unpack_document`'s checks."""
    field = None
    if not (isinstance(record, list) and len(record) == 3):
        fault = f"is {describe(record)}, not [key, fingerprint, meta]"
    elif type(record[0]) is not str or not 0 < len(record[0]) <= MAX_KEY_BYTES:
        field = "key"
        fault = f"has the key {describe(record[0])}, not a non-empty str of at most {MAX_KEY_BYTES} characters"
    else:
        field = "fingerprint"
        fault = f"has the fingerprint {describe(record[1])}, not an int in [0, 2**64)"
    return CorruptDatabaseError(
        f"document {doc_id} {fault}", record=f"document {doc_id}", field=field, remedy=Remedy.RUN_CHECK
    )
