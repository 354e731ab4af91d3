"""The lock files (``requirements/run.lock``, ``requirements/dev.lock``): exact pins for reproducible installs.

``make setup`` installs ``run.lock`` (and ``make setup-dev`` ``dev.lock``) with pip, then the project itself
with ``--no-deps``, so every machine gets the same versions. ``make lock`` re-resolves both with ``uv pip
compile`` (from the dev extra) after a change to ``pyproject.toml``'s dependencies; ``python -m scripts.lock
--check`` (part of ``make lint``) fails when a lock is stale: the dependency lists it was made from (their
SHA-256 is in its header) are not the ones in ``pyproject.toml``, or a pin does not satisfy a requirement.
The check is offline; resolving needs the package index.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCKS = {"run": (), "dev": ("dev",)}
"""Lock name → extras it includes."""
PYTHON = "3.11"
PLATFORM = "x86_64-unknown-linux-gnu"
HEADER = "# pyproject-dependencies-sha256: "


def _path(name: str, root: Path = ROOT) -> Path:
    return root / "requirements" / f"{name}.lock"


def _requirements(extras: tuple[str, ...], root: Path = ROOT) -> list[str]:
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    found: list[str] = list(project["dependencies"])
    for extra in extras:
        found += project["optional-dependencies"][extra]
    return found


def _digest(requirements: list[str]) -> str:
    return hashlib.sha256(json.dumps(sorted(requirements)).encode()).hexdigest()


def _pins(text: str) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip().rstrip("\\").strip()
        if "==" in line and not line.startswith("-"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name.split("[")[0].strip())] = Version(version.split(";")[0].strip())
    return pins


def check(root: Path = ROOT) -> list[str]:
    """Problems with the locks of the checkout at ``root`` (empty when fresh)."""
    problems: list[str] = []
    for name, extras in LOCKS.items():
        path = _path(name, root)
        if not path.exists():
            problems.append(f"{path.relative_to(root)} is missing: run make lock")
            continue
        text = path.read_text()
        requirements = _requirements(extras, root)
        if f"{HEADER}{_digest(requirements)}" not in text:
            problems.append(f"{path.relative_to(root)} is stale (pyproject.toml's dependencies changed): run make lock")
        pins = _pins(text)
        for raw in requirements:
            requirement = Requirement(raw)
            version = pins.get(canonicalize_name(requirement.name))
            if version is None:
                problems.append(f"{path.relative_to(root)} does not pin {requirement.name}")
            elif not requirement.specifier.contains(version, prereleases=True):
                problems.append(f"{path.relative_to(root)} pins {requirement.name}=={version}, outside {raw!r}")
    return problems


def write() -> None:
    """Re-resolve every lock with ``uv pip compile`` (keeping existing pins that still satisfy)."""
    uv = Path(sys.executable).parent / "uv"
    for name, extras in LOCKS.items():
        path = _path(name)
        path.parent.mkdir(exist_ok=True)
        command = [str(uv), "pip", "compile", "pyproject.toml", "--quiet", "--no-header", "--no-annotate"]
        command += ["--python-version", PYTHON, "--python-platform", PLATFORM, "--output-file", str(path)]
        for extra in extras:
            command += ["--extra", extra]
        subprocess.run(command, cwd=ROOT, check=True)
        body = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#"))
        header = (
            f"# Exact pins for `{name}` (scripts/lock.py; regenerate with `make lock`).\n"
            f"{HEADER}{_digest(_requirements(extras))}\n"
        )
        path.write_text(header + body.strip() + "\n")


def main(argv: list[str]) -> int:
    """``--check`` (exit 1 with one line per problem) or ``--write``."""
    if argv == ["--write"]:
        write()
        return 0
    if argv == ["--check"]:
        problems = check()
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    print("usage: python -m scripts.lock --check | --write", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
