"""The checks of caller-given arguments, one per kind of value, shared by every public entry
point: ints (:func:`check_int`), Hamming distances (:func:`check_distance`), similarity
thresholds (:func:`check_threshold`) and fingerprints (:func:`check_fingerprint` for one,
:func:`fingerprint_array` for many, :func:`check_fingerprint_dtype` for a column).  Each
refuses bools, floats, strings and out-of-range values with the same class wherever it is
used, and its error names the argument and the value given (``argument``, ``value`` and
``expected`` fields, and the same in its message).  Stored data is checked elsewhere:
damage is a CorruptDatabaseError, not a bad argument."""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from simdb.errors import DistanceError, InvalidFingerprintError, InvalidInputError

#: Fingerprints are at most this wide unless a caller says otherwise.
FINGERPRINT_BITS = 64
FINGERPRINT_LIMIT = 1 << FINGERPRINT_BITS
_FULL64 = FINGERPRINT_LIMIT - 1


def of_type(value: object) -> str:
    """``value``'s type for error messages: "of type int" (an article would be wrong for
    half of numpy's names: "an uint64", "a ndarray")."""
    return f"of type {type(value).__name__}"


def describe(value: object, limit: int = 60) -> str:
    """A short repr of a user value for error messages (a huge string is cut before its
    repr is built, not after)."""
    if isinstance(value, (str, bytes, bytearray)) and len(value) > limit:
        value = value[:limit]
    try:
        text = repr(value)
    except RecursionError:
        return f"a deeply nested {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_int(value: object) -> bool:
    """Whether ``value`` is an integer (a Python int or a numpy integer) and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _int_range(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an int in [{minimum}, {maximum}]"
    if minimum == 1:
        return "a positive int"
    if minimum is not None:
        return f"an int >= {minimum}"
    if maximum is not None:
        return f"an int <= {maximum}"
    return "an int"


def check_bool(name: str, value: object) -> bool:
    """``value`` if it is True or False, else InvalidInputError naming ``name`` and the
    value (a flag given as 1 or "yes" would be taken as True elsewhere).  O(1)."""
    if not isinstance(value, bool):
        expected = "True or False"
        raise InvalidInputError(
            f"{name}={describe(value)} is not {expected}", argument=name, value=value, expected=expected
        )
    return value


def check_int(
    name: str,
    value: object,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    error: type[InvalidInputError] = InvalidInputError,
    hint: str | None = None,
) -> int:
    """``value`` as an int if it is an integer (numpy's included; never a bool) in
    [``minimum``, ``maximum``], else raise ``error`` naming ``name`` and the value.  O(1)."""
    if type(value) is int:  # the common case, fast
        number = value
    elif is_int(value):
        number = int(value)  # type: ignore[call-overload]  # an Integral
    else:
        number = None
    if number is None or (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        expected = _int_range(minimum, maximum)
        raise error(f"{name}={describe(value)} is not {expected}", hint, argument=name, value=value, expected=expected)
    return number


#: The most workers (threads or processes) per core that a ``workers=`` takes: beyond a
#: few, more only cost start-up and memory (``--workers 1000`` started 972 processes on 2
#: cores, and ``--workers 100000`` forked until it was killed).
MAX_WORKERS_PER_CORE = 4


def check_workers(workers: object, name: str = "workers", hint: str | None = None) -> int:
    """``workers`` checked as an int >= 1, and taken down to :data:`MAX_WORKERS_PER_CORE`
    per core."""
    return min(check_int(name, workers, minimum=1, hint=hint), MAX_WORKERS_PER_CORE * max(1, os.cpu_count() or 1))


def check_distance(k: object, *, maximum: int | None = None, name: str = "k", hint: str | None = None) -> int:
    """A Hamming distance: an int >= 0 (and <= ``maximum``, if given), else DistanceError
    naming ``name`` and the value.  Every entry point taking ``k`` refuses a bad one
    with this same class.  O(1)."""
    if type(k) is int and k >= 0 and (maximum is None or k <= maximum):
        return k
    expected = "a distance (an int >= 0)" if maximum is None else f"a distance in [0, {maximum}]"
    if is_int(k) and k >= 0 and (maximum is None or k <= maximum):  # type: ignore[operator]
        return int(k)  # type: ignore[call-overload]
    raise DistanceError(f"{name}={describe(k)} is not {expected}", hint, argument=name, value=k, expected=expected)


def check_fingerprint(value: object, name: str = "fingerprint", bits: int | None = FINGERPRINT_BITS) -> int:
    """``value`` as an int if it is a fingerprint: an integer (numpy's included; never a
    bool) in [0, 2**bits) (any width >= 0 with ``bits=None``); else InvalidFingerprintError
    naming ``name`` and the value.  O(1)."""
    if type(value) is int and value >= 0 and (bits is None or not value >> bits):  # the common case, fast
        return value
    expected = "an int >= 0" if bits is None else f"an int in [0, 2**{bits})"
    if not is_int(value):
        raise InvalidFingerprintError(
            f"{name}={describe(value)} is {of_type(value)}, not an int fingerprint",
            "parse hex text with simdb.parse_fingerprint()" if isinstance(value, str) else None,
            argument=name,
            value=value,
            expected=expected,
        )
    number = int(value)  # type: ignore[call-overload]  # an Integral
    if number < 0 or (bits is not None and number >> bits):
        where = "negative" if bits is None else f"outside [0, 2**{bits})"
        raise InvalidFingerprintError(
            f"{name}={describe(number)} is {where}", argument=name, value=value, expected=expected
        )
    return number


def check_threshold(threshold: object) -> float:
    """``threshold`` as a float in (0, 1], else InvalidInputError naming it.  O(1)."""
    expected = "a number in (0, 1]"
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating, np.integer)):
        raise InvalidInputError(
            f"threshold={describe(threshold)} is not {expected}",
            argument="threshold",
            value=threshold,
            expected=expected,
        )
    value = float(threshold)
    if not 0.0 < value <= 1.0:  # NaN fails too
        raise InvalidInputError(
            f"threshold={describe(threshold)} is not in (0, 1]",
            "use a similarity such as 0.9",
            argument="threshold",
            value=threshold,
            expected=expected,
        )
    return value


#: Element types numpy converts to uint64 exactly or refuses with OverflowError (signed
#: numpy scalars are left out: numpy would wrap a negative one silently).
_SAFE_ELEMENT_TYPES = frozenset({int, np.uint64, np.uint32, np.uint16, np.uint8})


def fingerprint_array(fingerprints: Any, name: str = "fingerprints") -> npt.NDArray[np.uint64]:
    """Return ``fingerprints`` as a 1-D ``uint64`` array, or raise
    :class:`InvalidFingerprintError` naming the first bad element.

    Accepts a numpy integer array (unsigned, or signed without negatives) or a sequence of
    ints in [0, 2**64).  Bools, floats and strings are refused rather than coerced, because
    numpy would silently truncate 1.5 to 1 or parse "12".  O(n); a ``uint64`` array is
    returned without a copy.
    """
    if isinstance(fingerprints, (str, bytes)):
        raise InvalidFingerprintError(
            f"{name} must be a sequence of ints, not {type(fingerprints).__name__}", argument=name, value=fingerprints
        )
    if isinstance(fingerprints, np.ndarray):
        array = fingerprints
    else:
        # numpy's own inference is unsafe here: it turns [1, 2**64 - 1] into float64 and
        # [True, 3] into int64.  Check element types first (O(n) in C via set/map).
        values = fingerprints if isinstance(fingerprints, Sequence) else list(fingerprints)
        types = set(map(type, values))
        if types <= _SAFE_ELEMENT_TYPES:
            try:
                return np.array(values, dtype=np.uint64).reshape(-1)
            except OverflowError:
                pass  # a negative or too large int: the slow path names it
        array = np.empty(len(values), dtype=object)
        array[:] = list(values)
    if array.ndim != 1:
        if array.size == 0:
            return np.zeros(0, dtype=np.uint64)
        raise InvalidFingerprintError(f"{name} must be one-dimensional, got shape {array.shape}", argument=name)
    kind = array.dtype.kind
    if kind == "u":
        return array if array.dtype == np.uint64 else array.astype(np.uint64)
    if kind == "i":
        negative = np.flatnonzero(array < 0)
        if negative.size:
            first = int(negative[0])
            raise InvalidFingerprintError(
                f"{name}[{first}]={int(array[first])} is negative; a fingerprint is an int in [0, 2**64)",
                "pass an unsigned (uint64) array, e.g. signed.view(np.uint64) if the values are bit patterns",
                argument=f"{name}[{first}]",
                value=int(array[first]),
            )
        return array.astype(np.uint64)
    if kind == "O":
        out = np.empty(len(array), dtype=np.uint64)
        for position, value in enumerate(array):
            out[position] = check_fingerprint(value, f"{name}[{position}]")
        return out
    if array.size == 0:
        return np.zeros(0, dtype=np.uint64)
    raise InvalidFingerprintError(
        f"{name} has dtype {array.dtype}; fingerprints must be ints in [0, 2**64)",
        "convert to np.uint64 explicitly if the values really are fingerprints",
        argument=name,
    )


def check_fingerprint_dtype(dtype: Any, name: str = "the fingerprint column") -> None:
    """Refuse a fingerprint column (numpy, pandas nullable or Arrow-backed) that is not a
    64-bit integer, before any work runs: its values are reinterpreted as uint64 bit for
    bit.  O(1)."""
    text = str(dtype).lower()
    if not ("int64" in text and "float" not in text):
        raise InvalidFingerprintError(
            f"{name} has dtype {dtype}; it must be uint64 (or int64 holding the same bits)",
            "write fingerprints as a uint64 column",
            argument=name,
        )
