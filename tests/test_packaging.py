"""The runtime is an application, never a library (docs/development.md, "Packaging").

It installs from the checkout into its own environment (``make setup`` → ``.venv``, the Docker image) under a
fixed set of top-level names, and its metadata makes a package index refuse an upload; the one library is
``clients/python`` (``maka_client``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_PACKAGES = {"maka": "gen/maka", "services": "services", "stack": "stack", "surfaces": "surfaces"}
"""Top-level import name → the folder the runtime's wheel takes it from."""
CHECKOUT_ONLY = {"tests", "bench", "scripts", "examples"}
"""Top-level packages that run from the checkout and are never installed."""
DO_NOT_UPLOAD = "Private :: Do Not Upload"


def _project(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads(path.read_text())
    return data


def test_the_runtime_wheel_installs_exactly_the_runtime_packages() -> None:
    packages = _project(ROOT / "pyproject.toml")["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert {Path(folder).name: folder for folder in packages} == RUNTIME_PACKAGES
    assert all((ROOT / folder / "__init__.py").is_file() for folder in RUNTIME_PACKAGES.values())


def test_every_top_level_package_of_the_checkout_is_either_installed_or_checkout_only() -> None:
    found = {folder.name for folder in ROOT.iterdir() if (folder / "__init__.py").is_file()}
    installed_from_root = {name for name, folder in RUNTIME_PACKAGES.items() if folder == name}
    assert found == installed_from_root | CHECKOUT_ONLY  # a new top-level package needs a decision here


def test_the_image_copies_every_folder_the_runtime_wheel_is_built_from() -> None:
    copies = {line.split()[1] for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")}
    assert {folder.split("/")[0] for folder in RUNTIME_PACKAGES.values()} <= copies


def test_the_runtime_refuses_an_upload_and_only_the_client_is_a_library() -> None:
    assert DO_NOT_UPLOAD in _project(ROOT / "pyproject.toml")["project"]["classifiers"]
    client = _project(ROOT / "clients" / "python" / "pyproject.toml")
    assert DO_NOT_UPLOAD not in client["project"].get("classifiers", [])
    assert client["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/maka_client"]
