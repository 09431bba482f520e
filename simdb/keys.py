"""Key encoding: how documents, keys and table entries are addressed inside LMDB.

- A table entry's LMDB key is 16 bytes: the permuted fingerprint, 8 bytes big-endian, then
  the document id, 8 bytes big-endian.  Byte order equals numeric order, so a table prefix is
  a contiguous key range, and identical fingerprints under different ids stay distinct keys.
- A document id is 8 bytes big-endian, so ids sort in insertion order.
- The key index is keyed by the 16-byte BLAKE2b digest of the UTF-8 key.  Every key, of any
  length, has the same fixed-size index key (LMDB's own limit is 511 bytes), a batch of them
  sorts as a numpy array, and a collision-resistant hash means crafted keys cannot collide.
  The full key lives in the document record and is compared on every lookup.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np

from simdb.errors import InvalidFingerprintError, InvalidInputError, InvalidKeyError, KeyProblem
from simdb.validation import FINGERPRINT_LIMIT, check_fingerprint, describe, of_type

__all__ = ["FINGERPRINT_LIMIT", "check_fingerprint", "describe"]  # re-exported: many modules take them from here

if TYPE_CHECKING:
    from typing_extensions import Buffer

T = TypeVar("T")

#: Length of a table entry's LMDB key: the permuted fingerprint and the document id.
TABLE_KEY_BYTES = 16
#: Longest key accepted, in UTF-8 bytes.  Far beyond any URL; bounded so one key cannot
#: exhaust memory or the map.
MAX_KEY_BYTES = 1 << 20


def iterate(items: Iterable[T], what: str) -> Iterator[T]:
    """An iterator over ``items``, a collection of several; a lone str or bytes (which would
    be taken apart into characters) or a non-iterable raises InvalidInputError naming
    ``what``.  O(1)."""
    if isinstance(items, (str, bytes, bytearray, memoryview)):
        raise InvalidInputError(
            f"{what}={describe(items)} is one {type(items).__name__}, not a collection of them",
            f"pass a list, e.g. [{describe(items)}]",
        )
    try:
        return iter(items)
    except TypeError:
        raise InvalidInputError(f"{what}={describe(items)} is {of_type(items)}, not an iterable") from None


def check_key(key: object) -> bytes:
    """Validate a document key and return its UTF-8 bytes.  O(len(key))."""
    if type(key) is str and 0 < len(key) <= MAX_KEY_BYTES // 4:  # the common case, fast
        try:
            return key.encode("utf-8")
        except UnicodeEncodeError:
            pass  # reported below
    if not isinstance(key, str):
        raise InvalidKeyError(f"key {describe(key)} is {of_type(key)}, not a str", reason=KeyProblem.NOT_STR, value=key)
    if not key:
        raise InvalidKeyError(
            "key '' is empty", "every document needs a non-empty key", reason=KeyProblem.EMPTY, value=key
        )
    if len(key) > MAX_KEY_BYTES:  # every character takes at least one byte: skip encoding it
        raise InvalidKeyError(
            f"key {describe(key)} is {len(key)} characters long, over the {MAX_KEY_BYTES}-byte limit",
            reason=KeyProblem.TOO_LONG,
            value=key,
        )
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidKeyError(
            f"key {describe(key)} is not valid Unicode ({exc.reason} at position {exc.start})",
            "lone surrogates cannot be stored; decode the source with errors='replace'",
            reason=KeyProblem.NOT_UNICODE,
            value=key,
        ) from None
    if len(encoded) > MAX_KEY_BYTES:
        raise InvalidKeyError(
            f"key {describe(key)} is {len(encoded)} bytes long, over the {MAX_KEY_BYTES}-byte limit",
            reason=KeyProblem.TOO_LONG,
            value=key,
        )
    return encoded


def index_key(encoded_key: bytes) -> bytes:
    """The key-index LMDB key for a UTF-8 user key: its 16-byte BLAKE2b digest."""
    return hashlib.blake2b(encoded_key, digest_size=16).digest()


def index_keys(encoded_keys: list[bytes]) -> list[bytes]:
    """:func:`index_key` of many keys, without a Python call per key."""
    digest = hashlib.blake2b
    return [digest(key, digest_size=16).digest() for key in encoded_keys]


def index_key_order(index_keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The stable ascending order of 16-byte index keys, and the keys in that order as a
    (n, 2) big-endian array.  O(n log n) in numpy."""
    halves = np.frombuffer(b"".join(index_keys), dtype=">u8").reshape(-1, 2)
    high = halves[:, 0].astype(np.uint64)
    order = np.argsort(high, kind="stable")
    ordered_high = high[order]
    if (ordered_high[1:] == ordered_high[:-1]).any():  # equal first halves (a repeated key): sort on both
        order = np.lexsort((halves[:, 1], halves[:, 0]))
    return order, halves[order]


