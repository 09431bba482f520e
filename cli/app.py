"""The ``simdb`` command: add, query, pairs, clusters, get, keys, remove, compact, stats,
check, hash, export, import and demo.

A thin layer: each command parses its arguments, opens the database, calls the library and
prints.  Results go to stdout, through one writer (:func:`output.write_records`: ``--format``
table, tsv, csv or json; ``--json`` is ``--format json``); progress and diagnostics go to
stderr.  Errors are turned into exit codes in one place, :func:`guarded`:

====  =================================================================================
0     success
1     nothing found: a query, pairs or clusters with no result, a remove that found none
      of its keys, or a check that found problems (like grep)
2     bad usage or bad input (including inputs that could not be read during ``add``)
3     a database error (missing, damaged, unwritable)
130   interrupted with Ctrl-C
143   ended by SIGTERM (``timeout``, ``kill``, a service manager), stopped as Ctrl-C stops it
====  =================================================================================
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

import simdb
from simdb import InvalidInputError, InvalidKeyError, NotADatabaseError
from simdb.config import new_plan
from simdb.database import CLUSTER_MODES, DEFAULT_BLOCKS, DEFAULT_K, check_cluster_mode
from simdb.errors import DASK_INSTALL_HINT, ConfigMismatchError, DaskNotInstalledError
from simdb.fingerprint import FEATURE_KINDS, KINDS, WEIGHT_KINDS
from simdb.keys import check_key, describe
from simdb.plan import read_share_words
from simdb.stopwords import STOPWORD_LISTS

from . import _exit_quietly, output, signals
from .atomic import output_file, write_failed
from .errors import (
    EXIT_INTERRUPTED,
    EXIT_NOTHING_FOUND,
    EXIT_TERMINATED,
    EXIT_USAGE,
    guarded,
    interrupted_exit_code,
    usage_error,
)
from .filekeys import canonical_key
from .ingest import (
    FirstReady,
    Ingest,
    dry_run_target,
    is_new_database,
    print_notice,
    print_problem,
    print_summary,
    quiet_or,
    reporting_intake,
    run_ingest,
    total_bytes,
)
from .input_options import (
    KEY_HELP,
    EncodingOption,
    ExcludeOption,
    FilesFromOption,
    GlobOption,
    HiddenOption,
    KeyBaseOption,
    KeysNullOption,
    NullOption,
    QuietOption,
    RecursiveOption,
    encoding_of,
    path_rules,
)
from .metavars import SimdbGroup
from .output import counted, err, hex_fingerprint, json_line, named_some, out
from .query_inputs import QuerySettings, QueryTally, print_file_matches, query_inputs, query_intake
from .records import (
    MATCH_COLUMNS,
    PAIR_COLUMNS,
    match_record,
    meta_fields,
    meta_text,
    pair_record,
)
from .signals import interrupts_in_this_process_only
from .sources import (
    DEFAULT_MAX_DOC_BYTES,
    EXPORT_FORMAT_VERSION,
    FINGERPRINTS,
    JSONL,
    KEPT_IN_TEXT,
    ONE_DOCUMENT_KINDS,
    PARQUET_HEADER_KEY,
    TSV_MSGPACK_PREFIX,
    TSV_SKETCH_PREFIX,
    ExportHeader,
    Input,
    Intake,
    JsonlFields,
    PathRules,
    decode,
    expand_paths,
    export_format_of,
    export_meta,
    export_sketch,
    looks_binary,
    other_settings,
    printable,
    read_documents,
    read_export,
    read_fingerprint_tsv,
    read_jsonl,
    settings_words,
    shortened,
    stdin_bytes,
    stdin_keys,
    stream_inputs,
    without_sketches,
)

if TYPE_CHECKING:  # importing simdb.fingerprint is deferred to the commands that need it
    from simdb.fingerprint import Fingerprinter

#: Where the database lives when neither --db nor $SIMDB_PATH says otherwise.
DEFAULT_DB_PATH = "simdb-data"
DEFAULT_BATCH_SIZE = 5_000

app = typer.Typer(
    name="simdb",
    cls=SimdbGroup,
    help="A persistent database of 64-bit fingerprints (one-bit minwise hashes by default, or SimHash) for "
    "near-duplicate detection.\n\n"
    "Exit codes: 0 success; 1 nothing found (query, pairs, clusters, remove, get, keys) or check found problems; "
    "2 bad usage or input; 3 database or system error (out of memory, a full disk, a worker killed); "
    "130 interrupted (143: ended by SIGTERM).\n\n"
    "New here? simdb demo builds a small database and shows the main commands on it.",
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# -- options shared by several commands ----------------------------------------------------


def refuse_db_before(context: typer.Context, where: str = "") -> None:
    """Refuse a --db given before a command that opens no database (demo, hash): it would be
    ignored without a word.  Called in the command's body, after its own --help."""
    if context.find_root().params.get("db") is not None:
        raise usage_error(f"{context.info_name} opens no database given by --db{where}")


def chosen_db(context: typer.Context, param: typer.CallbackParam, value: str) -> str:
    """The database a command uses: its own --db, else the --db given before the command
    (``simdb --db PATH pairs``), else $SIMDB_PATH, else the default."""
    source = context.get_parameter_source(param.name) if param.name is not None else None
    # By name: typer carries its own copy of click, whose ParameterSource is not click's.
    if source is None or source.name != "COMMANDLINE":
        before_command = context.find_root().params.get("db")
        value = before_command if isinstance(before_command, str) else value
    if not value:  # "" would put a database's files loose in the working directory
        # Only a command line gives "": click reads an empty $SIMDB_PATH as unset.
        raise usage_error(f"--db is empty: give a database directory, such as --db ./{DEFAULT_DB_PATH}")
    return value


DbOption = Annotated[
    str,
    typer.Option(
        "--db",
        envvar="SIMDB_PATH",
        show_envvar=True,
        metavar="PATH",
        callback=chosen_db,
        help=f"Database directory. Defaults to the --db given before the command, then $SIMDB_PATH, "
        f"then ./{DEFAULT_DB_PATH} in the working directory.",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON lines on stdout (one object per line) instead of tables.")
]


def completes(values: Iterable[str]) -> Callable[[str], list[str]]:
    """Shell completion of an option's ``values``: those that start as typed."""
    choices = tuple(values)

    def complete(incomplete: str) -> list[str]:
        return [value for value in choices if value.startswith(incomplete)]

    return complete


#: The output format of the commands that print records (one writer: output.write_records).
FormatOption = Annotated[
    str | None,
    typer.Option(
        "--format",
        metavar="FORMAT",
        autocompletion=completes(output.FORMATS),
        help="Output format: table (the default), tsv, csv (quoted as RFC 4180), or json (JSON lines, as --json). "
        "TSV leaves out a record with a tab or line break in a value, prints the rest, then exits 2: "
        "use csv or json for such keys.",
        show_default=False,
    ),
]
NoHeaderOption = Annotated[
    bool, typer.Option("--no-header", help="Leave out the line of column names (table, tsv and csv).")
]
DebugOption = Annotated[
    bool, typer.Option("--debug", help="On an error, show the full traceback as well as the one-line message.")
]
ProgressOption = Annotated[
    bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr (only on a terminal).")
]
SearchWorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=1,
        help="Threads for the search (at most 4 per core). Default: every available core.",
        show_default=False,
    ),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=1,
        help="Processes that compute fingerprints (at most 4 per core). Default: every available core.",
        show_default=False,
    ),
]
BatchOption = Annotated[
    int,
    typer.Option(
        "--batch-size",
        min=1,
        max=100_000_000,
        help="Documents per write transaction; Ctrl-C keeps every committed batch.",
    ),
]
IfNewOption = Annotated[
    bool,
    typer.Option(
        "--if-new",
        help="Skip each document that is a near-duplicate of one already stored (or added earlier in this run), "
        "and report the key it duplicates; one batched probe per batch.",
    ),
]
IdFieldOption = Annotated[
    str, typer.Option("--id-field", help="JSONL field holding the key (lines without it get the key FILE:LINE).")
]
TextFieldOption = Annotated[
    str, typer.Option("--text-field", help="JSONL field holding the text; other fields are stored as meta.")
]
QueryIdFieldOption = Annotated[
    str, typer.Option("--id-field", help="JSONL field naming each query (lines without it are named FILE:LINE).")
]
QueryTextFieldOption = Annotated[
    str, typer.Option("--text-field", help="JSONL field holding each query's text; other fields are ignored.")
]
QueryQuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="No per-file notices (text that is not valid UTF-8); errors still show.")
]
IfNewThresholdOption = Annotated[
    float | None,
    typer.Option(
        "--threshold",
        "-t",
        help=f"With --if-new: the smallest similarity (0 < t <= 1) at which a document counts as a near-duplicate, "
        f"among the candidates within the index's k bits (a larger -k at creation dedupes looser thresholds). "
        f"Default {simdb.DEFAULT_THRESHOLD} (where sketches are stored; else within the index's k bits).",
        show_default=False,
    ),
]
CreateKOption = Annotated[
    int | None,
    typer.Option(
        "-k",
        help="The index's k (largest distance answered exactly, 0-63), when the database is created. "
        f"Default {DEFAULT_K}, in {DEFAULT_BLOCKS} blocks ({DEFAULT_BLOCKS} tables) unless --blocks is given.",
        show_default=False,
    ),
]
BlocksOption = Annotated[
    int | None,
    typer.Option(
        "--blocks",
        help="Blocks of the permutation plan (more than k, at most 64), when the database is created. "
        f"Default {DEFAULT_BLOCKS} for the default k, else the fewest whose tables all have 20 leading bits.",
        show_default=False,
    ),
]
#: Said of a fingerprint setting by ``add`` (a database keeps the settings it was created with), not by ``hash``.
FIXED = " Fixed when add creates the database (or, in one the library made without settings, by the first text)."
_FEATURES_HELP = "Fingerprint features: word-shingle (default), word or char."
_NGRAM_HELP = "Tokens per feature (default 3 for word-shingle, 5 for char)."
_STOPWORDS_HELP = (
    "Drop this language's stop words before forming features (english), or none (the default: every word counts)."
)
_KIND_HELP = (
    "Fingerprint kind: minhash (the default: one-bit minwise hashing of the feature set, with a similarity sketch) "
    "or simhash."
)
_WEIGHTS_HELP = (
    "SimHash feature weights: tf (every occurrence counts), binary (each distinct feature once, the default) "
    "or log (1 + log of the count); with --kind simhash only (minhash fingerprints the set of features)."
)


def _setting_option(name: str, help_text: str, values: Iterable[str]) -> Any:
    """A fingerprint-setting option (``--features``, ``--kind``, ...): its ``values``
    complete in the shell, and no default is shown (the database's stored one applies)."""
    return typer.Option(name, autocompletion=completes(values), help=help_text, show_default=False)


