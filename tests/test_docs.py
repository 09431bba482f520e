"""Every code example in README.md and docs/*.md runs, and docs/cli.md is current.

How a Markdown file's fenced blocks run (in order, in one fresh temporary directory per file):

- ```python: executed; the blocks of one file share one namespace, so a block may use what an
  earlier block of the same file defined.
- ```pycon: doctest examples (``>>>`` lines and the output they print), in the same namespace;
  ``...`` in an expected output matches anything (doctest's ELLIPSIS).
- ```sh: run as one bash script (``set -eo pipefail``); it must exit 0.
- ```console: ``$ COMMAND`` lines, each followed by the output it prints (stdout and stderr
  together); each command must exit 0 and print that output.  A line ``...`` matches any
  number of lines and ``...`` inside a line matches any text, for timings and long listings.
  To show a non-zero exit status, end the command with ``; echo "exit $?"`` and show that line.
- ```text: not run; only for formats and diagrams, never for a command's output.

``simdb`` on PATH is a shim running ``sys.executable -m simdb_cli``.  A block that must not run
here (it installs packages, runs the test suite, or needs a research corpus) is preceded by
``<!-- doc-test: skip (REASON) -->``; EXPECTED_SKIPS counts them per file, so no block is
skipped silently.  A block with no language is an error.
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Blocks marked ``doc-test: skip`` per file: changing a skip means changing this too.
EXPECTED_SKIPS = {
    "README.md": 2,  # the Quick start (it installs packages); the corpus measurement
    "library.md": 0,
    "design.md": 0,
    "benchmarks.md": 1,  # the benchmark commands need the bench extra and take minutes
    "cli.md": 0,
    "cli-guide.md": 0,
}
LANGUAGES = {"python", "pycon", "sh", "console", "text"}
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>\S*)\s*$")  # also inside list items
_SKIP = re.compile(r"<!--\s*doc-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->")
COMMAND_TIMEOUT = 300


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, its text, the line its fence opens on, and the skip
    reason of a ``doc-test: skip`` comment right before it (or None)."""

    language: str
    text: str
    line: int
    skip: str | None


def parse_blocks(markdown: str) -> list[Block]:
    """The fenced blocks of a Markdown text, in order.  O(lines)."""
    blocks: list[Block] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        start = index
        indent = len(opening["indent"])
        index += 1
        body: list[str] = []
        while index < len(lines) and lines[index].strip() != "```":
            line = lines[index]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            index += 1
        previous = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        skip = _SKIP.search(previous)
        blocks.append(Block(opening["language"], "\n".join(body) + "\n", start + 1, skip["reason"] if skip else None))
        index += 1
    return blocks


def _shell_environment(workdir: Path) -> dict[str, str]:
    """PATH with a ``simdb`` shim that runs this interpreter's simdb_cli; no SIMDB_PATH from
    the caller; unbuffered, so stdout and stderr interleave as on a terminal."""
    shims = workdir / ".shims"
    shims.mkdir(exist_ok=True)
    shim = shims / "simdb"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m simdb_cli "$@"\n')
    shim.chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SIMDB_")}
    environment["PATH"] = f"{shims}{os.pathsep}{environment.get('PATH', '')}"
    environment["PYTHONUNBUFFERED"] = "1"
    environment["COLUMNS"] = "200"
    return environment


