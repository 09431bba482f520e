"""The ``simdb`` command line as real processes: the console script, ``python -m simdb_cli.app``,
Ctrl-C during ``add``, a closed pipe, and the README's Quick start command."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import simdb
from simdb.storage import host_tag
from tests.conftest import copies_with_a_zeroed_leaf

SIMDB = shutil.which("simdb")


def simdb_process(
    *args: object,
    cwd: Path | None = None,
    input: str | None = None,
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m simdb_cli.app`` with ``args`` in a fresh interpreter (``env`` added
    to this one's environment)."""
    return subprocess.run(
        [sys.executable, "-m", "simdb_cli.app", *map(str, args)],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "SIMDB_PATH": "", **(env or {})},
        errors="surrogateescape",
    )


def started_simdb(*args: object, stdin: bool = False) -> subprocess.Popen[str]:
    """``python -m simdb_cli.app`` with ``args``, started and left running: stdout and stderr
    (and stdin, with ``stdin``) piped as text, ``SIMDB_PATH`` unset."""
    return subprocess.Popen(
        [sys.executable, "-m", "simdb_cli.app", *map(str, args)],
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SIMDB_PATH": ""},
    )


def write_jsonl_pages(path: Path, total: int, seed: int) -> None:
    """``total`` JSONL documents of 30 random words each."""
    rng = random.Random(seed)
    words = [f"w{n}" for n in range(5000)]
    with open(path, "w") as handle:
        for number in range(total):
            handle.write(json.dumps({"id": f"doc-{number}", "text": " ".join(rng.choices(words, k=30))}) + "\n")


def wait_for_first_batch(db: Path, process: subprocess.Popen[str], seconds: float = 30) -> None:
    """Until the database at ``db`` holds a document (the first committed batch), the
    process ends, or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
        with contextlib.suppress(simdb.SimdbError), simdb.open(db, readonly=True) as database:
            if len(database) > 0:
                return


def test_importing_simdb_never_imports_typer_or_rich() -> None:
    code = "import sys, simdb, simdb.fingerprint; sys.exit(bool({'typer', 'rich', 'simdb_cli'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


@pytest.mark.skipif(SIMDB is None, reason="the simdb console script is not installed")
def test_console_script_runs_help_and_version() -> None:
    assert SIMDB is not None
    helped = subprocess.run([SIMDB, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "query" in helped.stdout and "pairs" in helped.stdout
    version = subprocess.run([SIMDB, "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == f"simdb {simdb.__version__}"


def test_add_and_query_in_a_real_process_with_the_worker_pool(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    rng = random.Random(3)
    words = [f"word{n}" for n in range(3000)]
    texts = [" ".join(rng.choices(words, k=200)) for _ in range(40)]
    for number, text in enumerate(texts):
        (docs / f"{number:02d}.txt").write_text(text)
    db = tmp_path / "db"
    added = simdb_process("add", docs, "--db", db, "--workers", "2", "--json")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout.splitlines()[-1])["added"] == 40
    found = simdb_process("query", texts[7], "--db", db, "--json")
    assert found.returncode == 0
    assert json.loads(found.stdout.splitlines()[0])["key"] == str(docs / "07.txt")
    nothing = simdb_process(
        "query",
        "--fingerprint",
        hex(simdb.open(db, readonly=True).get(str(docs / "07.txt")).fingerprint ^ 0xFFFF),
        "--db",
        db,
    )
    assert nothing.returncode == 1 and nothing.stdout == ""


def test_errors_in_a_real_process_are_one_line_without_traceback(tmp_path: Path) -> None:
    result = simdb_process("stats", "--db", tmp_path / "missing")
    assert result.returncode == 3
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr
    usage = simdb_process("query", "--fingerprint", "nothex", "--db", tmp_path / "missing")
    assert usage.returncode in (2, 3) and "Traceback" not in usage.stderr


def test_ctrl_c_during_add_keeps_committed_batches_and_says_how_many(tmp_path: Path) -> None:
    """SIGINT to the process group (what Ctrl-C sends) mid-run: exit 130, no traceback from
    any worker, the message's count equals what is stored, and the database passes check()."""
    source = tmp_path / "big.jsonl"
    total = 120_000
    write_jsonl_pages(source, total, seed=9)
    db = tmp_path / "db"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simdb_cli.app",
            "add",
            "--jsonl",
            str(source),
            "--db",
            str(db),
            "--batch-size",
            "1000",
            "--workers",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell job is
    )
    try:
        wait_for_first_batch(db, process)
        # A terminal's Ctrl-C signals the whole foreground process group: the command and
        # its fingerprinting workers alike.
        os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    match = re.search(r"interrupted; ([\d,]+) documents were added", stderr)
    assert match is not None, stderr
    added = int(match.group(1).replace(",", ""))
    assert 0 < added < total
    assert f"added {added:,}," in stdout
    with simdb.open(db, readonly=True) as database:
        assert len(database) == added
        assert database.check()