FeaturesOption = Annotated[str | None, _setting_option("--features", _FEATURES_HELP + FIXED, FEATURE_KINDS)]
NgramOption = Annotated[int | None, typer.Option("--ngram", min=1, help=_NGRAM_HELP + FIXED, show_default=False)]
StopwordsOption = Annotated[
    str | None, _setting_option("--stopwords", _STOPWORDS_HELP + FIXED, ("none", *STOPWORD_LISTS))
]
KindOption = Annotated[str | None, _setting_option("--kind", _KIND_HELP + FIXED, KINDS)]
WeightsOption = Annotated[str | None, _setting_option("--weights", _WEIGHTS_HELP + FIXED, WEIGHT_KINDS)]
HashFeaturesOption = Annotated[str | None, _setting_option("--features", _FEATURES_HELP, FEATURE_KINDS)]
HashNgramOption = Annotated[int | None, typer.Option("--ngram", min=1, help=_NGRAM_HELP, show_default=False)]
HashStopwordsOption = Annotated[str | None, _setting_option("--stopwords", _STOPWORDS_HELP, ("none", *STOPWORD_LISTS))]
HashKindOption = Annotated[str | None, _setting_option("--kind", _KIND_HELP, KINDS)]
HashWeightsOption = Annotated[str | None, _setting_option("--weights", _WEIGHTS_HELP, WEIGHT_KINDS)]
QueryKOption = Annotated[
    int | None,
    typer.Option(
        "-k",
        min=0,
        max=64,
        help="Largest Hamming distance to report (the default without --threshold: the index's k). Past the "
        "index's k the answer is still exact but slower: nearby prefixes are probed, or every fingerprint compared.",
        show_default=False,
    ),
]
#: pairs and clusters run in memory, so any k is answered exactly.
AllPairsKOption = Annotated[
    int | None,
    typer.Option(
        "-k",
        min=0,
        max=64,
        help="Largest Hamming distance (0-64, any: pairs are found in memory, not limited by the index's k). "
        "Alone, pairs within k bits are reported whatever their similarity; "
        "with --threshold, it is the candidate radius.",
        show_default=False,
    ),
]
ThresholdOption = Annotated[
    float | None,
    typer.Option(
        "--threshold",
        "-t",
        help=f"Smallest similarity (0 < t <= 1) of a near-duplicate: the sketch estimate of the feature sets' Jaccard "
        f"similarity where stored, else the fingerprint's estimate (always, for SimHash of weighted features). "
        f"Default {simdb.DEFAULT_THRESHOLD} unless -k is given.",
        show_default=False,
    ),
]
IncludeFeaturelessOption = Annotated[
    bool,
    typer.Option(
        "--include-featureless",
        help="Also pair documents with no features (nothing to fingerprint: a blank text, say): by default they "
        "are nobody's near-duplicates.",
    ),
]

# -- helpers -------------------------------------------------------------------------------------


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_new_plan(db: str, k: int | None, blocks: int | None) -> None:
    """Refuse a bad -k or --blocks for the database ``db`` would create, before any input is
    read (the database itself is made when the first document is ready).  O(1)."""
    if is_new_database(db):
        new_plan(k, blocks)


def open_existing(path: str, *, readonly: bool = True) -> simdb.Database:
    """Open a database that must already exist, with a message that says how to make one."""
    missing = not os.path.lexists(path)  # a link to nothing is named as one by open
    if missing or _empty_directory(path):
        raise NotADatabaseError(
            f"no database at {path}" + ("" if missing else " (an empty directory)"),
            "add documents with `simdb add`, or point --db / $SIMDB_PATH at one",
        )
    return simdb.open(path, readonly=readonly, create=False)


def _empty_directory(path: str) -> bool:
    """Whether ``path`` is a directory with nothing in it: one scan, stopped at the first entry."""
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:  # not a directory, or not readable: open says which
        return False


def make_fingerprinter(
    features: str | None,
    ngram: int | None,
    stopwords: str | None,
    bits: int = 64,
    *,
    kind: str | None = None,
    weights: str | None = None,
    always: bool = False,
) -> Fingerprinter | None:
    """Fingerprint settings from the command line; None (use the database's) if none given.
    Settings not given take the library's defaults (which depend on ``kind``)."""
    # "none" is a choice (every word counts), not an option left out: it is checked
    # against a database's settings as any other.
    chose_none = stopwords is not None and stopwords.lower() == "none"
    given = {"ngram": ngram, "stopwords": None if chose_none else stopwords, "kind": kind, "weights": weights}
    if (
        features is None
        and bits == 64
        and not always
        and not chose_none
        and all(value is None for value in given.values())
    ):
        return None
    from simdb.fingerprint import Fingerprinter

    chosen: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    return Fingerprinter(features=features or "word-shingle", bits=bits, **chosen)


def checked_threshold(threshold: float | None) -> float | None:
    """``threshold`` if the library takes it as a similarity (0 < t <= 1), else a usage
    error naming --threshold, before any database is opened or created."""
    from simdb.threshold import check_threshold

    if threshold is not None:
        try:
            check_threshold(threshold)
        except InvalidInputError:
            raise usage_error(
                f"--threshold {threshold} is not a similarity: "
                f"give a number above 0 and at most 1, such as {simdb.DEFAULT_THRESHOLD}"
            ) from None
    return threshold


def stdin_read_once(*inputs: tuple[str, list[str] | None]) -> None:
    """A usage error unless at most one of the (option, values) ``inputs`` is '-' (stdin),
    once: a second reader would find stdin already consumed and read nothing."""
    readers = [option for option, values in inputs for value in values or () if value == "-"]
    if len(readers) > 1:
        raise usage_error(f"stdin can be read once, but '-' was given to {' and '.join(readers)}")


def no_files(verb: str, directories: list[str], recursive: bool, glob: Sequence[str] = ()) -> str:
    """What ``add``, ``query`` and ``hash`` say when the directories they were given hold
    no file to read (``glob``: the --glob patterns the files had to match)."""
    matching = f" matching --glob {' or '.join(map(repr, glob))}" if glob else ""
    deeper = "" if recursive else " (-r also reads subdirectories)"
    return f"nothing to {verb}: no files{matching} in {', '.join(directories)}{deeper}"


def read_argument_text(text: str, encoding: str | None = None) -> str:
    """``text``, or stdin's text when it is "-" (read as :func:`read_text_file` does).  A
    text that names an existing file or directory is still the text, with a note on stderr:
    ``simdb query docs/a.txt`` meant ``--file`` far more often than those words."""
    if text == "-":
        return read_text_file("-", encoding)
    try:
        named = len(text) < 4096 and "\n" not in text and os.path.exists(text)
    except (ValueError, OSError):  # a NUL byte, a name too long: no path
        named = False
    if named:
        what = "directory" if os.path.isdir(text) else "file"
        err(
            f"simdb: note: the text {printable(text)} is the name of a {what}; these words are the text "
            f"(--file {shlex.quote(text)} reads what the {what} holds)"
        )
    return text


def read_text_file(path: str, encoding: str | None = None) -> str:
    """A whole text file for ``query`` and ``hash --file`` ("-" is stdin), decoded as ``add``
    decodes (``encoding`` for a file without a byte-order mark, else UTF-8; undecodable
    bytes kept, with a notice); a binary or unreadable file is a usage error, whether it is
    named or piped in."""
    name = "<stdin>" if path == "-" else path
    try:
        data = stdin_bytes().read() if path == "-" else Path(path).read_bytes()
    except OSError as error:
        raise simdb.InvalidInputError(f"{name}: {error.strerror or error}") from None
    if looks_binary(data, encoding):  # NUL bytes, unless a byte-order mark or encoding says UTF-16/32
        raise simdb.InvalidInputError(f"{name} is a binary file (contains NUL bytes), not text")
    intake = Intake(on_problem=print_problem, on_notice=print_notice)
    return decode(data, name, intake, encoding=encoding, keep_undecodable=KEPT_IN_TEXT)


@contextmanager
def needs_dask_extra(command: str) -> Iterator[None]:
    """Run the Parquet and Dask work of ``command`` so that a package of the dask extra that
    is missing (which the library does not name itself) is one line naming it, with the
    install hint, and exit code 2; not an unexpected error."""
    try:
        yield
    except DaskNotInstalledError:
        raise
    except ModuleNotFoundError as error:
        missing = (error.name or "a package of the dask extra").partition(".")[0]
        raise DaskNotInstalledError(f"{command} needs {missing}, which is not installed", DASK_INSTALL_HINT) from None


def output_format(file_format: str | None, json_output: bool) -> str:
    """The output format a command prints in: --format's, or json for --json (the two must
    agree), else table; any other name is a usage error."""
    if json_output:
        if file_format not in (None, "json"):
            raise usage_error(f"--json and --format {file_format} disagree: give one of them")
        return "json"
    chosen = file_format or "table"
    if chosen not in output.FORMATS:
        raise usage_error(f"--format {chosen!r} is not one of {', '.join(output.FORMATS)}")
    return chosen


# -- commands ------------------------------------------------------------------------------------


