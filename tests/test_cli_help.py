"""``--help`` reads like a command line's: placeholders (PATH, N) instead of Python types,
descriptions wrapped as paragraphs, no database wording on ``hash``; plus -V, shell
completion, ``--db`` before the command, and the install hint of the dask extra.  Help is
rendered at pinned widths, so these tests do not depend on the terminal they run in."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import typer
from simdb_cli.app import app
from typer.testing import CliRunner

import simdb

runner = CliRunner()
COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
WIDTHS = (80, 120)


def run(*args: str, env: dict[str, str] | None = None, width: int = 80) -> Any:
    return runner.invoke(app, list(args), env=env, catch_exceptions=False, terminal_width=width)


def test_no_command_prints_help_to_stderr_and_fails() -> None:
    for args in ([], ["--db", "x"]):
        result = run(*args)
        assert result.exit_code == 2 and result.stdout == ""
        assert "Usage: simdb" in result.stderr and "Commands" in result.stderr


def help_text(command: str | None, width: int) -> str:
    result = run(*([command] if command else []), "--help", width=width)
    assert result.exit_code == 0, result.output
    return str(result.stdout)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_shows_placeholders_not_python_types(command: str | None, width: int) -> None:
    text = help_text(command, width)
    assert not re.search(r"<(bool|int|float|str|list|int range|float range)", text), text
    assert "list[" not in text


def test_help_names_options_with_cli_placeholders() -> None:
    pairs = help_text("pairs", 80)
    for shown in ("--db PATH", "-k N", "--threshold FLOAT", "--format FORMAT", "--sort ORDER"):
        assert shown in pairs
    assert "--include-featureless  " in pairs  # a flag takes no placeholder
    add = help_text("add", 80)
    assert "--jsonl FILE" in add and "--glob PATTERN" in add
    # typer 0.29 marks a repeated argument with "..."; the oldest supported (0.27) does not.
    assert "Usage: simdb add [OPTIONS] [PATHS]" in add
    assert "--dir DIR" in help_text("demo", 80)
    assert "Usage: simdb hash [OPTIONS] [TEXT]" in help_text("hash", 80)


def description(text: str) -> list[list[str]]:
    """The paragraphs (lists of lines) between the usage line and the first section."""
    body = text.split("\n\n", 1)[1]
    body = re.split(r"\n(?:Options|Arguments|Commands):\n", body)[0]
    return [paragraph.splitlines() for paragraph in body.strip("\n").split("\n\n")]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", COMMANDS)
def test_descriptions_are_wrapped_as_paragraphs(command: str, width: int) -> None:
    """No line ends early: the next line's first word would not have fitted on it (a
    docstring's own line breaks used to cut sentences at 80 columns, leaving a word or two
    on a line of their own).  The text is the docstring's, word for word."""
    shown_width = min(width, 80)  # click's help is at most 80 columns wide
    paragraphs = description(help_text(command, width))
    for lines in paragraphs:
        for line, following in itertools.pairwise(lines):
            assert len(line.rstrip()) + 1 + len(following.split()[0]) > shown_width - 2, (line, following)
    callback = typer.main.get_command(app).commands[command].callback  # type: ignore[attr-defined]
    docstring = " ".join((callback.__doc__ or "").split())
    # A line may end inside a hyphenated word ("near-" / "duplicate"): joined without a space.
    joined = "".join(line.strip() + ("" if line.endswith("-") else " ") for lines in paragraphs for line in lines)
    assert " ".join(joined.split()) == docstring


def test_hash_help_does_not_speak_of_a_database() -> None:
    for width in WIDTHS:
        assert "Fixed when add creates the database" not in " ".join(help_text("hash", width).split())
        assert "Fixed when add creates the database" in " ".join(help_text("add", width).split())


