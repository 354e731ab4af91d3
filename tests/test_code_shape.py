"""The code's shape stays readable: no function of the services longer than a screen."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
"""The longest function (signature, docstring and body) allowed under services/."""


def _long_functions(folder: Path, root: Path = ROOT) -> list[str]:
    found: list[str] = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_in_services_is_longer_than_eighty_lines() -> None:
    assert _long_functions(ROOT / "services") == []


def test_the_length_check_finds_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def long() -> None:\n{body}\n")
    assert _long_functions(tmp_path, root=tmp_path) == [f"long.py:1 long ({MAX_FUNCTION_LINES + 1} lines)"]