@app.command(epilog=f"Keys: {KEY_HELP}")
@guarded
@output.keep_going_if_stdout_closes()  # storing the documents is the point, not the output
def add(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Text files (gunzipped if named .gz) or directories to add; '-' reads more paths from stdin, "
            "one per line. "
            "WARC/WET archives (.warc, .wet, .warc.wet.gz, ...) add one document per text record, keyed by "
            "WARC-Target-URI; JSONL files (.jsonl, .jsonl.gz, .ndjson) one per line, as --jsonl does; HTML files "
            "(.html, .htm, .xhtml) their visible text.",
            show_default=False,
        ),
    ] = None,
    recursive: RecursiveOption = False,
    hidden: HiddenOption = False,
    glob: GlobOption = None,
    exclude: ExcludeOption = None,
    files_from: FilesFromOption = None,
    null: NullOption = False,
    key_base: KeyBaseOption = None,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="After adding, remove the stored documents under the PATH arguments whose files are gone: "
            "a PATH's own key, and below a directory the keys its walk would read (-r, --glob, --exclude), "
            "none below a PATH that is missing or an empty directory (renamed? a share not mounted?); URLs "
            "never. Keys do not record where a "
            "document came from: a JSONL id or --fingerprints key named like such a file (under . with no "
            "--glob, any key without a slash) is taken for one; "
            "--dry-run shows what would go.",
        ),
    ] = False,
    encoding: EncodingOption = None,
    quiet: QuietOption = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Report what would be added, replaced, left unchanged, pruned and (with --if-new) skipped, "
            "and store nothing: the run works on a temporary copy of the database (which costs a copy).",
        ),
    ] = False,
    jsonl: Annotated[
        list[str] | None,
        typer.Option(
            "--jsonl",
            help="A JSON-lines file ('-' for stdin, .gz allowed) with one document per line; repeatable.",
            show_default=False,
        ),
    ] = None,
    id_field: IdFieldOption = "id",
    text_field: TextFieldOption = "text",
    fingerprints: Annotated[
        list[str] | None,
        typer.Option(
            "--fingerprints",
            help="A TSV file of KEY<TAB>FINGERPRINT (hex or decimal), optionally <TAB>META-JSON; repeatable.",
            show_default=False,
        ),
    ] = None,
    if_new: IfNewOption = False,
    threshold: IfNewThresholdOption = None,
    workers: WorkersOption = None,
    batch_size: BatchOption = DEFAULT_BATCH_SIZE,
    max_doc_bytes: Annotated[
        int,
        typer.Option(
            "--max-doc-bytes",
            min=1,
            max=2**40,
            help="Largest document read: a text file, a JSONL or TSV line, or a WARC record's payload "
            "(after decompression). Larger ones are reported with their size and skipped, "
            "without being read whole.",
        ),
    ] = DEFAULT_MAX_DOC_BYTES,
    k: CreateKOption = None,
    blocks: BlocksOption = None,
    features: FeaturesOption = None,
    ngram: NgramOption = None,
    stopwords: StopwordsOption = None,
    kind: KindOption = None,
    weights: WeightsOption = None,
    progress: ProgressOption = True,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Add documents: files, directories, JSONL, WARC/WET archives or precomputed fingerprints.

    Adding an existing key replaces it; a document stored already exactly so (same text
    settings, fingerprint, sketch and meta) is left alone and counted as unchanged.  Inputs
    are read in this order: --fingerprints files, PATH arguments (and --files-from lists),
    --jsonl files.  An unreadable or binary file is reported once and counted as failed
    (exit code 2 at the end), and so is a document over --max-doc-bytes; text that is not
    valid UTF-8 (or --encoding) is reported and counted, its undecodable bytes kept.  A run with
    nothing to store creates no database.  Ctrl-C (or SIGTERM) stops cleanly: every committed
    batch stays (and a database created for the first batch stays, empty).  Ends
    with a summary line: added, replaced, skipped, failed, unchanged, and how many documents
    had nothing to fingerprint (featureless: a blank text, say; stored, but never anyone's
    near-duplicate).
    """
    if not (paths or jsonl or fingerprints or files_from):
        raise usage_error(
            "nothing to add: give files or directories, --jsonl FILE or --fingerprints FILE (see simdb add --help)"
        )
    if checked_threshold(threshold) is not None and not if_new:
        raise usage_error("--threshold goes with --if-new (add stores every document otherwise)")
    stdin_read_once(
        ("PATHS", paths), ("--files-from", files_from), ("--jsonl", jsonl), ("--fingerprints", fingerprints)
    )
    check_new_plan(db, k, blocks)
    rules = path_rules(recursive, glob, exclude, key_base, hidden)
    text_encoding = encoding_of(encoding)
    intake = reporting_intake(json_output, quiet_or(print_notice, quiet))
    fingerprint_inputs = stream_inputs(fingerprints or [], FINGERPRINTS, intake)
    path_inputs = expand_paths(
        paths or [], intake, rules=rules, skip_directory=db, files_from=files_from or [], null=null
    )
    jsonl_inputs = stream_inputs(jsonl or [], JSONL, intake)
    inputs = fingerprint_inputs + path_inputs + jsonl_inputs
    named = [path for path in paths or [] if path != "-"]
    # Only lists of paths, all empty, are a pipeline that found nothing, as an empty --jsonl
    # stream is, and end as it does below; anything else read nothing by mistake.
    if not inputs and not prune and (intake.failed or named):
        database_itself = [path for path in named if os.path.realpath(path) == os.path.realpath(db)]
        if database_itself:  # its files are never read as documents
            err(f"simdb: nothing to add: {database_itself[0]} is the database itself (--db), whose files are not read")
        elif not intake.failed:  # else the missing inputs were reported
            err(f"simdb: {no_files('add', named, recursive, glob or ())}")
        print_summary(intake, json_output)
        raise typer.Exit(EXIT_USAGE)
    # A new database takes the default settings even when only fingerprints come, as
    # `simdb hash` makes them: without settings they would be judged as SimHash until the
    # first text arrived and made the database minhash, each pair's similarity changing.
    fingerprinter = make_fingerprinter(features, ngram, stopwords, kind=kind, weights=weights)
    creating = is_new_database(db)
    defaults_taken = fingerprinter is None and creating
    if defaults_taken:
        fingerprinter = make_fingerprinter(None, None, None, always=True)
    # Read up to the first document before opening the database, so a run whose inputs all
    # fail (or hold nothing) creates no database whose settings a corrected retry would meet.
    fingerprint_items = FirstReady(read_fingerprint_tsv(fingerprint_inputs, intake, max_bytes=max_doc_bytes))
    fields = JsonlFields(id_field, text_field)
    text_items = FirstReady(
        chain(
            read_documents(path_inputs, intake, max_doc_bytes, encoding=text_encoding, fields=fields),
            read_jsonl(jsonl_inputs, intake, id_field=id_field, text_field=text_field, max_bytes=max_doc_bytes),
        )
    )
    if not fingerprint_items.ready() and not text_items.ready() and is_new_database(db):
        err(f"simdb: nothing to add; no database was created at {db}")
        print_summary(intake, json_output)
        raise typer.Exit(EXIT_USAGE if intake.failed else 0)
    if defaults_taken and fingerprint_inputs:  # said once a database will be made with them
        quiet_or(print_notice, quiet)(
            db,
            "a new database: its fingerprints are taken as made with the default settings "
            "(minhash, as simdb hash makes them); for SimHash or other settings give --kind and the rest",
        )
    path_arguments = [path for path in paths or [] if path != "-"]

    def feed(ingest: Ingest) -> None:
        if fingerprint_inputs:
            ingest.fingerprints(fingerprint_items)
        if path_inputs or jsonl_inputs:  # texts fix the text settings of a new database
            ingest.texts(text_items)
        if prune:
            ingest.prune(path_arguments, rules)

    with (
        dry_run_target(db, dry_run) as target,
        simdb.open(target, k=k, blocks=blocks, fingerprinter=fingerprinter) as database,
    ):
        if creating and k is not None:
            note_a_costly_index(database, quiet_or(print_notice, quiet))
        code = run_ingest(
            database,
            intake,
            feed,
            total_bytes=total_bytes(inputs),
            if_new=if_new,
            threshold=threshold,
            workers=workers or available_cores(),
            batch_size=batch_size,
            json_output=json_output,
            show_progress=progress and not quiet,
            dry_run=dry_run,
        )
    if code:
        raise typer.Exit(code)


@app.command(epilog=f"Keys: {KEY_HELP}")
@guarded
def query(
    text: Annotated[
        str | None, typer.Argument(help="The text to look for; '-' reads it from stdin.", show_default=False)
    ] = None,
    file: Annotated[
        list[str] | None,
        typer.Option(
            "--file",
            "-f",
            help="Look for the text of this file ('-' for stdin, or a pipe such as <(cmd)), or of each file of this "
            "directory; repeatable. "
            "Files are read as add reads them (JSONL and WARC files hold one query per document).",
            show_default=False,
        ),
    ] = None,
    files_from: FilesFromOption = None,
    recursive: RecursiveOption = False,
    hidden: HiddenOption = False,
    glob: GlobOption = None,
    exclude: ExcludeOption = None,
    null: NullOption = False,
    key_base: KeyBaseOption = None,
    exclude_self: Annotated[
        bool,
        typer.Option(
            "--exclude-self",
            help="Leave out each file's match with its own stored key (by default it is reported, "
            "as the file's match with itself).",
        ),
    ] = False,
    encoding: EncodingOption = None,
    id_field: QueryIdFieldOption = "id",
    text_field: QueryTextFieldOption = "text",
    quiet: QueryQuietOption = False,
    fingerprint: Annotated[
        str | None,
        typer.Option(
            "--fingerprint", help="Look for this fingerprint (hex, e.g. 0x1f..., or decimal).", show_default=False
        ),
    ] = None,
    k: QueryKOption = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            "-t",
            help="Report only documents at least this similar (0 < t <= 1): the candidates within the distance the "
            "threshold calls for (past the index's k, probes of nearby prefixes or a scan of every stored fingerprint, "
            "whichever is cheaper; -k sets the radius instead, at the index's speed up to its k). "
            "Without it, every document within k bits.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Show at most this many matches per query, the first in the order printed.",
            show_default=False,
        ),
    ] = None,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    file_format: FormatOption = None,
    no_header: NoHeaderOption = False,
    debug: DebugOption = False,
) -> None:
    """Find the stored documents near a text, files or a fingerprint, using the index.

    Prints similarity, distance, fingerprint and key, most similar first (then nearest).
    The similarity is the sketch estimate of the two texts' Jaccard similarity where both
    have sketches, else the fingerprints' estimate from their distance.  With --file or --files-from, many files are
    checked in one process, a batch at a time, and each match also names its query: the
    file's key (as add would key it) or the JSONL/WARC document's key.  Nothing is added.
    Exits 1 when nothing matches, like grep; 2 when an input could not be read.
    """
    file_mode = bool(file or files_from)
    if sum((text is not None, file_mode, fingerprint is not None)) != 1:
        raise usage_error("give exactly one of TEXT, --file FILE (or --files-from LIST) or --fingerprint HEX")
    file_options = {
        "-r": recursive,
        "--hidden": hidden,
        "--glob": glob,
        "--exclude": exclude,
        "-0": null,
        "--key-base": key_base,
        "--exclude-self": exclude_self,
        "--encoding": encoding is not None and text != "-",  # stdin's text is decoded as a file's
        "--id-field": id_field != "id",
        "--text-field": text_field != "text",
    }
    given = [name for name, value in file_options.items() if value]
    if not file_mode and given:
        raise usage_error(f"{' and '.join(given)} {'goes' if len(given) == 1 else 'go'} with --file or --files-from")
    stdin_read_once(("--file", file), ("--files-from", files_from))
    checked_threshold(threshold)
    shown_as = output_format(file_format, json_output)
    with open_existing(db) as database:
        if file_mode:
            intake = query_intake(json_output, quiet)
            rules = path_rules(recursive, glob, exclude, key_base, hidden)
            inputs = query_inputs(file or [], intake, rules=rules, files_from=files_from or [], null=null)
            named = [path for path in file or [] if path != "-"]
            if not inputs and named and not intake.failed:  # as add says it: no documents is no answer
                raise usage_error(no_files("query", named, recursive))
            settings = QuerySettings(k, limit, threshold, exclude_self)
            tally = QueryTally()
            found = print_file_matches(
                database,
                inputs,
                intake,
                settings,
                encoding=encoding_of(encoding),
                fields=JsonlFields(id_field, text_field),
                shown_as=shown_as,
                header=not no_header,
                named_one_file=file is not None and len(file) == 1 and not files_from and not os.path.isdir(file[0]),
                tally=tally,
            )
            for key in tally.featureless[:10]:
                err(f"simdb: {printable(key)}: {NOTHING_TO_FINGERPRINT}")
            if intake.failed:  # each was reported as it was met
                raise typer.Exit(EXIT_USAGE)
            if not found and len(tally.featureless) == tally.documents > 0:
                raise typer.Exit(EXIT_NOTHING_FOUND)  # said of each above
            if not found:
                err(f"simdb: no document {nearness(threshold, k if threshold is not None else database.k)}")
                raise typer.Exit(EXIT_NOTHING_FOUND)
            return
        wordless = False
        if fingerprint is not None:
            matches = database.query(simdb.parse_fingerprint(fingerprint), k, limit=limit, threshold=threshold)
        else:
            query_text = read_argument_text(text or "", encoding_of(encoding))
            matches = database.query(k=k, text=query_text, limit=limit, threshold=threshold)
            # The library matches a featureless text to nothing; say that rather than how
            # far the search looked.  Fingerprinted only when nothing was found.
            fingerprinter = database.fingerprinter
            wordless = (
                not matches and fingerprinter is not None and not fingerprinter.fingerprint_and_sketch(query_text)[1]
            )
        distance_limit = database.k if k is None else k
    output.write_records((match_record(match) for match in matches), MATCH_COLUMNS, shown_as, header=not no_header)
    if wordless:
        err(f"simdb: the query text has {NOTHING_TO_FINGERPRINT}")
        raise typer.Exit(EXIT_NOTHING_FOUND)
    if not matches:  # TSV and CSV have printed their header, as over matches
        err(f"simdb: no document {nearness(threshold, k if threshold is not None else distance_limit)}")
        raise typer.Exit(EXIT_NOTHING_FOUND)


#: Why a query text matched nothing when it has no features.
NOTHING_TO_FINGERPRINT = "nothing to fingerprint under the database's text settings; it matches nothing"


PathsOption = Annotated[
    bool,
    typer.Option(
        "--paths",
        help="The arguments (and stdin lines) are file paths: each is made its canonical key as add makes it "
        "(relative to --key-base), so ./docs/a.txt and $PWD/docs/a.txt name the key docs/a.txt.",
    ),
]


def wanted_keys(keys: list[str], intake: Intake, *, null: bool, paths: bool, key_base: str | None) -> list[str]:
    """The keys ``remove`` and ``get`` were given, in order: the arguments, with "-" read
    as stdin's keys (:func:`stdin_keys`), each made its file's canonical key with
    ``--paths``.  A usage error when --key-base comes without --paths or names no
    directory."""
    if key_base is not None and not paths:
        raise usage_error("--key-base goes with --paths (keys are otherwise taken as given)")
    path_rules(False, None, None, key_base)  # checks --key-base
    wanted: list[str] = []
    for key in keys:
        wanted.extend(stdin_keys(intake, null=null) if key == "-" else [key])
    return [canonical_key(path, key_base) for path in wanted] if paths else wanted


def nearness(threshold: float | None, k: int | None) -> str:
    """How near a match had to be, for "nothing found" messages."""
    return (
        f"within {k} bits"
        if threshold is None
        else f"with similarity >= {threshold:g}" + (f" within {k} bits" if k is not None else "")
    )


@app.command()
@guarded
def pairs(
    k: AllPairsKOption = None,
    threshold: ThresholdOption = None,
    include_featureless: IncludeFeaturelessOption = False,
    histogram: Annotated[
        bool,
        typer.Option(
            "--histogram",
            help="Instead of the pairs, print a bar chart of how many pairs there are per similarity (0.05 steps, "
            "from the threshold up: the row 0.90 counts the pairs from 0.90 up to 0.95, the last row those at 1.0), "
            "or per distance 0..k with -k alone.",
        ),
    ] = False,
    parquet: Annotated[
        str | None,
        typer.Option(
            "--parquet",
            help=(
                "Run the batch job on Dask over these (key, fingerprint) Parquet files (a path or glob, "
                "e.g. from export --format parquet) instead of a database; needs --out. It reports the pairs within "
                "-k bits (default 3; no --threshold: Parquet holds no sketches)."
            ),
        ),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            help=(
                "With --parquet: a Dask scheduler ADDRESS, or 'local' (the default) "
                "to start a local multi-process cluster for the job."
            ),
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Threads for the search (at most 4 per core; default: every available core); with --parquet and "
            "a local cluster, worker processes (default: one per core).",
        ),
    ] = None,
    out_dir: Annotated[
        str | None,
        typer.Option(
            "--out",
            "--output",
            "-o",
            help="With --parquet: the directory to write the pairs to, as Parquet (key_a, key_b, distance).",
        ),
    ] = None,
    sort: Annotated[
        str | None,
        typer.Option(
            "--sort",
            autocompletion=completes(PAIR_ORDERS),
            help="Order of the pairs: similarity (the default: most similar first, then nearest, then by key_a "
            "and key_b), key (by key_a, then key_b), or none (as found: streamed, without holding the pairs in "
            "memory, in an order that may differ between runs).",
        ),
    ] = None,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    file_format: FormatOption = None,
    no_header: NoHeaderOption = False,
    debug: DebugOption = False,
) -> None:
    """Print every near-duplicate pair: two keys, their similarity and their distance.

    By default a pair is two documents with similarity >= the threshold (-t, default
    0.9); -k alone reports every pair within k bits instead.  Runs in memory at any k,
    not limited by the index.  Documents without features never pair unless
    --include-featureless.  Each unordered pair is printed once, the first-added key
    first, in the order --sort gives (the same on every run; --sort none streams them
    as found).  Exits 1 when there are none.

    With --parquet, runs the exact bit-distance search as a batch job on Dask and writes
    the pairs to --out.
    """
    checked_threshold(threshold)
    shown_as = output_format(file_format, json_output)
    if sort is not None and sort not in PAIR_ORDERS:
        raise usage_error(f"--sort {sort!r} is not one of {', '.join(PAIR_ORDERS)}")
    if histogram and sort is not None:
        raise usage_error("--sort does not go with --histogram: its rows are always in bucket order")
    if parquet is not None:
        if histogram or threshold is not None or include_featureless or sort is not None:
            raise usage_error(
                "--histogram, --threshold, --include-featureless and --sort do not go with --parquet: "
                "the batch job writes the pairs within -k bits to --out"
            )
        run_distributed_pairs(parquet, out_dir, k, scheduler, workers, shown_as == "json")
        return
    if out_dir is not None or scheduler is not None:
        raise usage_error("--out and --scheduler go with --parquet")
    limit = effective_threshold(threshold, k)
    with open_existing(db) as database:
        warn_of_a_long_search(database, k, threshold)
        if histogram:
            total = print_pair_histogram(database, k, limit, include_featureless, shown_as, not no_header, workers)
        else:
            found = ordered_pairs(
                database.pairs(k, threshold=threshold, include_featureless=include_featureless, workers=workers),
                sort or "similarity",
            )
            # TSV and CSV print their header even over no pairs, as every command does.
            records = (pair_record(pair) for pair in found)
            total = output.write_records(records, PAIR_COLUMNS, shown_as, header=not no_header)
    if not total:
        err(f"simdb: no pairs {nearness(limit, k)}")
        raise typer.Exit(EXIT_NOTHING_FOUND)


#: The orders of ``pairs --sort``.
PAIR_ORDERS = ("similarity", "key", "none")


def ordered_pairs(found: Iterator[simdb.Pair], order: str) -> Iterator[simdb.Pair]:
    """``found`` in ``order`` (see :data:`PAIR_ORDERS`): a total order on the pairs, so the
    output is the same whatever the search's order (threads, runs); "none" streams them as
    found.  Sorting holds every pair in memory: O(pairs log pairs)."""
    if order == "none":
        return found
    if order == "key":
        return iter(sorted(found, key=lambda pair: (pair.key_a, pair.key_b)))
    return iter(sorted(found, key=lambda pair: (-pair.similarity, pair.distance, pair.key_a, pair.key_b)))


def effective_threshold(threshold: float | None, k: int | None) -> float | None:
    """The similarity that pairs and clusters require: the one given, the default when
    neither it nor k is given, and none (bit distance alone) for -k alone."""
    if threshold is None and k is None:
        return float(simdb.DEFAULT_THRESHOLD)
    return threshold


def similarity_buckets(threshold: float) -> list[float]:
    """The similarity histogram's buckets (0.05 wide, named by their lower end, as
    :meth:`simdb.Database.pair_histogram` names them), from the one holding ``threshold`` up to 1.0."""
    lowest = math.floor(threshold * 20 + 1e-9)  # the epsilon keeps 0.95 in its own bucket
    return [round(step / 20, 2) for step in range(lowest, 21)]


#: The candidates per stored document that a query's probes read, from which a new
#: database's -k is said to be costly: -k 12 (91 tables, prefixes of 8 and 9 bits) reads
#: about 0.18 per query, where the default k reads a few per million.  A large -k is rarely
#: what was meant: pairs and clusters take any -k without the index, and a threshold widens
#: a query's radius by itself.
COSTLY_INDEX_SHARE = 0.1


def note_a_costly_index(database: simdb.Database, report: Callable[[str, str], None]) -> None:
    """Say, through ``report(where, message)``, when the index just created reads a large
    share of itself per query (a large -k)."""
    plan = database.plan
    share = plan.read_share
    if share >= COSTLY_INDEX_SHARE:
        shortest = min(table.leading_bits for table in plan.tables)
        report(
            database.path,
            f"-k {plan.k} makes {len(plan.tables)} tables with prefixes as short as "
            f"{counted(shortest, 'bit')}: each query "
            f"reads {read_share_words(plan.read_share)}; pairs and clusters take any -k without "
            "the index, and a query's threshold widens its radius by itself",
        )


#: The search time (one core, by the cost model) from which pairs and clusters say that they
#: will take a while: a loose threshold on a large database otherwise ran silently for minutes.
LONG_SEARCH_SECONDS = 30.0


def warn_of_a_long_search(database: simdb.Database, k: int | None, threshold: float | None) -> None:
    """Say on stderr, before it starts, that the pair search these options ask for is long."""
    seconds = database.pair_search_seconds(k, threshold=threshold)
    if seconds >= LONG_SEARCH_SECONDS:
        # -k sets the radius whenever it is given; else the threshold does (0.9 by default).
        asked, remedy = (
            (f"-k {k}", "a lower -k")
            if k is not None
            else (f"-t {threshold or simdb.DEFAULT_THRESHOLD:g}", "a higher -t")
        )
        err(
            f"simdb: {asked} on {counted(len(database), 'document')} means a long search: about "
            f"{output.human_duration(seconds)} of one core's work, more with many candidates to compare "
            f"({remedy} searches far less)"
        )


def print_pair_histogram(
    database: simdb.Database,
    k: int | None,
    threshold: float | None,
    include_featureless: bool,
    shown_as: str,
    header: bool,
    workers: int | None,
) -> int:
    """Print how many pairs there are per similarity bucket (with a threshold) or per
    distance 0..k (bit mode, -k alone), as a chart (table format) or records; return the
    number of pairs.  The search runs on ``workers`` threads (None: every core).  Cost as
    pairs, memory O(buckets)."""
    if threshold is None:
        per_distance = database.pair_histogram(
            k, by="distance", include_featureless=include_featureless, workers=workers
        )
        counts = [per_distance[distance] for distance in sorted(per_distance)]
        if shown_as == "table":
            output.histogram("pairs", counts, show_header=header)
        else:
            records = ({"distance": distance, "pairs": count} for distance, count in enumerate(counts))
            output.write_records(records, [output.Column("distance"), output.Column("pairs")], shown_as, header=header)
        return sum(counts)
    per_bucket = database.pair_histogram(
        k, threshold=threshold, by="similarity", include_featureless=include_featureless, workers=workers
    )
    buckets = similarity_buckets(threshold)
    counts = [per_bucket.get(bucket, 0) for bucket in buckets]
    if shown_as == "table":
        output.histogram(
            "pairs",
            counts,
            first_column="similarity",
            labels=[f"{bucket:.2f}" for bucket in buckets],
            show_header=header,
        )
    else:
        buckets_counted: Iterator[dict[str, Any]] = (
            {"similarity": bucket, "pairs": count} for bucket, count in zip(buckets, counts)
        )
        columns = [output.Column("similarity"), output.Column("pairs")]
        output.write_records(buckets_counted, columns, shown_as, header=header)
    return sum(per_bucket.values())


def run_distributed_pairs(
    parquet: str, out_dir: str | None, k: int | None, scheduler: str | None, workers: int | None, json_output: bool
) -> None:
    """The --parquet form of pairs: the Dask batch job, reporting a summary line."""
    if out_dir is None:
        raise usage_error("--parquet needs --out DIR for the pairs it writes")
    import logging

    from simdb.distributed import run_pairs_job

    logging.getLogger("distributed").setLevel(logging.ERROR)  # its shuffle notices are not ours to show
    try:
        with needs_dask_extra("pairs --parquet"):
            summary = run_pairs_job(parquet, out_dir, k=k, scheduler=scheduler, workers=workers)
    except FileNotFoundError as error:
        if error.filename is not None:  # a named path, such as --out's: the usual message names it
            raise
        raise InvalidInputError(f"--parquet {parquet}: no such file, or nothing matches the pattern") from None
    except InvalidInputError as error:
        if error.argument != "fingerprints" or error.value != parquet:
            raise
        raise InvalidInputError(f"--parquet {parquet}: no such file, or nothing matches the pattern") from None
    except Exception as error:
        if type(error).__module__.partition(".")[0] != "pyarrow":
            raise
        # pyarrow's errors (ArrowInvalid: "Parquet magic bytes not found", ...) mean the input.
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        raise InvalidInputError(f"--parquet {parquet}: cannot read it as Parquet ({reason})") from None
    if json_output:
        out(json_line({"event": "summary", **summary}))
    else:
        err(
            f"{counted(summary['pairs'], 'pair')} within {summary['k']} bits among "
            f"{counted(summary['rows'], 'fingerprint')}, written to {summary['out_dir']} "
            f"({counted(summary['workers'], 'worker')}, {summary['seconds']:.1f} s)"
        )
    if not summary["pairs"]:
        raise typer.Exit(EXIT_NOTHING_FOUND)


@app.command()
@guarded
def clusters(
    k: AllPairsKOption = None,
    threshold: ThresholdOption = None,
    include_featureless: IncludeFeaturelessOption = False,
    histogram: Annotated[
        bool,
        typer.Option(
            "--histogram",
            help="Instead of the clusters, print how many clusters and clustered documents each threshold gives, from "
            "--threshold up to 1.0 in 0.05 steps (or each k=d for d in 0..k with -k alone), as a bar chart: each "
            "row is what clustering at that threshold alone would give, not a count per step.",
        ),
    ] = False,
    singletons: Annotated[
        bool, typer.Option("--singletons", help="Also print documents with no near-duplicate, as clusters of one.")
    ] = False,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            metavar="MODE",
            autocompletion=completes(CLUSTER_MODES),
            help="components: documents connected by chains of pairs; leaders: in the order added, a document no "
            "earlier one took leads every later document it pairs with that none took yet, so every member is a "
            "near-duplicate of the representative (what to keep when deduplicating).",
        ),
    ] = "components",
    workers: SearchWorkersOption = None,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    file_format: FormatOption = None,
    no_header: NoHeaderOption = False,
    debug: DebugOption = False,
) -> None:
    """Print groups of near-duplicates: documents connected by chains of pairs, or with
    --mode leaders each document with the near-duplicates it leads.

    Pairs are as simdb pairs finds them: similarity >= the threshold (-t, default 0.9),
    or within k bits with -k alone; in memory, at any k.  Each cluster shows its
    representative (the first-added member), its other members, and its spread: the
    smallest similarity of the pairs inside it (its weakest link; min_similarity in
    JSON, TSV and CSV) and the smallest similarity of a member to the representative
    (to_representative), both empty for a singleton.  Members of components are linked
    through chains, so the second can be far below the threshold: such a cluster holds
    documents that are not near-duplicates of its representative, which --mode leaders
    never makes.  Clusters come in order of their representatives.  Exits 1 when there
    are none.

    TSV and CSV print one row per member (cluster, size, min_similarity,
    to_representative, key), the representative first; JSON prints one line per cluster.
    """
    checked_threshold(threshold)
    check_cluster_mode(mode)  # before any output: the clusters come from a generator
    shown_as = output_format(file_format, json_output)
    limit = effective_threshold(threshold, k)
    with open_existing(db) as database:
        warn_of_a_long_search(database, k, threshold)

        def found(at_k: int | None, at_threshold: float | None) -> Iterator[list[str]]:
            return database.clusters(
                at_k,
                threshold=at_threshold,
                singletons=singletons,
                include_featureless=include_featureless,
                workers=workers,
                mode=mode,
            )

        if histogram:
            if limit is None:  # -k alone: one row per distance
                assert k is not None
                levels: list[tuple[int | None, float | None]] = [(distance, None) for distance in range(k + 1)]
                names: list[Any] = list(range(k + 1))
                first_column = "k"
            else:  # one row per threshold, strictest last
                thresholds = [limit] + [bucket for bucket in similarity_buckets(limit) if bucket > limit]
                levels = [(k, level) for level in thresholds]
                names = [round(level, 4) for level in thresholds]
                first_column = "threshold"
            groups, documents = [], []
            for level in levels:  # one in-memory clustering each, counted as it streams
                sizes = [len(members) for members in found(*level)]
                groups.append(len(sizes))
                documents.append(sum(sizes))
            total = groups[0] if limit is not None else groups[-1]
            if shown_as == "table":
                labels = [f"{name:.2f}" if limit is not None else str(name) for name in names]
                output.histogram(
                    "documents",
                    documents,
                    [("clusters", groups)],
                    first_column=first_column,
                    labels=labels,
                    show_header=not no_header,
                )
            else:  # the table's columns, in its order
                records = (
                    {first_column: name, "documents": document_count, "clusters": group_count}
                    for name, group_count, document_count in zip(names, groups, documents)
                )
                columns = [output.Column(first_column), output.Column("documents"), output.Column("clusters")]
                output.write_records(records, columns, shown_as, header=not no_header)
        else:
            spread = database.clusters_with_spread(
                k,
                threshold=threshold,
                singletons=singletons,
                include_featureless=include_featureless,
                workers=workers,
                mode=mode,
            )
            total = print_clusters(spread, shown_as, not no_header)
    if not total:
        err(f"simdb: no clusters {nearness(limit, k)}")
        raise typer.Exit(EXIT_NOTHING_FOUND)


#: The columns of clusters in TSV and CSV: one row per member.
CLUSTER_MEMBER_COLUMNS = (
    output.Column("cluster"),
    output.Column("size"),
    output.Column("min_similarity"),
    output.Column("to_representative"),
    output.Column("key"),
)


def print_clusters(found: Iterable[simdb.Cluster], shown_as: str, header: bool) -> int:
    """Print clusters in ``shown_as``: a block per cluster (table), a JSON line per cluster,
    or a TSV/CSV row per member; return how many clusters.  Streams: O(largest cluster)."""
    numbered = enumerate(found, 1)
    count = 0
    if shown_as == "table":
        for count, (keys, spread, to_representative) in numbered:
            weakest = f", weakest link {spread:.3f}" if spread is not None else ""
            if to_representative is not None and len(keys) > 2:  # of two, it is the weakest link
                weakest += f", least similar to it {to_representative:.3f}"
            representative = output.shown(keys[0])
            out(f"cluster {count}: {counted(len(keys), 'document')}, representative {representative}{weakest}")
            for member in keys[1:]:
                out(f"    {output.shown(member)}")
        return count
    if shown_as == "json":
        records: Iterable[dict[str, Any]] = (
            {
                "cluster": number,
                "representative": keys[0],
                "size": len(keys),
                "min_similarity": spread,
                "to_representative": to_representative,
                "members": keys,
            }
            for number, (keys, spread, to_representative) in numbered
        )
        return output.write_records(records, (), shown_as)
    clusters_seen = [0]

    def member_rows() -> Iterator[dict[str, Any]]:
        for number, (keys, spread, to_representative) in numbered:
            clusters_seen[0] = number
            for key in keys:
                yield {
                    "cluster": number,
                    "size": len(keys),
                    "min_similarity": spread,
                    "to_representative": to_representative,
                    "key": key,
                }

    output.write_records(member_rows(), CLUSTER_MEMBER_COLUMNS, shown_as, header=header)
    return clusters_seen[0]


#: How many keys that were not stored ``remove`` names; the rest are counted.
NOT_FOUND_NAMED = 10


@app.command()
@guarded
@output.keep_going_if_stdout_closes()  # removing the documents is the point, not the output
def remove(
    keys: Annotated[
        list[str],
        typer.Argument(
            help="Keys of the documents to remove; '-' reads keys from stdin, one per line. "
            "With --paths, file paths, made keys as add makes them.",
            show_default=False,
        ),
    ],
    paths: PathsOption = False,
    key_base: KeyBaseOption = None,
    null: KeysNullOption = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Report what would be removed, and remove nothing (the database is only read)."),
    ] = False,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Remove documents by key.

    Keys are taken as given (a key may be a URL or a JSONL id), unless --paths says they
    are file paths.  Keys that are not stored are counted and named (the first ten), not
    errors; exits 1 if none of them was found.  A line of stdin that is not UTF-8 is
    reported with its number and skipped (exit 2).
    """
    intake = reporting_intake(json_output, print_notice)
    wanted = wanted_keys(keys, intake, null=null, paths=paths, key_base=key_base)
    unique = list(dict.fromkeys(wanted))
    with open_existing(db, readonly=dry_run) as database:
        missing: list[str] = []  # the first few keys not stored, to name them
        storable: list[str] = []
        for key in unique:
            try:
                check_key(key)
            except InvalidKeyError:  # empty, too long: no such key can be stored, nor removed
                can_be_stored = False
            else:
                storable.append(key)
                can_be_stored = True
            if len(missing) < NOT_FOUND_NAMED and not (can_be_stored and database.get(key) is not None):
                missing.append(key)
        as_path = None if paths else stored_as_path(database, missing)
        removed = sum(key in database for key in storable) if dry_run else removed_reporting(database, storable)
    not_found = len(unique) - removed
    if as_path is not None:
        err(as_path)
    missing = missing[:not_found]
    if json_output:
        failures = {"failed": intake.failed} if intake.failed else {}
        done = {"dry_run": True} if dry_run else {}
        out(json_line({"removed": removed, "not_found": not_found, "not_found_keys": missing, **failures, **done}))
    else:
        line = f"{'would remove' if dry_run else 'removed'} {counted(removed, 'document')}"
        if not_found:
            verb = "was" if not_found == 1 else "were"
            line += f"; {counted(not_found, 'key')} {verb} not stored: {named_some(missing, not_found)}"
        if intake.failed:
            line += f"; {counted(intake.failed, 'line')} of stdin {'was' if intake.failed == 1 else 'were'} not UTF-8"
        out(line)
    if intake.failed:
        raise typer.Exit(EXIT_USAGE)
    if wanted and not removed:
        raise typer.Exit(EXIT_NOTHING_FOUND)


