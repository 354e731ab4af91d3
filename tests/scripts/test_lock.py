"""The lock files pin every dependency of pyproject.toml and go stale when its dependency lists change."""

from __future__ import annotations

import shutil
from pathlib import Path

from scripts import lock

ROOT = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path) -> Path:
    (tmp_path / "requirements").mkdir()
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
