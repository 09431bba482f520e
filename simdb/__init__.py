"""simdb: a persistent on-disk database of 64-bit fingerprints (one-bit minwise hashes by default,
or SimHash) for near-duplicate detection.

>>> import simdb
>>> with simdb.open("example.simdb", k=3) as db:          # doctest: +SKIP
...     db.add("doc-1", 0x1234_5678_9ABC_DEF0)
...     db.query(0x1234_5678_9ABC_DEF1)
"""

from simdb.allpairs import find_all, find_clusters
from simdb.database import (
    FORMAT_VERSION,
    AddResult,
    CheckReport,
    Cluster,
    CompactResult,
    Database,
    Document,
    Match,
    Pair,
    Skip,
    open,  # noqa: A004 - simdb.open is the public name, shadowing the builtin on purpose
)
from simdb.errors import (
    AlreadyOpenError,
    ConfigMismatchError,
    CorruptDatabaseError,
    DatabaseClosedError,
    DatabaseError,
    DatabaseMissingError,
    DatabaseReplacedError,
    DiskFullError,
    DistanceError,
    DistanceTooLargeError,
    FingerprinterError,
    FormatVersionError,
    InheritedHandleError,
    InvalidFingerprintError,
    InvalidInputError,
    InvalidKeyError,
    KeyProblem,
    NoFingerprinterError,
    NotADatabaseError,
    PermissionDeniedError,
    ReadInProgressError,
    ReadOnlyError,
    ReadOnlyFileSystemError,
    Remedy,
    SimdbError,
    StorageError,
    UnfinishedDatabaseError,
    WriterClosedError,
)
from simdb.fingerprint import (
    Fingerprinter,
    hamming,
    jaccard,
    simhash,
    simhash_features,
    simhash_many,
    similarity,
    sketch_similarities,
    sketch_similarity,
)
from simdb.keys import parse_fingerprint
from simdb.plan import TablePlan, default_blocks
from simdb.threshold import DEFAULT_THRESHOLD, candidate_distance
from simdb.writer import BatchWriter

__version__ = "0.2.0"

__all__ = [
    "DEFAULT_THRESHOLD",
    "FORMAT_VERSION",
    "AddResult",
    "AlreadyOpenError",
    "BatchWriter",
    "CheckReport",
    "Cluster",
    "CompactResult",
    "ConfigMismatchError",
    "CorruptDatabaseError",
    "Database",
    "DatabaseClosedError",
    "DatabaseError",
    "DatabaseMissingError",
    "DatabaseReplacedError",
    "DiskFullError",
    "DistanceError",
    "DistanceTooLargeError",
    "Document",
    "Fingerprinter",
    "FingerprinterError",
    "FormatVersionError",
    "InheritedHandleError",
    "InvalidFingerprintError",
    "InvalidInputError",
    "InvalidKeyError",
    "KeyProblem",
    "Match",
    "NoFingerprinterError",
    "NotADatabaseError",
    "Pair",
    "PermissionDeniedError",
    "ReadInProgressError",
    "ReadOnlyError",
    "ReadOnlyFileSystemError",
    "Remedy",
    "SimdbError",
    "Skip",
    "StorageError",
    "TablePlan",
    "UnfinishedDatabaseError",
    "WriterClosedError",
    "candidate_distance",
    "default_blocks",
    "find_all",
    "find_clusters",
    "hamming",
    "jaccard",
    "open",
    "parse_fingerprint",
    "simhash",
    "simhash_features",
    "simhash_many",
    "similarity",
    "sketch_similarities",
    "sketch_similarity",
]