@app.command()
@guarded
@output.keep_going_if_stdout_closes()  # compacting is the point, not the output
def compact(db: DbOption = DEFAULT_DB_PATH, json_output: JsonOption = False, debug: DebugOption = False) -> None:
    """Shrink the database file and report its size before and after.

    Rewrites the database without the space left by removed and replaced documents; safe
    while other processes use it.
    """
    with open_existing(db, readonly=False) as database:
        result = database.compact()
    if json_output:
        out(json_line({"bytes_before": result.bytes_before, "bytes_after": result.bytes_after}))
    else:
        saved = result.bytes_before - result.bytes_after
        share = f" ({saved / result.bytes_before:.0%} smaller)" if result.bytes_before and saved > 0 else ""
        out(
            f"compacted {db}: {output.human_bytes(result.bytes_before)} -> "
            f"{output.human_bytes(result.bytes_after)}{share}"
        )


@app.command()
@guarded
def stats(
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    file_format: FormatOption = None,
    no_header: NoHeaderOption = False,
    debug: DebugOption = False,
) -> None:
    """Show documents, tables, leading bits, expected candidates per probe, size and settings.

    JSON prints them as one object; TSV and CSV as rows of statistic and value, under the
    names JSON uses, with lists and settings as JSON.
    """
    shown_as = output_format(file_format, json_output)
    with open_existing(db) as database:
        info = database.stats()
    statistic = output.Column("statistic")
    if shown_as == "json":
        out(json_line(info))
        return
    if shown_as != "table":
        records = ({"statistic": name, "value": value} for name, value in info.items())
        output.write_records(records, (statistic, output.Column("value")), shown_as, header=not no_header)
        return
    per_document = info.get("bytes_per_document")
    rows = [
        ("path", info["path"]),
        ("documents", f"{info['documents']:,}"),
        ("k", info["k"]),
        ("blocks", f"{info['blocks']} (widths {', '.join(map(str, info['block_widths']))})"),
        ("tables", info["tables"]),
        ("leading bits", ", ".join(map(str, info["leading_bits"]))),
        ("expected candidates per probe", f"{info['expected_candidates_per_probe']:.3g}"),
        (
            "size on disk",
            output.human_bytes(info["size_bytes"])
            + (f" ({per_document:,.0f} bytes per document)" if per_document else ""),
        ),
        ("fingerprint settings", settings_words(info.get("fingerprinter"))),
        # How similarity is estimated; a weighted SimHash's is a cosine, whatever its sketches.
        *([("similarity", info["similarity"])] if info.get("similarity") else []),
        (
            "sketches",
            f"{info.get('sketch_count', 0):,} stored"
            if info.get("sketches")
            else "none (similarity from the fingerprints)",
        ),
        ("format version", info["format_version"]),
    ]
    records = ({"statistic": name, "value": value} for name, value in rows)
    output.write_records(records, (statistic, output.Column("value")), shown_as, header=not no_header)