def test_an_add_started_with_sigint_ignored_goes_on_through_it(tmp_path: Path) -> None:
    """Found by an adversarial probe: a background job (``cmd &`` in a script, nohup) starts
    with SIGINT ignored, so that Ctrl-C on the script does not reach it; add installed its
    own handler anyway and stopped (exit 130, part of the input added)."""
    source = tmp_path / "big.jsonl"
    total = 30_000
    write_jsonl_pages(source, total, seed=4)
    db = tmp_path / "db"
    command = [sys.executable, "-m", "simdb_cli.app", "add", "--jsonl", source, "--db", db, "--batch-size", "1000"]
    process = subprocess.Popen(
        [*map(str, command), "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as a shell does for `cmd &`
    )
    try:
        wait_for_first_batch(db, process)
        for _ in range(3):
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGINT)
            time.sleep(0.1)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert f"added {total:,}," in stdout
    with simdb.open(db, readonly=True) as database:
        assert len(database) == total


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    source = tmp_path / "fps.tsv"
    source.write_text("".join(f"key-{number}\t{number * 0x9E3779B97F4A7C15 % (1 << 64)}\n" for number in range(20_000)))
    db = tmp_path / "db"
    assert simdb_process("add", "--fingerprints", source, "--db", db).returncode == 0
    process = subprocess.Popen(
        [sys.executable, "-m", "simdb_cli.app", "export", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()  # like `simdb export | head -1`
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0
    assert "Traceback" not in stderr and "Broken pipe" not in stderr


def test_quick_start_demo_runs_end_to_end(tmp_path: Path) -> None:
    """The README's Quick start command 1, minus the install: `simdb demo` in an empty
    directory writes simdb-demo/docs and simdb-demo/db and prints the pairs it found."""
    result = simdb_process("demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "simdb add simdb-demo/docs --db simdb-demo/db" in result.stdout
    assert re.search(r"Found \d+ of the 40 planted pairs", result.stdout)
    with simdb.open(tmp_path / "simdb-demo" / "db", readonly=True) as database:
        assert len(database) == 300
        assert database.check()


_INTERRUPTED_WITH_A_STUCK_WORKER = """
import multiprocessing, time
import simdb_cli.app as cli

def interrupted(**options):
    # As when Ctrl-C cut a fingerprinting pool short while it started: a worker process
    # lives on, waiting for work that never comes.
    multiprocessing.get_context("fork").Process(target=time.sleep, args=(3600,)).start()
    raise KeyboardInterrupt

cli.app = interrupted
cli.main()
"""


def test_an_interrupted_command_exits_without_waiting_for_stuck_workers(tmp_path: Path) -> None:
    """Found by an adversarial probe: after Ctrl-C, `simdb add --workers 2` printed its
    summary and then hung for good in Python's exit, which joins every worker process (2
    runs in 100).  An interrupted command now exits 130 at once."""
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "w") as stderr:  # a file: the stuck worker keeps pipes open
        process = subprocess.Popen(
            [sys.executable, "-c", _INTERRUPTED_WITH_A_STUCK_WORKER],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        returncode = process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the stuck worker, which outlives it
    assert returncode == 130, "the interrupted command waited for its stuck worker"
    assert "interrupted" in stderr_path.read_text()


_ADD_UNDER_A_FILE_SIZE_LIMIT = """
import resource, runpy, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
sys.argv = ["simdb", *sys.argv[2:]]
runpy.run_module("simdb_cli.app", run_name="__main__")
"""


def test_add_stopped_by_a_full_disk_says_what_its_committed_batches_added(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many((f"seed-{i}", i * 7919) for i in range(1_000))
        size = database.stats()["size_bytes"]
    rows = tmp_path / "rows.tsv"
    rng = random.Random(5)
    rows.write_text("".join(f"row-{i}\t{rng.getrandbits(64):#x}\n" for i in range(200_000)))
    add_arguments = ["add", "--fingerprints", str(rows), "--db", str(db), "--batch-size", "5000", "--no-progress"]
    run = subprocess.run(
        [sys.executable, "-c", _ADD_UNDER_A_FILE_SIZE_LIMIT, str(size + (2 << 20)), *add_arguments],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SIMDB_PATH": ""},
    )
    assert run.returncode == 3, run.stderr
    with simdb.open(db) as database:
        added = len(database) - 1_000
        assert database.check()
    assert added > 0  # some batches fit under the limit
    lines = run.stderr.strip().splitlines()
    assert lines[0] == (
        f"simdb: stopped by the error below; {added:,} documents were added before it "
        "(every committed batch is kept; the batch in progress was not stored)"
    ), run.stderr
    # LMDB reports the write cut short as an I/O error; the file size limit explains it.
    assert len(lines) == 2 and lines[1].startswith("simdb: no space left writing") and "ulimit -f" in lines[1]
    assert "Traceback" not in run.stderr


def wait_for_stored(
    db: Path, enough: Callable[[simdb.Database], bool], process: subprocess.Popen[str], what: str
) -> None:
    """Poll ``db`` read-only until ``enough(database)``; fail after 60 s, or if ``process``
    (the one storing) ended first.  A database whose creation is under way (CURRENT there,
    the creation not done) is waited for."""
    deadline = time.monotonic() + 60
    while True:
        if (db / "CURRENT").exists():
            with contextlib.suppress(simdb.DatabaseMissingError), simdb.open(db, readonly=True) as database:
                if enough(database):
                    return
        assert time.monotonic() < deadline and process.poll() is None, f"the add never stored {what}"
        time.sleep(0.05)


def test_an_interrupted_add_counts_its_own_documents_not_other_writers(tmp_path: Path) -> None:
    # Before: the count was the change in the number of stored documents, so another
    # process's removal of 500 made an add of 6 report "-494 documents were added".
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many((f"base-{i}", i * 7919 + 1) for i in range(1_000))
    adder = started_simdb("add", "--fingerprints", "-", "--batch-size", "1", "--db", db, "--no-progress", stdin=True)
    assert adder.stdin is not None
    try:
        for i in range(6):
            adder.stdin.write(f"new-{i}\t{(i + 1) * 10**15}\n")
        adder.stdin.flush()
        # The six are committed one by one.
        wait_for_stored(db, lambda database: all(f"new-{i}" in database for i in range(6)), adder, "its six documents")
        with simdb.open(db) as database:  # another writer meanwhile
            assert database.remove_many(f"base-{i}" for i in range(500)) == 500
        adder.send_signal(signal.SIGINT)
        stdout, stderr = adder.communicate(timeout=60)
    finally:
        if adder.poll() is None:
            adder.kill()
    assert adder.returncode == 130, stderr
    assert "interrupted; 6 documents were added" in stderr and "added 6," in stdout, stderr + stdout


def test_a_dry_run_removes_the_scratch_copies_that_killed_dry_runs_left(tmp_path: Path) -> None:
    # Found by an adversarial probe: a --dry-run killed by SIGTERM or SIGKILL left its full
    # copy of the database in the temporary directory for good.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many((f"k{i}", i * 7919) for i in range(20_000))
    # Enough to add that the run is still going when it is killed.
    pages = tmp_path / "pages.jsonl"
    pages.write_text(
        "".join(json.dumps({"id": f"p{i}", "text": f"page {i} of a few words"}) + "\n" for i in range(50_000))
    )
    env = {**os.environ, "SIMDB_PATH": "", "TMPDIR": str(scratch)}
    command = [sys.executable, "-m", "simdb_cli.app", "add", "--jsonl", str(pages), "--db", str(db), "--dry-run"]
    killed = subprocess.Popen([*command, "--workers", "1"], env=env)
    deadline = time.monotonic() + 60
    while not any(scratch.glob("simdb-dry-run-*/db/CURRENT")):  # its copy is made
        assert time.monotonic() < deadline and killed.poll() is None, "the dry run made no copy"
        time.sleep(0.01)
    killed.kill()
    killed.wait()
    assert [path.name.split("-")[4] for path in scratch.iterdir()] == [str(killed.pid)]  # simdb-dry-run-HOST-PID
    later = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert later.returncode == 0, later.stderr
    assert list(scratch.iterdir()) == []
    with simdb.open(db, readonly=True) as database:
        assert len(database) == 20_000


def test_export_to_dev_stdout_writes_through_the_descriptor_the_shell_opened(tmp_path: Path) -> None:
    # A review found "export -o /dev/stdout >> log" replacing the log (the temporary was
    # renamed over the file /dev/stdout named), and the shell's own lines around it lost.
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many((f"k{i}", i * 7919) for i in range(100))
    log = tmp_path / "log.txt"
    log.write_text("an earlier line\n")
    export = f"{sys.executable} -m simdb_cli.app export --db {db} -o /dev/stdout"
    script = f"{{ echo head; {export}; echo foot; }} >> {log}"
    assert subprocess.run(["sh", "-c", script], timeout=120, env={**os.environ, "SIMDB_PATH": ""}).returncode == 0
    lines = log.read_text().splitlines()
    assert lines[:2] == ["an earlier line", "head"] and lines[-1] == "foot" and len(lines) == 3 + 101
    assert Path("/dev/stdout").is_symlink() or not Path("/dev/stdout").is_file()


def test_a_dry_run_ignores_scratch_names_that_are_no_process_id(tmp_path: Path) -> None:
    # A review found "simdb-dry-run-2147483648-x" (or a non-ASCII digit) in the temporary
    # directory making every dry run fail with an unexpected OverflowError.
    scratch = tmp_path / "tmp"
    host = host_tag()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its process id is free now
    names = ["2147483648-x", "99999999999999999999-y", "\u00b2-z"]
    # Another host's (or container's, sharing /tmp) dry runs, whose process ids mean nothing here.
    foreign = [f"simdb-dry-run-{host}x-{gone.pid}-w", f"simdb-dry-run-{gone.pid}-v"]
    for name in [f"simdb-dry-run-{host}-{name}" for name in names] + foreign:
        (scratch / name).mkdir(parents=True)
    (tmp_path / "a.txt").write_text("a few words to add in a dry run")
    env = {**os.environ, "SIMDB_PATH": "", "TMPDIR": str(scratch)}
    command = [sys.executable, "-m", "simdb_cli.app", "add", str(tmp_path / "a.txt"), "--db", str(tmp_path / "db")]
    result = subprocess.run([*command, "--dry-run"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # Not dry runs of a process that is gone here (another host's is never judged): left alone.
    assert len(list(scratch.iterdir())) == 5


def test_a_file_has_one_key_in_every_locale_and_every_key_prints(tmp_path: Path) -> None:
    """Found by a new-user probe: under LC_ALL=C without Python's UTF-8 mode, add refused
    "ü.txt" as a name that is not UTF-8 (a Latin-1 locale stored it again as "Ã¼.txt"),
    and keys died of an UnicodeEncodeError at the first key its encoding could not write."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ü.txt").write_text("alpha beta gamma delta epsilon")
    (docs / "東.txt").write_text("zeta eta theta iota kappa")
    db = tmp_path / "db"
    assert simdb_process("add", "docs", "--db", db, cwd=tmp_path).returncode == 0
    ascii_locale = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": ""}
    again = simdb_process("add", "docs", "--db", db, cwd=tmp_path, env=ascii_locale)
    assert again.returncode == 0 and "2 unchanged" in again.stdout, again.stdout + again.stderr
    listed = simdb_process("keys", "--db", db, env=ascii_locale)
    assert listed.returncode == 0, listed.stderr
    assert sorted(listed.stdout.split()) == ["docs/\\u6771.txt", "docs/\\xfc.txt"]
    (docs / "東.txt").unlink()
    pruned = simdb_process("add", "docs", "--prune", "--db", db, cwd=tmp_path, env=ascii_locale)
    assert pruned.returncode == 0, pruned.stderr
    with simdb.open(db, readonly=True) as database:
        assert list(database.keys()) == ["docs/ü.txt"]


def test_check_reports_damage_that_crashes_lmdb_instead_of_dying_with_it(tmp_path: Path) -> None:
    """Found by two probes: one zeroed page in the middle of a table made LMDB's own
    assertion (IS_LEAF in mdb_cursor_next) abort `simdb check`, exit 134 and no word,
    though check is the command a user runs on a damaged database.  Leaf pages of a
    compacted database (every page live) are zeroed one at a time."""
    outcomes = []
    for damaged in copies_with_a_zeroed_leaf(tmp_path):
        checked = simdb_process("check", "--db", damaged, timeout=120)
        outcomes.append(checked.returncode)
        assert checked.returncode in (0, 1, 3), (damaged, checked.returncode, checked.stderr)
        if checked.returncode == 3:
            assert len(checked.stderr.splitlines()) == 1 and f"{damaged}" in checked.stderr, checked.stderr
    assert outcomes.count(3) >= 2, outcomes


def test_in_a_latin_1_locale_latin_1_names_keep_their_keys_and_are_never_pruned(tmp_path: Path) -> None:
    """A review found the first version of locale-independent keys refusing a Latin-1
    file name in a Latin-1 locale (keyed by the locale's reading before), and --prune then
    removing its stored document though the file was there."""
    locales = tmp_path / "locales"
    locales.mkdir()
    command = ["localedef", "-i", "en_US", "-f", "ISO-8859-1", str(locales / "en_US.ISO-8859-1")]
    made = subprocess.run(command, capture_output=True, check=False) if shutil.which("localedef") else None
    if made is None or made.returncode != 0:
        pytest.skip("no localedef, or no locale sources to build a Latin-1 locale from")
    latin_1 = {"LOCPATH": str(locales), "LC_ALL": "en_US.ISO-8859-1", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}
    docs = os.fsencode(tmp_path / "docs")
    os.mkdir(docs)
    for name, text in ((b"gr\xfcn.txt", "alpha beta gamma delta"), (b"\xc3\xbc.txt", "zeta eta theta iota")):
        with open(os.path.join(docs, name), "w") as file:
            file.write(text)
    db = tmp_path / "db"
    added = simdb_process("add", "docs", "--db", db, cwd=tmp_path, env=latin_1)
    assert added.returncode == 0 and "added 2" in added.stdout, added.stdout + added.stderr
    pruned = simdb_process("add", "docs", "--prune", "--db", db, cwd=tmp_path, env=latin_1)
    assert pruned.returncode == 0 and "pruned" not in pruned.stdout, pruned.stdout + pruned.stderr
    with simdb.open(db, readonly=True) as database:
        assert sorted(database.keys()) == ["docs/grün.txt", "docs/ü.txt"]


@pytest.mark.parametrize("name", ["backup.jsonl", "backup.parquet"])
def test_the_next_export_removes_the_partial_file_a_killed_export_left(tmp_path: Path, name: str) -> None:
    # Found by a faults probe: an export SIGKILLed (or OOM-killed) left its hidden
    # ".backup.jsonl....partial" beside the target for good, as large as the export.
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many((f"key-{i}", i * 7919) for i in range(300_000))
    target = tmp_path / name
    command = [sys.executable, "-m", "simdb_cli.app", "export", "--db", str(db), "-o", str(target)]
    env = {**os.environ, "SIMDB_PATH": ""}
    killed = subprocess.Popen(command, env=env)
    deadline = time.monotonic() + 60
    while not any(tmp_path.glob(f".{name}.*.partial")):
        assert time.monotonic() < deadline and killed.poll() is None, "the export wrote no partial file"
        time.sleep(0.005)
    killed.kill()
    killed.wait()
    # Another process's partial file, still being written, is left alone.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host = host_tag()
        running = tmp_path / f".{name}.{host}.{sleeper.pid}.abc.partial"
        running.write_text("an export still being written")
        assert len(list(tmp_path.glob(f".{name}.*.partial"))) == 2
        later = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert later.returncode == 0, later.stderr
        assert list(tmp_path.glob(f".{name}.*.partial")) == [running]
    finally:
        sleeper.kill()
        sleeper.wait()
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(target).metadata.num_rows
    else:
        rows = len(target.read_text().splitlines()) - 1  # the settings line
    assert rows == 300_000


@pytest.mark.parametrize("stderr", ["closed pipe", "closed descriptor", "full device"])
def test_an_unwritable_stderr_does_not_end_an_add(tmp_path: Path, stderr: str) -> None:
    # A faults probe: the first notice written to a stderr whose reader was gone
    # (`2>&1 >/dev/null | head`) raised BrokenPipeError, which ended the add as a quiet
    # closed pipe: exit 0, and none of 1,500 good files stored.
    docs = tmp_path / "docs"
    docs.mkdir()
    rng = random.Random(5)
    for number in range(60):
        if number % 3 == 0:
            (docs / f"{number:03d}.bin").write_bytes(b"\0binary\0" * 10)  # each one a notice
        else:
            (docs / f"{number:03d}.txt").write_text(" ".join(f"w{rng.randrange(3000)}" for _ in range(40)))
    db = tmp_path / "db"
    command = [sys.executable, "-m", "simdb_cli.app", "add", str(docs), "--db", str(db), "--workers", "1"]
    environment = {**os.environ, "SIMDB_PATH": ""}
    if stderr == "closed pipe":
        reader, writer = os.pipe()
        os.close(reader)
        run = subprocess.run(command, stderr=writer, stdout=subprocess.DEVNULL, env=environment, timeout=120)
        os.close(writer)
    elif stderr == "closed descriptor":
        shell = " ".join(map(shlex.quote, command)) + " >/dev/null 2>&-"
        run = subprocess.run(["sh", "-c", shell], env=environment, timeout=120)
    else:
        with open("/dev/full", "w") as full:
            run = subprocess.run(command, stderr=full, stdout=subprocess.DEVNULL, env=environment, timeout=120)
    assert run.returncode == 2  # files not read, as with a working stderr
    with simdb.open(db, readonly=True) as database:
        assert len(database) == 40 and database.check()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_ends_an_add_as_ctrl_c_does_saying_what_was_stored(tmp_path: Path, workers: str) -> None:
    """A probe: SIGTERM (timeout, docker stop, systemd) ended an add without a word about
    what it had stored.  It now stops at the batch in progress, says how many documents
    were added before it, exits 143, and leaves no worker process behind."""
    db = tmp_path / "db"
    pages = tmp_path / "pages.jsonl"
    pages.write_text(
        "".join(json.dumps({"id": f"p{i}", "text": f"page {i} of a few words, {i * 7}"}) + "\n" for i in range(200_000))
    )
    adder = started_simdb(
        "add", "--jsonl", pages, "--db", db, "--workers", workers, "--batch-size", "500", "--no-progress"
    )
    try:
        wait_for_stored(db, lambda database: len(database) >= 1_000, adder, "1,000 documents")
        adder.send_signal(signal.SIGTERM)
        stdout, stderr = adder.communicate(timeout=60)
    finally:
        if adder.poll() is None:
            adder.kill()
    assert adder.returncode == 143, stderr
    with simdb.open(db, readonly=True) as database:
        stored = len(database)
        assert database.check()
    assert 1_000 <= stored < 200_000
    assert f"interrupted; {stored:,} documents were added before SIGTERM" in stderr, stderr
    assert f"added {stored:,}," in stdout and "Traceback" not in stderr
    # The workers (forked with the add's command line) are gone with it.
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-f", str(pages)], capture_output=True, check=False).returncode == 0:
        assert time.monotonic() < deadline, "a worker process outlived the add"
        time.sleep(0.1)


def signals_after_commit(monkeypatch: pytest.MonkeyPatch, nth: int, *sent: int) -> list[object]:
    """Make this process send itself ``sent`` right after the ``nth`` commit of a batch (the
    moment an interrupt is deferred until the batch is reported); returns the list of
    commits' results, which a caller may clear to count again."""
    real_commit = simdb.Database._commit
    commits: list[object] = []

    def commit_then_signal(self: simdb.Database, *args: Any, **kwargs: Any) -> Any:
        result = real_commit(self, *args, **kwargs)
        commits.append(result)
        if len(commits) == nth:
            for number in sent:
                os.kill(os.getpid(), number)
        return result

    monkeypatch.setattr(simdb.Database, "_commit", commit_then_signal)
    return commits


def test_an_interrupt_right_after_a_commit_is_counted_with_that_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe: an interrupt between a batch's commit and its report left the batch out of
    the counts, guessed back from the change in the number of documents, which is wrong for
    replacements (2 of 10 runs said "replaced 0" after 2,000 were) and with other writers.
    The interrupt now waits for the report, so the counts are what was stored."""
    from simdb_cli.app import app
    from typer.testing import CliRunner

    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_texts([(f"k{i}", f"first text of document {i}") for i in range(40)])
    source = tmp_path / "new.jsonl"
    source.write_text(
        "".join(json.dumps({"id": f"k{i}", "text": f"second text of document {i}"}) + "\n" for i in range(40))
    )
    commits = signals_after_commit(monkeypatch, 3, signal.SIGINT)  # the third batch is stored: the signal comes now
    result = CliRunner().invoke(
        app, ["add", "--jsonl", str(source), "--db", str(db), "--batch-size", "10", "--workers", "1", "--no-progress"]
    )
    assert result.exit_code == 130, result.output
    with simdb.open(db, readonly=True) as database:
        replaced = sum(
            database.get(f"k{i}").fingerprint == database.fingerprint(f"second text of document {i}") for i in range(40)
        )
    assert replaced == 30 and f"replaced {replaced}," in result.stdout, result.output
    # A dry run interrupted so says that nothing was stored (it said documents were added).
    commits.clear()
    dry = CliRunner().invoke(
        app, ["add", "--jsonl", str(source), "--db", str(db), "--batch-size", "10", "--dry-run", "--no-progress"]
    )
    assert dry.exit_code == 130 and "interrupted by Ctrl-C; nothing was stored (a dry run)" in dry.stderr, dry.output


def test_sigterm_ends_an_export_removing_its_partial_file_and_keeping_the_last_export(tmp_path: Path) -> None:
    """A probe: SIGTERM killed an export by its default action, leaving the partial file
    beside the output (as large as the export) until the next export.  Every command now
    stops on SIGTERM as on Ctrl-C: the partial file is removed, the earlier export is kept
    whole, and the exit code is 143."""
    db = tmp_path / "db"
    rng = random.Random(5)
    with simdb.open(db) as database:
        database.add_many(((f"document-{i:07d}", rng.getrandbits(64)) for i in range(400_000)), batch_size=100_000)
    output = tmp_path / "export.jsonl"
    output.write_text("an earlier export\n")
    exporter = started_simdb("export", "--db", db, "-o", output)
    try:
        deadline = time.monotonic() + 60
        while not any(path.name.endswith(".partial") and path.stat().st_size > 0 for path in tmp_path.iterdir()):
            assert time.monotonic() < deadline and exporter.poll() is None, "the export never began writing"
            time.sleep(0.02)
        exporter.send_signal(signal.SIGTERM)
        _, stderr = exporter.communicate(timeout=60)
    finally:
        if exporter.poll() is None:
            exporter.kill()
    assert exporter.returncode == 143, stderr
    assert stderr == "simdb: interrupted\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["db", "export.jsonl"]
    assert output.read_text() == "an earlier export\n"


def test_the_first_of_sigterm_and_ctrl_c_names_the_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe: SIGTERM and then Ctrl-C while an add wound down exited 130 and said "before
    Ctrl-C"; the signal that began the stop names the exit code and the message."""
    from simdb_cli.app import app
    from typer.testing import CliRunner

    db = tmp_path / "db"
    source = tmp_path / "pages.jsonl"
    write_jsonl_pages(source, 100, seed=3)
    signals_after_commit(monkeypatch, 2, signal.SIGTERM, signal.SIGINT)
    result = CliRunner().invoke(
        app, ["add", "--jsonl", str(source), "--db", str(db), "--batch-size", "10", "--workers", "1", "--no-progress"]
    )
    assert result.exit_code == 143, result.output
    assert "20 documents were added before SIGTERM" in result.stderr, result.output


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_remove_says_how_many_documents_it_removed(tmp_path: Path, sent: int) -> None:
    """A probe: Ctrl-C during a large `remove -` said only "interrupted", though its
    committed batches had removed 200,000 of 300,000 documents.  It now says how many were
    removed (what the database lost, exactly), and exits as add does."""
    db = tmp_path / "db"
    total = 200_000
    rng = random.Random(11)
    with simdb.open(db) as database:
        database.add_many(((f"k{i}", rng.getrandbits(64)) for i in range(total)), batch_size=100_000)
    keys = "".join(f"k{i}\n" for i in range(total))
    remover = started_simdb("remove", "-", "--db", db, stdin=True)
    assert remover.stdin is not None
    remover.stdin.write(keys)
    remover.stdin.close()
    try:
        wait_for_stored(db, lambda database: len(database) < total, remover, "a removal")
        remover.send_signal(sent)
        stdout = remover.stdout.read() if remover.stdout else ""
        stderr = remover.stderr.read() if remover.stderr else ""
        remover.wait(timeout=120)
    finally:
        if remover.poll() is None:
            remover.kill()
    with simdb.open(db, readonly=True) as database:
        left = len(database)
        assert database.check()
    if remover.returncode == 0:  # it finished before the signal came: nothing to say
        assert left == 0
        return
    assert remover.returncode == (143 if sent == signal.SIGTERM else 130), stderr
    by = "SIGTERM" if sent == signal.SIGTERM else "Ctrl-C"
    assert f"interrupted; {total - left:,} documents were removed before {by}" in stderr, stderr
    assert stdout == "" and "Traceback" not in stderr