def output_matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is what ``expected`` shows: line by line, trailing spaces ignored, a
    line ``...`` standing for any lines and ``...`` in a line for any text."""
    pattern = []
    for line in expected.rstrip("\n").splitlines():
        if line.strip() == "...":
            pattern.append(r"(?:.*\n)*?")
        else:
            pattern.append(".*".join(re.escape(part) for part in line.rstrip().split("...")) + r"[ \t]*\n")
    normalised = "".join(line.rstrip() + "\n" for line in actual.rstrip("\n").splitlines()) if actual.strip() else ""
    return re.fullmatch("".join(pattern), normalised) is not None


def console_commands(text: str) -> list[tuple[str, str]]:
    """(command, expected output) for each ``$ `` line of a console block."""
    commands: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"console block text before the first '$ ' command: {line!r}")
    return [(command, "\n".join(output) + "\n" if output else "") for command, output in commands]


def run_file(path: Path, workdir: Path) -> list[Block]:
    """Run every block of the Markdown file ``path`` in ``workdir``; raise AssertionError
    naming the file and line of the first block that fails.  Returns the skipped blocks."""
    environment = _shell_environment(workdir)
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    skipped = []
    previous_directory = Path.cwd()
    os.chdir(workdir)
    try:
        for block in parse_blocks(path.read_text(encoding="utf-8")):
            where = f"{path.name}:{block.line}"
            assert block.language in LANGUAGES, (
                f"{where}: a fenced block needs one of the languages {sorted(LANGUAGES)}"
            )
            if block.skip is not None:
                skipped.append(block)
            elif block.language == "python":
                try:
                    exec(compile(block.text, where, "exec"), namespace)
                except Exception as exc:
                    raise AssertionError(f"{where}: the python block raised {exc!r}") from exc
            elif block.language == "pycon":
                _run_pycon(block, where, namespace)
            elif block.language == "sh":
                run = subprocess.run(
                    ["bash", "-c", "set -eo pipefail\n" + block.text],
                    cwd=workdir,
                    env=environment,
                    capture_output=True,
                    text=True,
                    timeout=COMMAND_TIMEOUT,
                )
                assert run.returncode == 0, f"{where}: the sh block exited {run.returncode}:\n{run.stdout}{run.stderr}"
            elif block.language == "console":
                for command, expected in console_commands(block.text):
                    run = subprocess.run(
                        ["bash", "-c", command],
                        cwd=workdir,
                        env=environment,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                        timeout=COMMAND_TIMEOUT,
                    )
                    assert run.returncode == 0, f"{where}: `{command}` exited {run.returncode}:\n{run.stdout}"
                    assert output_matches(expected, run.stdout), (
                        f"{where}: `{command}` printed\n{run.stdout}\nbut the document shows\n{expected}"
                    )
    finally:
        os.chdir(previous_directory)
    return skipped


def _run_pycon(block: Block, where: str, namespace: dict[str, object]) -> None:
    test = doctest.DocTestParser().get_doctest(block.text, namespace, where, where, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=False)
    assert runner.failures == 0, f"{where}: the pycon block failed:\n{''.join(report)}"


@pytest.mark.parametrize("path", DOCS, ids=[path.name for path in DOCS])
def test_every_example_in_the_docs_runs(path: Path, tmp_path: Path) -> None:
    skipped = run_file(path, tmp_path)
    reasons = [f"line {block.line}: {block.skip}" for block in skipped]
    assert len(skipped) == EXPECTED_SKIPS[path.name], (
        f"{path.name} skips {len(skipped)} blocks, EXPECTED_SKIPS says {EXPECTED_SKIPS[path.name]}: {reasons}"
    )


def test_every_docs_file_is_counted() -> None:
    assert sorted(EXPECTED_SKIPS) == sorted(path.name for path in DOCS)


def test_the_cli_reference_is_current() -> None:
    from simdb_cli import reference

    current = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert current == reference.render(), f"docs/cli.md is out of date: regenerate it with `{reference.REGENERATE}`"


# -- the runner itself can fail -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("markdown", "complaint"),
    [
        ("```python\nraise ValueError('broken example')\n```\n", "raised ValueError"),
        ("```pycon\n>>> 1 + 1\n3\n```\n", "pycon block failed"),
        ("```sh\nsimdb query --db missing 'no database here'\n```\n", "sh block exited 3"),
        ("```console\n$ simdb --version\nsimdb 0.0.0\n```\n", "but the document shows"),
        ("```console\n$ false\n```\n", "exited 1"),
        ("```\nno language\n```\n", "needs one of the languages"),
        ("- a list item:\n\n  ```console\n  $ simdb --version\n  simdb 0.0.0\n  ```\n", "but the document shows"),
    ],
)
def test_a_broken_example_fails(tmp_path: Path, markdown: str, complaint: str) -> None:
    page = tmp_path / "broken.md"
    page.write_text(markdown)
    workdir = tmp_path / "work"
    workdir.mkdir()
    with pytest.raises(AssertionError, match=complaint):
        run_file(page, workdir)


def test_skipped_blocks_are_counted_and_the_rest_run(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- doc-test: skip (installs packages) -->\n```sh\nexit 1\n```\n\n"
        '```console\n$ simdb --version\nsimdb ...\n$ simdb query --db nowhere x; echo "exit $?"\n...\nexit 3\n```\n'
        "```python\nvalue = 41\n```\n```pycon\n>>> value + 1\n42\n```\n"
    )
    workdir = tmp_path / "work"
    workdir.mkdir()
    assert [block.skip for block in run_file(page, workdir)] == ["installs packages"]


def test_output_matching_with_ellipses() -> None:
    assert output_matches("a\n...\nz\n", "a\nb\nc\nz\n")
    assert output_matches("added 3 (...)\n", "added 3 (0.1 s)\n")
    assert not output_matches("added 3 (...)\n", "added 4 (0.1 s)\n")
    assert not output_matches("a\n", "a\nb\n")