#: The columns of get: a document's key, fingerprint and meta (as JSON).
DOCUMENT_COLUMNS = (
    output.Column("key"),
    output.Column("fingerprint"),
    output.Column("meta", value=meta_text),
)


@app.command()
@guarded
def get(
    keys: Annotated[
        list[str],
        typer.Argument(
            help="Keys of the documents to show; '-' reads keys from stdin, one per line.", show_default=False
        ),
    ],
    null: KeysNullOption = False,
    paths: PathsOption = False,
    key_base: KeyBaseOption = None,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    file_format: FormatOption = None,
    no_header: NoHeaderOption = False,
    debug: DebugOption = False,
) -> None:
    """Show stored documents by key: key, fingerprint (hex) and meta (JSON).

    Prints the documents in the order of the keys given.  Exits 1 when a key is not
    stored, naming it on stderr (the others are still printed).
    """
    shown_as = output_format(file_format, json_output)
    intake = reporting_intake(shown_as == "json", print_notice)
    wanted = wanted_keys(keys, intake, null=null, paths=paths, key_base=key_base)
    missing: list[str] = []
    with open_existing(db) as database:

        def records() -> Iterator[dict[str, Any]]:
            for key in wanted:
                try:
                    document = database.get(key)
                except InvalidKeyError:  # empty, too long: no such key can be stored
                    document = None
                if document is None:
                    missing.append(key)
                    continue
                yield {
                    "key": document.key,
                    "fingerprint": hex_fingerprint(document.fingerprint),
                    **meta_fields(document.meta),
                }

        output.write_records(records(), DOCUMENT_COLUMNS, shown_as, header=not no_header)
        as_path = None if paths else stored_as_path(database, missing)
    for key in missing:
        err(f"simdb: no document with key {describe(key)}")
    if as_path is not None:
        err(as_path)
    if intake.failed:
        raise typer.Exit(EXIT_USAGE)
    if missing:
        raise typer.Exit(EXIT_NOTHING_FOUND)


