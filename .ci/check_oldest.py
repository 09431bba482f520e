"""Check that .ci/oldest.txt pins every dependency of pyproject.toml (the main ones and the
test and dask extras) at exactly its floor, so the oldest-versions job tests the floors the
package states.  Prints each mismatch; exits 1 if there is one.  Standard library only."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ("test", "dask")


def release(version: str) -> tuple[int, ...]:
    """2024.1 -> (2024, 1, 0): versions compared as numbers, trailing zeros ignored."""
    parts = [int(part) for part in version.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def main() -> int:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in EXTRAS:
        requirements += project["optional-dependencies"][extra]
    pins = {}
    for line in (ROOT / ".ci" / "oldest.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower()] = version.strip()
    problems = []
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[([a-z,]+)\])?>=([0-9.]+)", requirement.replace(" ", ""))
        if not match:
            problems.append(f"{requirement}: no '>=' floor to pin")
            continue
        name, extras, floor = match[1].lower(), match[3], match[4]
        # dask[distributed] brings the distributed package, released in step with dask.
        names = [name] + (["distributed"] if name == "dask" and extras and "distributed" in extras else [])
        for pinned_name in names:
            pinned = pins.get(pinned_name)
            if pinned is None or release(pinned) != release(floor):
                problems.append(f"{pinned_name}: pyproject floor {floor}, .ci/oldest.txt pins {pinned}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
