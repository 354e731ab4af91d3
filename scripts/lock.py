"""The lock files (``requirements/run.lock``, ``requirements/dev.lock``, ``requirements/build.lock``): exact,
hash-checked pins.

``make setup`` installs ``run.lock`` (and ``make setup-dev`` ``dev.lock``) with pip, then the project itself
with ``--no-deps``, so every machine gets the same versions; the Docker image installs ``run.lock`` with
``pip install --require-hashes``, and builds the project's and the client's wheels with the build backend of
``build.lock`` (``[build-system].requires``: hatchling and what it needs), installed the same way and used with
``--no-build-isolation``, so nothing of the image comes unhashed from the index. ``make lock`` re-resolves
every lock with ``uv pip compile --universal --generate-hashes`` after a change to ``pyproject.toml``'s
dependencies or build requirements.

The format: one requirements file per lock that holds for every supported Python (``PYTHONS``, 3.11 to 3.13)
on every platform. Each pin is ``name==version``, with an environment marker where the pin applies only to
some Pythons or platforms (``; python_full_version >= '3.12'``; a package whose version differs between
Pythons has one pin per range), followed by one ``--hash=sha256:`` line per distribution of that release on
the index (every wheel and the sdist), so pip checks whatever file it picks on Linux x86_64 or aarch64.

``python -m scripts.lock --check`` (part of ``make lint``) fails when a lock is stale: the requirement lists it
was made from (their SHA-256 is in its header) are not the ones in ``pyproject.toml``; when a requirement has
no pin, or not exactly one, on some supported Python and Linux platform (``ENVIRONMENTS``); when a pin does not
satisfy its requirement or has no hash; or when ``requires-python`` and ``PYTHONS`` disagree. The check is
offline; resolving needs the package index.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCKS = {"run": (), "dev": ("dev",), "build": ()}
"""Lock name → extras it includes (``build`` locks ``[build-system].requires``, the same for the client's)."""
BUILD_LOCK = "build"
CLIENT = Path("clients") / "python"
"""The client library: built in the image with the project's build backend, so its build requirements must be
the project's (the check says so when they differ)."""
PYTHONS = ("3.11", "3.12", "3.13")
"""The supported Pythons, oldest first: the locks hold for each (``requires-python`` admits exactly these)."""
MACHINES = ("x86_64", "aarch64")
"""The Linux machines the check evaluates the locks' markers on (the image's and the development hosts')."""
HEADER = "# pyproject-dependencies-sha256: "


def _environment(python: str, machine: str) -> dict[str, str]:
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{python}.0",
        "os_name": "posix",
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": f"{python}.0",
        "python_version": python,
        "sys_platform": "linux",
    }


ENVIRONMENTS = {
    f"Python {python} on Linux {machine}": _environment(python, machine) for python in PYTHONS for machine in MACHINES
}
"""Where every requirement must have exactly one pin: each supported Python on each Linux machine."""


@dataclass(frozen=True)
class Pin:
    """One ``name==version`` entry of a lock: its marker (``None``: everywhere) and its ``--hash`` values."""

    name: str
    version: Version
    marker: Marker | None
    hashes: tuple[str, ...]

    def applies(self, environment: dict[str, str]) -> bool:
        return self.marker is None or self.marker.evaluate(environment)


def _path(name: str, root: Path = ROOT) -> Path:
    return root / "requirements" / f"{name}.lock"


def _project(root: Path) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    return project


def _build_requirements(root: Path) -> list[str]:
    requires: list[str] = list(tomllib.loads((root / "pyproject.toml").read_text())["build-system"]["requires"])
    return requires


def _lock_requirements(name: str, root: Path = ROOT) -> list[str]:
    """What lock ``name`` pins: the build backend's requirements, or the dependencies with its extras."""
    return _build_requirements(root) if name == BUILD_LOCK else _requirements(LOCKS[name], root)


def _requirements(extras: tuple[str, ...], root: Path = ROOT) -> list[str]:
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    found: list[str] = list(project["dependencies"])
    for extra in extras:
        found += project["optional-dependencies"][extra]
    return found


def _digest(requirements: list[str]) -> str:
    return hashlib.sha256(json.dumps(sorted(requirements)).encode()).hexdigest()


def _entries(text: str) -> list[str]:
    """The lock's logical lines: comments dropped, backslash continuations joined."""
    entries: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        continued = line.endswith("\\")
        current = " ".join(part for part in (current, line.removesuffix("\\").strip()) if part)
        if not continued:
            if current:
                entries.append(current)
            current = ""
    if current:
        entries.append(current)
    return entries