#: Keys a ``remove`` commits at a time: an interrupt that comes while a batch commits waits
#: for it (a few seconds), so that what was removed is said exactly.
REMOVE_BATCH = 25_000


def removed_reporting(database: simdb.Database, keys: list[str]) -> int:
    """``database.remove_many(keys)``, in batches of :data:`REMOVE_BATCH`; stopped by Ctrl-C
    or SIGTERM, it says how many documents the committed batches removed (they stay
    removed) and exits 130 or 143, where it said only "interrupted" (found by a probe)."""
    removed = 0

    def reported(total: int) -> None:
        nonlocal removed
        removed = total
        if stop.is_set():  # an interrupt deferred while this batch committed
            raise KeyboardInterrupt

    with interrupts_in_this_process_only() as stop:
        try:
            removed = database.remove_many(keys, batch_size=REMOVE_BATCH, on_batch=reported)
            if stop.is_set():  # deferred while the last batch committed: it must not be lost
                raise KeyboardInterrupt
            return removed
        except KeyboardInterrupt:
            err(
                f"simdb: interrupted; {counted(removed, 'document')} {'was' if removed == 1 else 'were'} removed "
                f"before {stop.by} (every committed batch stays removed; the batch in progress was not)"
            )
            raise typer.Exit(interrupted_exit_code()) from None


def stored_as_path(database: simdb.Database, missing: Iterable[str]) -> str | None:
    """A note for the first of the ``missing`` keys that is the path of a file stored under
    its canonical key (given without --paths, a path names no key unless given as add keyed
    it), else None.  A stat and a lookup per key, up to the first such."""
    for key in missing:
        if os.path.isfile(key) and (canonical := canonical_key(key)) != key and database.get(canonical) is not None:
            return (
                f"simdb: {shortened(key)} is a file stored under the key {shortened(canonical)}: "
                "--paths makes keys of paths as add does"
            )
    return None


@app.command("keys")
@guarded
def keys_command(
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Only the keys that start with this text.", show_default=False)
    ] = None,
    null: Annotated[
        bool,
        typer.Option("--null", "-0", help="End each key with a NUL byte instead of a line break, for xargs -0."),
    ] = False,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    file_format: FormatOption = None,
    no_header: NoHeaderOption = False,
    debug: DebugOption = False,
) -> None:
    """Print every stored key, one per line, in the order they were added.

    The table format prints the bare keys (no header line), so the output pipes into
    other tools; a key holding a line break or another control character is printed
    quoted as a shell's $'...' (never mistaken for another key; the remove and get
    commands read such a line on stdin back as the key), and -0 ends each key with a NUL
    byte instead, printing every key as it is.
    A prefix costs a scan of every document.  Exits 1 when there are none.
    """
    shown_as = output_format(file_format, json_output)
    if null and shown_as != "table":
        raise usage_error(f"--null prints bare keys: it does not go with --format {shown_as}")
    with open_existing(db) as database:
        found = database.keys(prefix=prefix)
        held_nul: list[str] = []
        if null:
            total = 0
            for key in found:
                if "\0" in key:
                    # NUL ends a key here: printed, it would be read back as two keys, and
                    # `keys -0 | remove -0 -` would remove documents it never listed.
                    held_nul.append(key)
                    continue
                output.write_raw(key + "\0")
                total += 1
        else:
            records = ({"key": key} for key in found)
            total = output.write_records(
                records, (output.Column("key"),), shown_as, header=not no_header and shown_as != "table"
            )
    if held_nul:
        named = ", ".join(describe(key) for key in held_nul[:10])
        err(f"simdb: left out {counted(len(held_nul), 'key')} holding a NUL byte, which -0 cannot carry: {named}")
        raise typer.Exit(EXIT_USAGE)
    if not total:
        err("simdb: no keys" + (f" start with {prefix!r}" if prefix is not None else " stored"))
        raise typer.Exit(EXIT_NOTHING_FOUND)


