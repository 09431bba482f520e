"""The records the commands print, as :func:`output.write_records` takes them: how a
match, a document's meta and a similarity become fields and cells, and the shared columns."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import simdb
from simdb import codec

from . import output
from .output import hex_fingerprint, json_line
from .sources import TSV_MSGPACK_PREFIX


def pair_record(pair: simdb.Pair) -> dict[str, Any]:
    """A pair as every format prints it: its keys, similarity and distance."""
    return {"key_a": pair.key_a, "key_b": pair.key_b, "similarity": pair.similarity, "distance": pair.distance}


def match_record(match: simdb.Match) -> dict[str, Any]:
    """A match as every format prints it: key, fingerprint (hex), similarity, distance and
    its meta (see :func:`meta_fields`)."""
    return {
        "key": match.key,
        "fingerprint": hex_fingerprint(match.fingerprint),
        "similarity": match.similarity,
        "distance": match.distance,
        **meta_fields(match.meta),
    }


def meta_fields(meta: Any) -> dict[str, Any]:
    """A document's meta as JSON output carries it: ``{"meta": meta}``, or, for a stored meta
    JSON cannot carry (a msgpack Timestamp written before such meta was refused),
    ``{"meta_msgpack": base64 of its msgpack}``, as an export writes it."""
    try:
        json_line(meta)
    except TypeError:
        return {"meta_msgpack": base64.b64encode(codec.pack_stored(meta)).decode("ascii")}
    return {"meta": meta}


def meta_text(record: Mapping[str, Any]) -> str:
    """The meta of a record made with :func:`meta_fields` as one cell: its JSON, or the
    msgpack form with the prefix a TSV export uses."""
    if "meta" in record:
        return json_line(record["meta"])
    return TSV_MSGPACK_PREFIX + record["meta_msgpack"]


def three_places(value: float | None) -> str:
    """A similarity as the table format shows it."""
    return "" if value is None else f"{value:.3f}"


#: The columns of the commands that print matches, pairs and documents.
SIMILARITY = output.Column("similarity", three_places, right=True)
DISTANCE = output.Column("distance", right=True)
MATCH_COLUMNS = (SIMILARITY, DISTANCE, output.Column("fingerprint"), output.Column("key"))
PAIR_COLUMNS = (SIMILARITY, DISTANCE, output.Column("key_a"), output.Column("key_b"))