# Leading zeros past the widths are still the same value (0x00000000000000001 is 1).
_HEX_FINGERPRINT = re.compile(r"(?:0[xX]0*[0-9a-fA-F]{1,16}|[0-9a-fA-F]{16})")
_DECIMAL_FINGERPRINT = re.compile(r"0*[0-9]{1,20}")
_HEX_DIGITS = re.compile(r"0[xX][0-9a-fA-F]+")


def parse_fingerprint(text: str) -> int:
    """Parse a fingerprint written as hex (``0x`` and up to 16 hex digits, or exactly 16 hex
    digits, which are hex even when all are 0-9, as ``%016x`` writes them) or as decimal
    (up to 20 ASCII digits).  Underscores and surrounding whitespace are ignored."""
    if not isinstance(text, str):
        raise InvalidFingerprintError(
            f"fingerprint {describe(text)} is {of_type(text)}, not a str", argument="fingerprint", value=text
        )
    cleaned = text.strip().replace("_", "")
    if _HEX_FINGERPRINT.fullmatch(cleaned):
        value = int(cleaned.removeprefix("0x").removeprefix("0X"), 16)
    elif _DECIMAL_FINGERPRINT.fullmatch(cleaned):
        value = int(cleaned)
    elif (cleaned.isascii() and cleaned.isdigit()) or _HEX_DIGITS.fullmatch(cleaned):
        digits = len(cleaned.removeprefix("0x").removeprefix("0X").lstrip("0"))
        raise InvalidFingerprintError(
            f"fingerprint {describe(text)} has {digits} digits past its leading zeros, too large for 64 bits",
            "a fingerprint has at most 16 hex digits or 20 decimal digits, below 2**64",
            argument="fingerprint",
            value=text,
        )
    else:
        raise InvalidFingerprintError(
            f"fingerprint {describe(text)} is neither hex nor decimal",
            "write it as 0x followed by up to 16 hex digits, as exactly 16 hex digits, or as a decimal number",
            argument="fingerprint",
            value=text,
        )
    return check_fingerprint(value)


def encode_id(doc_id: int) -> bytes:
    return doc_id.to_bytes(8, "big")


def encode_id_range(first: int, count: int) -> list[bytes]:
    """Encoded ids ``first .. first + count - 1``, vectorised."""
    return np.arange(first, first + count, dtype=">u8").view("V8").tolist()


def decode_id(encoded: bytes) -> int:
    return int.from_bytes(encoded, "big")


def table_key(permuted: int, doc_id: int) -> bytes:
    """The 16-byte table entry key for one permuted fingerprint and document id."""
    return permuted.to_bytes(8, "big") + doc_id.to_bytes(8, "big")


def sorted_table_keys(
    permute: Callable[[np.ndarray], np.ndarray], fingerprints: np.ndarray, doc_ids: np.ndarray
) -> np.ndarray:
    """Table entry keys (a ``V16`` array, ascending) for one table's ``permute`` of
    ``fingerprints``.  ``doc_ids`` must be ascending, so a stable sort orders ties by id.
    O(n log n); pure numpy, so it releases the GIL and can run beside LMDB writes."""
    permuted = permute(fingerprints)
    order = np.argsort(permuted, kind="stable")
    pairs = np.empty((len(order), 2), dtype=">u8")
    pairs[:, 0] = permuted[order]
    pairs[:, 1] = doc_ids[order]
    return pairs.view("V16").ravel()


def table_entry_pairs(entries: np.ndarray) -> Iterator[tuple[bytes, bytes]]:
    """(key, empty value) pairs for LMDB from a ``V16`` array of table entry keys, made in C
    (the cheapest way to turn an array into the Python objects py-lmdb takes)."""
    # ndarray exports the buffer protocol, but numpy's stubs declare __buffer__ only for
    # Python 3.12 and later.
    return struct.iter_unpack("16s0s", cast("Buffer", entries))


def decode_table_keys(joined: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Split concatenated 16-byte table keys into (permuted, doc_id) uint64 arrays.  O(n)."""
    pairs = np.frombuffer(joined, dtype=">u8").reshape(-1, 2)
    return pairs[:, 0].astype(np.uint64), pairs[:, 1].astype(np.uint64)