@app.command()
@guarded
def check(db: DbOption = DEFAULT_DB_PATH, json_output: JsonOption = False, debug: DebugOption = False) -> None:
    """Verify the database's consistency; exits 1 and lists the problems if anything is wrong.

    Checks that every document is in every table exactly once, that nothing else is there,
    and that keys and documents agree.  Runs in a child process, so damage that crashes
    LMDB itself is reported rather than ending simdb.
    """
    with open_existing(db) as database:
        report = database.check(isolated=True)
    if json_output:
        out(
            json_line(
                {
                    "ok": bool(report),
                    "documents": report.documents,
                    "table_entries": report.table_entries,
                    "problems": report.problems,
                }
            )
        )
    elif report:
        out(
            f"ok: {counted(report.documents, 'document')}, "
            f"{counted(report.table_entries, 'table entry', 'table entries')}, no problems"
        )
    else:
        for problem in report.problems:
            out(f"problem: {problem}")
        out(
            f"{counted(len(report.problems), 'problem')} in {counted(report.documents, 'document')} "
            f"and {counted(report.table_entries, 'table entry', 'table entries')}"
        )
    if not report:
        raise typer.Exit(EXIT_NOTHING_FOUND)


@app.command("hash")
@guarded
def hash_command(
    context: typer.Context,
    text: Annotated[
        str | None, typer.Argument(help="The text to fingerprint; '-' reads it from stdin.", show_default=False)
    ] = None,
    file: Annotated[
        list[str] | None,
        typer.Option(
            "--file",
            "-f",
            help="Fingerprint this file's text instead ('-' for stdin), or each file of this directory (with -r, "
            "of its subdirectories too); repeatable. Files are read as add reads them by default (gunzipped if "
            "named .gz; HTML files as their visible text; JSONL files, with their 'id' and 'text' fields (see "
            "--id-field, --text-field), and WARC files hold one document per line or record, printed with its key).",
            show_default=False,
        ),
    ] = None,
    recursive: RecursiveOption = False,
    hidden: HiddenOption = False,
    bits: Annotated[int, typer.Option("--bits", help="Fingerprint width: 32, 64 or 128.")] = 64,
    binary: Annotated[
        bool, typer.Option("--binary", help="Print the fingerprint as a string of 0s and 1s instead of hex.")
    ] = False,
    features: HashFeaturesOption = None,
    ngram: HashNgramOption = None,
    stopwords: HashStopwordsOption = None,
    kind: HashKindOption = None,
    weights: HashWeightsOption = None,
    encoding: EncodingOption = None,
    id_field: QueryIdFieldOption = "id",
    text_field: QueryTextFieldOption = "text",
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Print the fingerprint of a text or of files, without a database.

    Uses the default settings (minhash) unless --kind, --weights, --features, --ngram or
    --stopwords say otherwise, and says on stderr which settings it used (--json puts them
    in each line); a database created with other settings fingerprints differently (see
    simdb stats).
    """
    refuse_db_before(context)
    if (text is None) == (not file):
        raise usage_error("give either TEXT or --file FILE")
    stdin_read_once(("--file", file))
    text_encoding = encoding_of(encoding)
    fingerprinter = make_fingerprinter(features, ngram, stopwords, bits, kind=kind, weights=weights, always=True)
    assert fingerprinter is not None
    settings = fingerprinter.to_dict()
    if not json_output:
        err(f"simdb hash: {settings_words(settings)}")
    described = {
        "kind": fingerprinter.kind,
        "weights": fingerprinter.weights,
        "features": fingerprinter.features,
        "ngram": fingerprinter.ngram,
        "stopwords": fingerprinter.stopwords,
        "normalization": fingerprinter.normalization,
    }
    intake = query_intake(json_output, quiet=False)
    inputs = query_inputs(
        file or [], intake, rules=PathRules(recursive=recursive, hidden=hidden), files_from=[], null=False
    )
    named = [path for path in file or [] if path != "-"]
    if not inputs and named and not intake.failed:  # only directories with nothing to read
        raise usage_error(no_files("hash", named, recursive))
    fields = JsonlFields(id_field, text_field)
    for origin, content in _hashed_texts(inputs if file else None, text, text_encoding, intake, fields):
        value = fingerprinter.fingerprint(content)
        shown = format(value, f"0{bits}b") if binary else hex_fingerprint(value, bits)
        if json_output:
            out(json_line({"fingerprint": shown, "bits": bits, **described, **origin}))
        else:
            label = origin.get("key", origin.get("file"))
            out(shown if label is None else f"{shown}  {output.shown(label)}")
    if intake.failed:
        raise typer.Exit(EXIT_USAGE)


def _hashed_texts(
    inputs: list[Input] | None, text: str | None, encoding: str | None, intake: Intake, fields: JsonlFields
) -> Iterator[tuple[dict[str, str], str]]:
    """The texts ``hash`` fingerprints, each with where it came from: the TEXT argument (or
    stdin's, for "-") alone, else every document of the ``inputs`` of its --file arguments
    (:func:`query_inputs`), in their order, read as ``query --file`` reads them (a .gz file
    gunzipped, an HTML file's visible text, one document per JSONL line or WARC record, keyed
    as add keys it; a pipe named there), of any size; an input that cannot be read is
    reported and counted in ``intake``."""
    if inputs is None:
        yield {}, read_argument_text(text or "", encoding)
        return
    for found in inputs:
        one_document = found.kind in ONE_DOCUMENT_KINDS
        # No size limit: hash TEXT and hash - have none, and a text streams in chunks.
        for key, content, _, _ in read_documents([found], intake, None, encoding=encoding, fields=fields):
            yield ({"file": found.path} if one_document else {"file": found.path, "key": key}), content


EXPORT_FORMATS = ("jsonl", "tsv", "parquet")


def export_file_format(file_format: str) -> str:
    """``--format`` of export and import checked: auto or one of :data:`EXPORT_FORMATS`,
    "json" taken for jsonl (the other commands' --format json prints JSON lines too)."""
    file_format = "jsonl" if file_format == "json" else file_format
    if file_format not in ("auto", *EXPORT_FORMATS):
        raise usage_error(f"--format {file_format!r} is not one of auto, {', '.join(EXPORT_FORMATS)}")
    return file_format


@app.command()
@guarded
def export(
    file_format: Annotated[
        str,
        typer.Option(
            "--format",
            autocompletion=completes(("auto", *EXPORT_FORMATS)),
            help=(
                "auto (the --output name's: tsv for .tsv or .tsv.gz, parquet for .parquet, else jsonl, as import "
                "reads them), jsonl or json (a settings header line, then one object per document), tsv (the header "
                "line, "
                "then KEY, FINGERPRINT, META-JSON, sketch:BASE64), "
                "or parquet (key, fingerprint, the header in its metadata: the input of pairs --parquet; needs the "
                "dask extra)."
            ),
        ),
    ] = "auto",
    output_path: Annotated[
        str, typer.Option("--output", "-o", help="Write here instead of stdout; gzipped if the name ends in .gz.")
    ] = "-",
    db: DbOption = DEFAULT_DB_PATH,
    debug: DebugOption = False,
) -> None:
    """Write every document's key, fingerprint, meta and sketch, in insertion order, for simdb import.

    Every format keeps the fingerprint settings too, so an imported copy fingerprints text the
    same way; rebuild with another block plan by importing with -k/--blocks.
    """
    if output_path != "-" and Path(os.path.realpath(output_path)).is_relative_to(os.path.realpath(db)):
        raise usage_error(f"-o {output_path} is inside the database {db}, whose files the export would replace")
    file_format = export_file_format(file_format)
    named = export_format_of(output_path)
    says_jsonl = output_path.lower().endswith((".jsonl", ".jsonl.gz"))
    if file_format == "auto":
        file_format = named
    elif file_format != named and (named != "jsonl" or says_jsonl):
        # import reads a file by its name: a .tsv holding JSONL would fail on every line.
        raise usage_error(
            f"-o {output_path} is named as {named}, but --format is {file_format}; import reads a file by its name"
        )
    if file_format == "parquet":
        if output_path == "-":
            raise usage_error("--format parquet needs --output FILE.parquet")
        with open_existing(db) as database, needs_dask_extra("export --format parquet"):
            from simdb.distributed import export_parquet

            header = {PARQUET_HEADER_KEY: export_header(database).encode()}
            try:
                written = export_parquet(database, output_path, header)
            except OSError as error:  # pyarrow's, writing the file
                raise write_failed(output_path, error) from None
        err(f"exported {counted(written, 'document')} (key, fingerprint) to {output_path}")
        return
    written = 0
    try:
        with open_existing(db) as database, output_file(output_path) as stream:
            stream.write(export_header(database) + "\n")
            if file_format == "jsonl":
                for document, sketch in database.sketched_items(snapshot=True):
                    field, meta = export_meta(document.meta)
                    record = {"key": document.key, "fingerprint": hex_fingerprint(document.fingerprint), field: meta}
                    if sketch is not None:
                        record["sketch"] = export_sketch(sketch)
                    stream.write(json_line(record) + "\n")
                    written += 1
            else:
                for document, sketch in database.sketched_items(snapshot=True):
                    if any(mark in document.key for mark in "\t\n\r"):
                        raise simdb.InvalidInputError(
                            f"key {document.key!r} holds a tab or line break, which TSV cannot carry",
                            "export with --format jsonl",
                        )
                    field, meta = export_meta(document.meta)
                    column = json_line(meta) if field == "meta" else TSV_MSGPACK_PREFIX + meta
                    column = "" if document.meta is None else column
                    if sketch is not None:
                        column += f"\t{TSV_SKETCH_PREFIX}{export_sketch(sketch)}"
                    stream.write(f"{document.key}\t{hex_fingerprint(document.fingerprint)}\t{column}\n")
                    written += 1
    except BrokenPipeError:
        raise
    except OSError as error:  # writing, closing or renaming the output
        raise write_failed("<stdout>" if output_path == "-" else output_path, error) from None
    if output_path != "-":  # on stdout the data is all there is, as a pipe wants it
        err(f"exported {counted(written, 'document')} to {output_path}")


def export_header(database: simdb.Database) -> str:
    """The settings line an export starts with (a Parquet export keeps it in its metadata):
    k, blocks and fingerprint settings, so that an import creates a database that answers
    as this one does.  One JSON object, without tabs or line breaks."""
    settings = database.fingerprinter.to_dict() if database.fingerprinter is not None else None
    header = {
        "simdb": "export",
        "format_version": EXPORT_FORMAT_VERSION,
        "k": database.k,
        "blocks": database.plan.blocks,
        "fingerprinter": settings,
    }
    return json_line(header)


@app.command("import")
@guarded
@output.keep_going_if_stdout_closes()  # storing the documents is the point, not the output
def import_command(
    files: Annotated[
        list[str],
        typer.Argument(help="Files written by simdb export ('-' for stdin, .gz allowed).", show_default=False),
    ],
    file_format: Annotated[
        str,
        typer.Option(
            "--format",
            autocompletion=completes(("auto", *EXPORT_FORMATS)),
            help="auto (tsv if the name ends in .tsv or .tsv.gz, parquet if .parquet, else jsonl), jsonl (or "
            "json), tsv or parquet.",
        ),
    ] = "auto",
    k: CreateKOption = None,
    blocks: BlocksOption = None,
    if_new: IfNewOption = False,
    threshold: IfNewThresholdOption = None,
    batch_size: BatchOption = DEFAULT_BATCH_SIZE,
    max_line_bytes: Annotated[
        int,
        typer.Option(
            "--max-doc-bytes",
            min=1,
            max=2**40,
            help="Largest line of an export read (one document): a longer one is reported with its size and skipped, "
            "without being read whole. 1 GiB by default, so that what export writes imports back.",
        ),
    ] = 2**30,
    progress: ProgressOption = True,
    quiet: QuietOption = False,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Add the documents of export files, with their fingerprints and meta.

    A new database takes k, blocks and fingerprint settings from the export's header
    unless -k/--blocks are given; that is how to rebuild with another block plan.
    """
    file_format = export_file_format(file_format)
    if checked_threshold(threshold) is not None and not if_new:
        raise usage_error("--threshold goes with --if-new (import stores every document otherwise)")
    stdin_read_once(*(("FILES", [name]) for name in files))
    check_new_plan(db, k, blocks)
    intake = reporting_intake(json_output, quiet_or(print_notice, quiet))
    inputs = stream_inputs(files, "export", intake)
    header = ExportHeader()
    items = read_export(inputs, intake, header, file_format, max_line_bytes)
    # Read up to the first document, so a JSONL header is known, and checked, before the
    # database opens.
    first = next(items, None)
    is_new = is_new_database(db)
    # Nothing usable: no database is created for it.  The export of an empty database (its
    # settings line alone) is usable: it makes the empty database again, with its settings.
    if first is None and (intake.failed or (is_new and header.where is None)):
        if is_new:
            err(f"simdb: nothing to import; no database was created at {db}")
        print_summary(intake, json_output)
        raise typer.Exit(EXIT_USAGE if intake.failed else 0)
    from_header = is_new and k is None and blocks is None and header.where is not None
    if from_header:
        k, blocks = header.k, header.blocks
    documents = chain([first], items) if first is not None else iter(())
    try:
        database = simdb.open(db, k=k, blocks=blocks, fingerprinter=header.fingerprinter)
    except ConfigMismatchError as error:
        if error.setting != "fingerprinter" or header.fingerprinter is None:
            raise
        # The settings came from the export's header, not from options: name the file.
        raise InvalidInputError(
            f"{header.where}: {other_settings(header.fingerprinter, error.stored, 'the database at ' + db)}"
        ) from None
    except InvalidInputError as error:
        if not from_header:
            raise
        raise InvalidInputError(
            # Not in the words of options (-k): the header is no option the user gave.
            f"{header.where}: the export header's settings: {error.message}",
            error.hint,
            remedy=error.remedy,
        ) from None
    if is_new and k is not None and not from_header:
        note_a_costly_index(database, print_notice)
    header.stored = database.fingerprinter  # the settings every later header must give
    header.opened = True
    if database.fingerprinter is None:
        documents = without_sketches(documents, intake)
    with database:
        code = run_ingest(
            database,
            intake,
            lambda ingest: ingest.fingerprints(documents),
            total_bytes=total_bytes(inputs),
            if_new=if_new,
            threshold=threshold,
            workers=1,
            batch_size=batch_size,
            json_output=json_output,
            show_progress=progress and not quiet,
        )
    if code:
        raise typer.Exit(code)


@app.command()
@guarded
def demo(
    context: typer.Context,
    directory: Annotated[
        str, typer.Option("--dir", help="Where to write the generated documents (DIR/docs) and the database (DIR/db).")
    ] = "simdb-demo",
    documents: Annotated[
        int,
        typer.Option(
            "--documents",
            min=10,
            max=1_000_000,
            help="How many documents to generate, of which about one in eight are planted near-duplicates.",
        ),
    ] = 300,
    workers: WorkersOption = None,
    progress: ProgressOption = True,
    debug: DebugOption = False,
) -> None:
    """Run the whole job end to end on a generated collection with planted near-duplicates.

    Writes a few hundred text files to DIR/docs, adds them to the database DIR/db, runs a
    query and prints the pairs found, in a few seconds.
    """
    refuse_db_before(context, "; its database is DIR/db under --dir DIR")
    from . import demo as generator

    try:
        directory.encode()
    except UnicodeEncodeError:
        raise usage_error(f"--dir {describe(directory)} is not valid UTF-8, which the database needs") from None
    docs_dir = Path(directory) / "docs"
    db_path = str(Path(directory) / "db")
    shell_db = shlex.quote(db_path)  # the commands shown can be pasted into a shell as they are
    made = generator.previous_output(Path(directory))  # refuses a directory holding other things
    collection = generator.generate(documents, copies=max(1, documents * 2 // 15))
    keys = {name: canonical_key(str(docs_dir / name)) for name in collection.documents}
    # Recorded before anything is written, so that a run interrupted halfway leaves a record
    # of everything it may have written, for the next run to replace.
    generator.record_output(Path(directory), generator.Output(made.files | set(keys), made.keys | set(keys.values())))
    paths = generator.write(collection, docs_dir)
    out(f"1. Wrote {len(paths)} documents to {docs_dir}/, with {len(collection.planted)} planted near-duplicate copies")
    out(
        "   (files named like article-NNN-replaced.txt: one word replaced, one inserted, "
        "or case and punctuation changed).\n"
    )

    out(f"2. simdb add {shlex.quote(str(docs_dir))} --db {shell_db}")
    # A rerun with another --documents leaves no stale generated files behind.
    for stale in made.files - set(keys):
        (docs_dir / stale).unlink(missing_ok=True)
    intake = Intake(on_problem=print_problem, on_notice=print_notice)
    inputs = expand_paths([str(path) for path in paths], intake)
    with simdb.open(db_path) as database:
        # A rerun with another --documents leaves no stale documents behind.
        database.remove_many(sorted(made.keys - set(keys.values())))
        code = run_ingest(
            database,
            intake,
            lambda ingest: ingest.texts(read_documents(inputs, intake)),
            total_bytes=total_bytes(inputs),
            if_new=False,
            workers=workers or available_cores(),
            batch_size=DEFAULT_BATCH_SIZE,
            json_output=False,
            show_progress=progress,
        )
        if code:
            raise typer.Exit(code)
        found = list(ordered_pairs(database.pairs(), "similarity"))
        planted = {frozenset((keys[a], keys[b])) for a, b in collection.planted}
        # Query with the least similar planted copy that is still found, so the answer shows
        # a similarity below 1; any copy if none was found.
        copies = {keys[copy] for _, copy in collection.planted}
        found_planted = [
            (pair.similarity, pair.key_a if pair.key_a in copies else pair.key_b)
            for pair in found
            if frozenset((pair.key_a, pair.key_b)) in planted
        ]
        example = min(found_planted)[1] if found_planted else keys[collection.planted[0][1]]
        out(f"\n3. simdb query --threshold {simdb.DEFAULT_THRESHOLD} --file {shlex.quote(example)} --db {shell_db}")
        matches = database.query(text=Path(example).read_text(encoding="utf-8"), threshold=simdb.DEFAULT_THRESHOLD)
        # As the command shown prints them, so that running it gives the same table.
        output.write_records((match_record(match) for match in matches), MATCH_COLUMNS, "table")

        out(f"\n4. simdb pairs --db {shell_db}")
        output.write_records((pair_record(pair) for pair in found), PAIR_COLUMNS, "table")
        hits = sum(1 for pair in found if frozenset((pair.key_a, pair.key_b)) in planted)
        out(
            f"\nFound {hits} of the {len(planted)} planted pairs with similarity >= {simdb.DEFAULT_THRESHOLD}, "
            f"and {len(found) - hits} other pairs."
            + (
                " The planted copies not found changed more of their word sequences than the threshold allows."
                if hits < len(planted)
                else ""
            )
        )
    generator.record_output(Path(directory), generator.Output(set(keys), set(keys.values())))
    out(f"\nTry next:  export SIMDB_PATH={shell_db}   then   simdb stats;  simdb clusters;  simdb pairs --histogram")


def installed_version() -> str:
    """simdb's version: the installed distribution's, else the package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("simdb")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return str(getattr(simdb, "__version__", "unknown"))


@app.callback(invoke_without_command=True)
def root(
    context: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", "-V", help="Print simdb's version and exit.", is_eager=True)
    ] = False,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="PATH",
            help="Database directory for the command that follows (its own --db wins over this one; "
            "this one over $SIMDB_PATH).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """simdb: find near-duplicate documents with 64-bit fingerprints stored on disk."""
    if version:
        out(f"simdb {installed_version()}")
        raise typer.Exit(0)
    if context.invoked_subcommand is None:
        # Help, but not success: ``simdb $COMMAND`` with an empty variable must not pass
        # for a command that ran (click's own rule for a group called with no arguments).
        err(context.get_help())
        raise typer.Exit(EXIT_USAGE)


def main() -> None:
    """The ``simdb`` console script."""
    output.tolerate_narrow_encodings()
    if signal.getsignal(signal.SIGINT) is _exit_quietly:
        # Undo cli/__init__.py's start-up handler: from here Ctrl-C is a KeyboardInterrupt
        # that each command turns into its own clean stop.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signals.interrupt_on_either()  # and so is SIGTERM
    try:
        app(prog_name="simdb")
    except KeyboardInterrupt:  # before a command's own handling began (parsing arguments)
        err("simdb: interrupted")
        _leave_interrupted(interrupted_exit_code())
    except SystemExit as leaving:
        # typer turns a KeyboardInterrupt while it parses into a silent exit 130, whichever
        # signal raised it.
        if leaving.code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            _leave_interrupted(interrupted_exit_code())
        raise


def _leave_interrupted(code: int) -> NoReturn:
    """Exit with ``code`` (EXIT_INTERRUPTED, or EXIT_TERMINATED) at once, output flushed.
    Python's own exit would first join the worker processes of a pool that Ctrl-C cut short
    while it started, which can wait for good (2 runs in 100 of an adversarial probe's);
    such workers end by themselves once this process is gone (see simdb.fingerprint)."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):  # a closed pipe, or no stream at all
            if stream is not None:
                stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
