"""Value encoding with msgpack: the only module that imports it.

Unpacking is bounded: msgpack sizes every string, array and map limit by the length of the
buffer it is given, so a damaged record cannot make it allocate more than the record's size.
Nothing is ever deserialised with pickle.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgpack

from simdb.errors import CorruptDatabaseError, InvalidInputError
from simdb.keys import describe


def pack(value: Any, what: str) -> bytes:
    """Encode plain data (None, bool, int, float, str, bytes, list, tuple, dict)."""
    try:
        return msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError) as exc:
        raise InvalidInputError(
            f"{what} {describe(value)} cannot be stored: {exc}",
            "use plain data: None, bool, int, float, str, bytes, lists and dicts",
        ) from None


def unpack(encoded: bytes | None, what: str) -> Any:
    """Decode a value written by :func:`pack`; damage, or a missing value (None), raises
    CorruptDatabaseError."""
    try:
        return msgpack.unpackb(encoded, raw=False, strict_map_key=False, use_list=True)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise CorruptDatabaseError(f"{what} is damaged: {exc}", "run check(); restore from a backup or export") from None


def pack_documents(keys: list[str], fingerprints: list[int], metas: Iterable[Any]) -> list[bytes] | None:
    """Encode many document records in one C-level pass; None if any cannot be encoded
    (:func:`pack_document` then names the culprit)."""
    packer = msgpack.Packer(use_bin_type=True, autoreset=True)
    try:
        return list(map(packer.pack, zip(keys, fingerprints, metas)))  # tuples pack as arrays
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError):
        return None


def pack_document(key: str, fingerprint: int, meta: Any) -> bytes:
    """Encode one document record as ``[key, fingerprint, meta]``; bad meta raises
    InvalidInputError naming the key."""
    return pack([key, fingerprint, meta], f"meta of key {describe(key)}")


def unpack_document(encoded: bytes) -> tuple[str, int, Any]:
    """Decode a document record; raises CorruptDatabaseError on damage."""
    record = unpack(encoded, "a document record")
    if not (isinstance(record, list) and len(record) == 3 and isinstance(record[0], str) and isinstance(record[1], int)):
        raise CorruptDatabaseError(f"a document record has the wrong shape: {describe(record)}")
    return record[0], record[1], record[2]
