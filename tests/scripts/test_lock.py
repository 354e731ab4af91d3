"""The lock files pin every dependency of pyproject.toml and go stale when its dependency lists change."""

from __future__ import annotations

import shutil
from pathlib import Path

from scripts import lock

ROOT = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path) -> Path:
    (tmp_path / "requirements").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for name in lock.LOCKS:
        shutil.copy(ROOT / "requirements" / f"{name}.lock", tmp_path / "requirements" / f"{name}.lock")
    return tmp_path


def test_the_committed_locks_match_pyproject() -> None:
    assert lock.check() == []


def test_a_new_dependency_makes_both_locks_stale_and_unpinned(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    text = (root / "pyproject.toml").read_text()
    text = text.replace('  "pydantic>=2.11",\n', '  "pydantic>=2.11",\n  "left-pad>=1",\n')
    (root / "pyproject.toml").write_text(text)
    problems = lock.check(root)
    assert any("run.lock is stale" in p for p in problems)
    assert any("dev.lock is stale" in p for p in problems)
    assert any("does not pin left-pad" in p for p in problems)


def test_a_pin_outside_its_range_is_reported(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    path = root / "requirements" / "run.lock"
    lines = [("redis==1.0.0" if line.startswith("redis==") else line) for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")
    assert any("pins redis==1.0.0" in p for p in lock.check(root))


def _replace_pin(root: Path, name: str, lines: list[str]) -> None:
    """Put ``lines`` in place of the entry of ``name`` (its pin line and its ``--hash`` lines) in run.lock."""
    path = root / "requirements" / "run.lock"
    out: list[str] = []
    skipping = False
    for line in path.read_text().splitlines():
        if line.startswith(f"{name}=="):
            out += lines
            skipping = line.endswith("\\")
            continue
        if skipping:
            skipping = line.endswith("\\")
            continue
        out.append(line)
    path.write_text("\n".join(out) + "\n")


def test_the_committed_locks_carry_a_hash_for_every_pin_and_hold_for_each_supported_python() -> None:
    for name in lock.LOCKS:
        pins = lock.pins((ROOT / "requirements" / f"{name}.lock").read_text())
        assert pins
        assert all(pin.hashes and all(h.startswith("sha256:") for h in pin.hashes) for pin in pins)
    assert lock.PYTHONS == ("3.11", "3.12", "3.13")
    assert {label for label in lock.ENVIRONMENTS} >= {"Python 3.13 on Linux x86_64", "Python 3.11 on Linux aarch64"}


def test_a_pin_without_a_hash_is_reported(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    _replace_pin(root, "redis", ["redis==8.1.0"])
    assert any("pins redis==8.1.0 without a --hash" in p for p in lock.check(root))


def test_a_requirement_pinned_for_some_pythons_only_is_reported_for_the_others(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    _replace_pin(root, "redis", ["redis==8.1.0 ; python_full_version < '3.13' \\", "    --hash=sha256:" + "0" * 64])
    problems = lock.check(root)
    assert "requirements/run.lock has 0 pins of redis for Python 3.13 on Linux x86_64" in problems
    assert not any("redis" in p and "3.12" in p for p in problems)


def test_one_pin_per_python_range_holds_and_two_for_one_python_are_reported(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    digest = "    --hash=sha256:" + "0" * 64
    _replace_pin(
        root,
        "redis",
        [
            "redis==8.1.0 ; python_full_version < '3.12' \\",
            digest,
            "redis==8.2.0 ; python_full_version >= '3.12' \\",
            digest,
        ],
    )
    assert lock.check(root) == []
    other = _checkout(tmp_path / "other")
    _replace_pin(other, "redis", ["redis==8.1.0 \\", digest, "redis==8.2.0 ; python_full_version >= '3.13' \\", digest])
    problems = lock.check(other)
    assert "requirements/run.lock has 2 pins of redis for Python 3.13 on Linux aarch64" in problems


def test_requires_python_admitting_a_python_the_locks_do_not_cover_is_reported(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace('requires-python = ">=3.11,<3.14"', 'requires-python = ">=3.11"'))
    assert any("admits Python 3.14.0" in p for p in lock.check(root))


def test_the_build_lock_pins_the_build_backend_and_goes_stale_when_the_build_requirements_change(
    tmp_path: Path,
) -> None:
    pins = lock.pins((ROOT / "requirements" / "build.lock").read_text())
    assert {"hatchling", "packaging", "pathspec", "pluggy", "trove-classifiers"} <= {pin.name for pin in pins}
    root = _checkout(tmp_path)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(
        text.replace('requires = ["hatchling>=1.27"]', 'requires = ["hatchling>=1.27", "left-pad>=1"]')
    )
    problems = lock.check(root)
    assert any("build.lock is stale" in p for p in problems)
    assert any("build.lock does not pin left-pad" in p for p in problems)
    assert not any("run.lock" in p for p in problems), "the runtime's dependencies did not change"


def test_the_client_built_with_the_projects_locked_backend_must_require_the_same_backend(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    (root / "clients" / "python").mkdir(parents=True)
    client = (ROOT / "clients" / "python" / "pyproject.toml").read_text()
    (root / "clients" / "python" / "pyproject.toml").write_text(client)
    assert lock.check(root) == []
    (root / "clients" / "python" / "pyproject.toml").write_text(client.replace('"hatchling>=1.27"', '"flit_core>=3"'))
    assert lock.check(root) == [
        "clients/python's [build-system].requires differ from the project's (requirements/build.lock)"
    ]
