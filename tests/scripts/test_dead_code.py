"""scripts/dead_code.py: the dead-code check of ``make lint``."""

from __future__ import annotations

from pathlib import Path

from scripts import dead_code


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checkout_has_no_unused_name_outside_the_listed_framework_callbacks() -> None:
    assert dead_code.findings() == []


def test_a_function_nothing_calls_is_reported_with_its_file_and_line(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "services/x.py": "def used() -> int:\n    return 1\n\n\ndef unused() -> int:\n    return 2\n",
            "tests/test_x.py": "from services.x import used\n\nused()\n",
        },
    )
    assert dead_code.findings(root) == ["services/x.py:5: unused function 'unused' (60% confidence)"]


def test_a_name_used_only_by_tests_or_bench_counts_as_used(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {"stack/y.py": "def probe() -> int:\n    return 1\n", "bench/b.py": "from stack.y import probe\n\nprobe()\n"},
    )
    assert dead_code.findings(root) == []


def test_unused_names_in_tests_themselves_are_not_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"tests/helpers.py": "def never_called() -> None:\n    pass\n"})
    assert dead_code.findings(root) == []
