"""``simdb query`` over many files in one process: the files of --file arguments
(directories too) and --files-from lists are read as ``add`` reads them (one path
expansion, one decoding), fingerprinted and looked up a batch at a time with
:meth:`simdb.Database.query_many`, and each match is printed with the input it belongs to.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import simdb

from . import output
from .ingest import print_notice, quiet_or, reporting_intake
from .records import MATCH_COLUMNS, match_record
from .sources import (
    DEFAULT_MAX_DOC_BYTES,
    ONE_DOCUMENT_KINDS,
    TEXT,
    Input,
    Intake,
    Item,
    JsonlFields,
    PathRules,
    expand_paths,
    read_documents,
)

#: Query documents fingerprinted and looked up together, at most.
QUERY_BATCH_DOCUMENTS = 1_000
#: Characters of query text held at once, at most (plus one document).
QUERY_BATCH_CHARS = 64 * 2**20
#: The column naming the input a match belongs to.
QUERY = output.Column("query")


@dataclass(frozen=True)
class QuerySettings:
    """How near a match must be (as ``simdb query`` takes them), and whether a file's
    match with its own stored key is left out."""

    k: int | None = None
    limit: int | None = None
    threshold: float | None = None
    exclude_self: bool = False


def query_inputs(
    paths: list[str],
    intake: Intake,
    *,
    rules: PathRules,
    files_from: list[str],
    null: bool,
) -> list[Input]:
    """The inputs of ``query --file``/``--files-from``: "-" among ``paths`` is stdin's text
    (one query, named "-"); other paths are expanded as ``add`` expands them, except that a
    pipe named there (``--file <(cmd)``) is read: a query needs no lasting key for it."""
    inputs = [Input("-", TEXT, None, "-")] if "-" in paths else []
    named = [path for path in paths if path != "-"]
    return inputs + expand_paths(named, intake, rules=rules, files_from=files_from, null=null, named_pipes=True)


def _batches(items: Iterable[Item]) -> Iterator[list[Item]]:
    """``items`` in lists of at most QUERY_BATCH_DOCUMENTS documents or QUERY_BATCH_CHARS
    characters (plus one document)."""
    batch: list[Item] = []
    chars = 0
    for item in items:
        batch.append(item)
        chars += len(item[1])
        if len(batch) >= QUERY_BATCH_DOCUMENTS or chars >= QUERY_BATCH_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


@dataclass
class QueryTally:
    """What a query of files met: how many documents, and the keys of those that matched
    nothing because they have nothing to fingerprint (a blank file: it matches nothing, and
    "no document within 5 bits" would be the wrong reason)."""

    documents: int = 0
    featureless: list[str] = field(default_factory=list)


def file_matches(
    database: simdb.Database, documents: Iterable[Item], settings: QuerySettings, tally: QueryTally
) -> Iterator[tuple[str, simdb.Match]]:
    """``(query key, match)`` for every match of every document, in input order, nearest
    first per document, counted in ``tally``.  One
    :meth:`~simdb.Database.query_many` (one read transaction, fingerprints computed in this
    process, once) per batch."""
    # One more match is asked for when a document's own key may take one of the places.
    limit = settings.limit
    asked = limit + 1 if limit is not None and settings.exclude_self else limit
    if database.fingerprinter is None:
        # Fingerprints only so far: a text query stores the default text settings, as
        # query_many(texts=...) and fingerprint() do.
        database.fingerprint("")
    fingerprinter = database.fingerprinter
    assert fingerprinter is not None
    for batch in _batches(documents):
        # Fingerprinted here, so that the sketches tell which texts had no features.
        fingerprints, sketches = fingerprinter.fingerprints_and_sketches(item[1] for item in batch)
        results = database.query_many(
            fingerprints, sketches=sketches, k=settings.k, limit=asked, threshold=settings.threshold
        )
        tally.documents += len(batch)
        for item, sketch, matches in zip(batch, sketches, results):
            if sketch == b"":
                tally.featureless.append(item[0])
            kept = [match for match in matches if not (settings.exclude_self and match.key == item[0])]
            for match in kept[:limit]:
                yield item[0], match


def print_file_matches(
    database: simdb.Database,
    inputs: list[Input],
    intake: Intake,
    settings: QuerySettings,
    *,
    encoding: str | None,
    fields: JsonlFields,
    shown_as: str,
    header: bool,
    named_one_file: bool,
    tally: QueryTally,
) -> int:
    """Print the matches of ``inputs`` in ``shown_as``, counted in ``tally``, and return how
    many were printed.
    As grep names the file of each line only when it searches several, a ``query`` column
    names the input each match belongs to (its key) unless the arguments named one text
    file (``named_one_file``: not a directory, which may hold one file today and more
    tomorrow, so a script's columns never depend on it); JSON lines always carry it."""
    documents = read_documents(inputs, intake, DEFAULT_MAX_DOC_BYTES, encoding=encoding, fields=fields)
    records = (
        {"query": query_key, **match_record(match)}
        for query_key, match in file_matches(database, documents, settings, tally)
    )
    one_query = named_one_file and len(inputs) == 1 and inputs[0].kind in ONE_DOCUMENT_KINDS
    columns = MATCH_COLUMNS if one_query else (QUERY, *MATCH_COLUMNS)
    return output.write_records(records, columns, shown_as, header=header)


def query_intake(json_output: bool, quiet: bool) -> Intake:
    """How ``query`` reports inputs it cannot read (always) and notices (unless --quiet)."""
    return reporting_intake(json_output, quiet_or(print_notice, quiet))