def test_version_flags_print_the_installed_version() -> None:
    for flag in ("-V", "--version"):
        result = run(flag)
        assert result.exit_code == 0
        assert result.stdout == f"simdb {version('simdb')}\n"


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("simdb query --format ", ["table", "tsv", "csv", "json"]),
        ("simdb clusters --mode l", ["leaders"]),
        ("simdb add --kind ", ["simhash", "minhash"]),
        ("simdb export --format ", ["auto", "jsonl", "tsv", "parquet"]),
    ],
)
def test_option_values_complete_in_the_shell(words: str, expected: list[str]) -> None:
    """A new-user probe: commands and options completed, but no option's values did."""
    environment = {
        **os.environ,
        "_SIMDB_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
    }
    completed = subprocess.run(
        [sys.executable, "-m", "simdb_cli"], env=environment, capture_output=True, text=True, timeout=120
    )
    assert completed.stdout.split() == expected, completed.stderr


def test_shell_completion_is_offered() -> None:
    assert "--install-completion" in help_text(None, 80)
    script = subprocess.run(
        [sys.executable, "-m", "simdb_cli", "--show-completion", "bash"], capture_output=True, text=True, timeout=120
    )
    assert script.returncode == 0, script.stderr
    assert "_SIMDB_COMPLETE" in script.stdout and "complete " in script.stdout


# -- --db before the command -------------------------------------------------------------------


def make_db(path: Path, key: str) -> str:
    with simdb.open(str(path), k=3) as database:
        database.add(key, 0x1234)
    return str(path)


def test_db_precedence_command_then_global_then_environment_then_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command_db = make_db(tmp_path / "command", "from-command")
    global_db = make_db(tmp_path / "global", "from-global")
    env_db = make_db(tmp_path / "env", "from-env")
    monkeypatch.chdir(tmp_path)
    make_db(tmp_path / "simdb-data", "from-default")
    environment = {"SIMDB_PATH": env_db}
    no_environment = {"SIMDB_PATH": ""}  # an empty variable counts as unset

    def keys(*args: str, env: dict[str, str]) -> str:
        result = run(*args, env=env)
        assert result.exit_code == 0, result.output
        return str(result.stdout.strip())

    assert keys("--db", global_db, "keys", "--db", command_db, env=environment) == "from-command"
    assert keys("--db", global_db, "keys", env=environment) == "from-global"
    assert keys("keys", env=environment) == "from-env"
    assert keys("keys", env=no_environment) == "from-default"
    assert keys("--db", global_db, "keys", env=no_environment) == "from-global"


# -- the dask extra ----------------------------------------------------------------------------

#: Runs the command line with these packages unimportable, as if the dask extra were missing.
HIDING = (
    "import sys\n"
    "for name in sys.argv[1].split(','): sys.modules[name] = None\n"
    "sys.argv = ['simdb', *sys.argv[2:]]\n"
    "from simdb_cli.app import main\n"
    "main()\n"
)


def without(packages: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "SIMDB_PATH": ""}
    return subprocess.run(
        [sys.executable, "-c", HIDING, packages, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=environment,
    )


def test_export_parquet_without_pyarrow_gives_the_install_hint(tmp_path: Path) -> None:
    db = make_db(tmp_path / "db", "a")
    done = without(
        "pyarrow,pyarrow.parquet", "export", "--format", "parquet", "-o", "x.parquet", "--db", db, cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert simdb.errors.DASK_INSTALL_HINT in done.stderr and "pyarrow" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "unexpected" not in done.stderr
    assert not (tmp_path / "x.parquet").exists()


def test_pairs_parquet_without_dask_distributed_gives_the_install_hint(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    pytest.importorskip("dask.dataframe")
    db = make_db(tmp_path / "db", "a")
    exported = without("", "export", "--format", "parquet", "-o", "x.parquet", "--db", db, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    hidden = "distributed,dask.distributed"
    done = without(hidden, "pairs", "--parquet", "x.parquet", "--out", "out", "-k", "3", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert simdb.errors.DASK_INSTALL_HINT in done.stderr and "distributed" in done.stderr
    assert "unexpected" not in done.stderr


def test_python_m_simdb_runs_the_command_line() -> None:
    """``python -m simdb`` is what a user tries first when the script is not on PATH."""
    for module in ("simdb", "simdb_cli"):
        shown = subprocess.run(
            [sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
        assert shown.returncode == 0 and shown.stdout.strip() == f"simdb {version('simdb')}", shown.stderr
