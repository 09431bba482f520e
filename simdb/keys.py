"""Key encoding: how documents, keys and table entries are addressed inside LMDB.

- A table entry's LMDB key is 16 bytes: the permuted fingerprint, 8 bytes big-endian, then
  the document id, 8 bytes big-endian.  Byte order equals numeric order, so a table prefix is
  a contiguous key range, and identical fingerprints under different ids stay distinct keys.
- A document id is 8 bytes big-endian, so ids sort in insertion order.
- A user key is UTF-8; keys longer than LMDB allows are stored in the key index under a
  BLAKE2b digest behind a 0xFF marker byte, which UTF-8 never produces, so the two forms can
  never collide.  The full key always lives in the document record and is compared on lookup.
"""

from __future__ import annotations

import hashlib
import numbers

import numpy as np

from simdb.errors import InvalidFingerprintError, InvalidKeyError

FINGERPRINT_LIMIT = 1 << 64
#: Longest key accepted, in UTF-8 bytes.  Far beyond any URL; bounded so one key cannot
#: exhaust memory or the map.
MAX_KEY_BYTES = 1 << 20
#: Keys up to this many bytes are stored verbatim in the key index (LMDB's limit is 511).
MAX_INLINE_KEY_BYTES = 480
_DIGEST_MARKER = b"\xff"


def describe(value: object, limit: int = 60) -> str:
    """A short repr of a user value for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_key(key: object) -> bytes:
    """Validate a document key and return its UTF-8 bytes.  O(len(key))."""
    if not isinstance(key, str):
        raise InvalidKeyError(f"key {describe(key)} is a {type(key).__name__}, not a str")
    if not key:
        raise InvalidKeyError("key '' is empty", "every document needs a non-empty key")
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidKeyError(
            f"key {describe(key)} is not valid Unicode ({exc.reason} at position {exc.start})",
            "lone surrogates cannot be stored; decode the source with errors='replace'",
        ) from None
    if len(encoded) > MAX_KEY_BYTES:
        raise InvalidKeyError(
            f"key {describe(key)} is {len(encoded)} bytes long, over the {MAX_KEY_BYTES}-byte limit"
        )
    return encoded


def index_key(encoded_key: bytes) -> bytes:
    """The key-index LMDB key for a UTF-8 user key: verbatim if short, else a digest."""
    if len(encoded_key) <= MAX_INLINE_KEY_BYTES:
        return encoded_key
    return _DIGEST_MARKER + hashlib.blake2b(encoded_key, digest_size=32).digest()


def check_fingerprint(fingerprint: object) -> int:
    """Validate a fingerprint: an int (or numpy integer) in [0, 2**64).  O(1)."""
    if isinstance(fingerprint, bool) or not isinstance(fingerprint, numbers.Integral):
        raise InvalidFingerprintError(
            f"fingerprint {describe(fingerprint)} is a {type(fingerprint).__name__}, not an int",
            "parse hex text with simdb.parse_fingerprint()",
        )
    value = int(fingerprint)
    if not 0 <= value < FINGERPRINT_LIMIT:
        raise InvalidFingerprintError(f"fingerprint {describe(value)} is outside [0, 2**64)")
    return value


def parse_fingerprint(text: str) -> int:
    """Parse a fingerprint written as hex (``0x``-prefixed or 16 hex digits) or decimal."""
    cleaned = text.strip().replace("_", "")
    try:
        if cleaned.lower().startswith("0x"):
            value = int(cleaned[2:], 16)
        elif len(cleaned) == 16 and not cleaned.isdecimal():
            value = int(cleaned, 16)
        else:
            value = int(cleaned, 10) if cleaned.isdecimal() else int(cleaned, 16)
    except ValueError:
        raise InvalidFingerprintError(
            f"fingerprint {describe(text)} is neither hex nor decimal",
            "write it as 0x followed by up to 16 hex digits, or as a decimal number",
        ) from None
    return check_fingerprint(value)


def encode_id(doc_id: int) -> bytes:
    return doc_id.to_bytes(8, "big")


def decode_id(encoded: bytes) -> int:
    return int.from_bytes(encoded, "big")


def table_key(permuted: int, doc_id: int) -> bytes:
    """The 16-byte table entry key for one permuted fingerprint and document id."""
    return permuted.to_bytes(8, "big") + doc_id.to_bytes(8, "big")


def table_keys(permuted: np.ndarray, doc_ids: np.ndarray) -> list[bytes]:
    """Table entry keys for arrays of permuted fingerprints and ids, sorted ascending.
    ``doc_ids`` must be ascending, so a stable sort on the fingerprint orders ties by id.
    O(n log n), vectorised but for building the list of bytes objects."""
    order = np.argsort(permuted, kind="stable")
    pairs = np.empty((len(order), 2), dtype=">u8")
    pairs[:, 0] = permuted[order]
    pairs[:, 1] = doc_ids[order]
    return pairs.view("V16").ravel().tolist()  # type: ignore[no-any-return]


def decode_table_keys(joined: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Split concatenated 16-byte table keys into (permuted, doc_id) uint64 arrays.  O(n)."""
    pairs = np.frombuffer(joined, dtype=">u8").reshape(-1, 2)
    return pairs[:, 0].astype(np.uint64), pairs[:, 1].astype(np.uint64)