def pins(text: str) -> list[Pin]:
    """The pins of a lock file's text, in order (a package whose version differs between Pythons has several)."""
    found: list[Pin] = []
    for entry in _entries(text):
        if "==" not in entry or entry.startswith("-"):
            continue
        words = entry.split()
        hashes = tuple(word.removeprefix("--hash=") for word in words if word.startswith("--hash="))
        spec = " ".join(word for word in words if not word.startswith("--hash="))
        requirement, _, marker = spec.partition(";")
        name, _, version = requirement.partition("==")
        found.append(
            Pin(
                name=canonicalize_name(name.split("[")[0].strip()),
                version=Version(version.strip()),
                marker=Marker(marker.strip()) if marker.strip() else None,
                hashes=hashes,
            )
        )
    return found


def _check_pythons(root: Path) -> list[str]:
    requires = SpecifierSet(str(_project(root).get("requires-python", "")))
    problems = [
        f"requires-python {requires} excludes Python {python}" for python in PYTHONS if f"{python}.0" not in requires
    ]
    major, minor = PYTHONS[-1].split(".")
    following = f"{major}.{int(minor) + 1}.0"
    if following in requires:
        problems.append(f"requires-python {requires} admits Python {following}, which scripts/lock.py's PYTHONS lacks")
    return problems


def check(root: Path = ROOT) -> list[str]:
    """Problems with the locks of the checkout at ``root`` (empty when fresh)."""
    problems: list[str] = _check_pythons(root)
    client = root / CLIENT / "pyproject.toml"
    if client.exists() and sorted(_build_requirements(client.parent)) != sorted(_build_requirements(root)):
        problems.append(f"{CLIENT}'s [build-system].requires differ from the project's (requirements/build.lock)")
    for name in LOCKS:
        path = _path(name, root)
        where = path.relative_to(root)
        if not path.exists():
            problems.append(f"{where} is missing: run make lock")
            continue
        text = path.read_text()
        requirements = _lock_requirements(name, root)
        if f"{HEADER}{_digest(requirements)}" not in text:
            problems.append(f"{where} is stale (pyproject.toml's dependencies changed): run make lock")
        entries = pins(text)
        problems += [f"{where} pins {pin.name}=={pin.version} without a --hash" for pin in entries if not pin.hashes]
        for raw in requirements:
            requirement = Requirement(raw)
            named = [pin for pin in entries if pin.name == canonicalize_name(requirement.name)]
            if not named:
                problems.append(f"{where} does not pin {requirement.name}")
                continue
            for pin in named:
                if not requirement.specifier.contains(pin.version, prereleases=True):
                    problems.append(f"{where} pins {requirement.name}=={pin.version}, outside {raw!r}")
            for label, environment in ENVIRONMENTS.items():
                if requirement.marker is not None and not requirement.marker.evaluate(environment):
                    continue
                applying = [pin for pin in named if pin.applies(environment)]
                if len(applying) != 1:
                    problems.append(f"{where} has {len(applying)} pins of {requirement.name} for {label}")
    return problems


def write(names: list[str] | None = None) -> None:
    """Re-resolve every lock (or those ``names``) with ``uv pip compile`` (keeping existing pins that still
    satisfy): one universal resolution for ``PYTHONS`` (the fewest versions across them), with every
    distribution's hash."""
    uv = Path(sys.executable).parent / "uv"
    for name, extras in LOCKS.items():
        if names and name not in names:
            continue
        path = _path(name)
        path.parent.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory() as scratch:
            source = "pyproject.toml"
            if name == BUILD_LOCK:
                source = str(Path(scratch) / "build-requirements.in")
                Path(source).write_text("\n".join(_build_requirements(ROOT)) + "\n")
            command = [str(uv), "pip", "compile", source, "--quiet", "--no-header", "--no-annotate"]
            command += ["--universal", "--python-version", PYTHONS[0], "--fork-strategy", "fewest"]
            command += ["--generate-hashes", "--output-file", str(path)]
            for extra in extras:
                command += ["--extra", extra]
            subprocess.run(command, cwd=ROOT, check=True)
        body = "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#"))
        what = "the build backend ([build-system].requires)" if name == BUILD_LOCK else f"`{name}`"
        header = (
            f"# Exact pins for {what} (scripts/lock.py; regenerate with `make lock`),"
            f" for Python {', '.join(PYTHONS)}\n"
            "# on any platform (a marker where a pin applies to some only), each with the sha256 of every\n"
            "# distribution of its release (pip install --require-hashes).\n"
            f"{HEADER}{_digest(_lock_requirements(name))}\n"
        )
        path.write_text(header + body.strip() + "\n")


def main(argv: list[str]) -> int:
    """``--check`` (exit 1 with one line per problem) or ``--write [LOCK ...]`` (every lock, or those named)."""
    if argv[:1] == ["--write"] and set(argv[1:]) <= set(LOCKS):
        write(argv[1:])
        return 0
    if argv == ["--check"]:
        problems = check()
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    print(f"usage: python -m scripts.lock --check | --write [{' | '.join(LOCKS)}]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
