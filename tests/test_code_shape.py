"""The code's shape stays readable: no function of the services longer than a screen, and a split stays split.

Per function (services/), per class and per file (the Capability broker and the Interaction authority, each
split by concern), and one owner of an invocation's state (only ``services/broker/invocation.py`` assigns it).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
"""The longest function (signature, docstring and body) allowed under services/."""
MAX_CLASS_LINES = 500
"""The longest class allowed in the packages of :data:`CLASS_CAPPED`."""
CLASS_CAPPED = ("services/broker", "services/interaction")
FILE_CAPS = {
    "services/broker/broker.py": 500,
    "services/broker/provider_link.py": 450,
    "services/broker/forms.py": 350,
    "services/broker/settlement.py": 350,
    "services/broker/invocation.py": 350,
    "services/broker/model.py": 150,
    "services/interaction/authority.py": 500,
    "services/interaction/forms.py": 500,
    "services/interaction/reads.py": 400,
    "services/interaction/answers.py": 300,
    "services/interaction/epochs.py": 200,
    "services/interaction/reaper.py": 120,
    "services/interaction/store.py": 650,
    "services/interaction/store_reads.py": 200,
    "services/interaction/store_calls.py": 100,
}
"""The most lines of each file of the broker's and the Interaction authority's splits: each coordinator and
the parts it delegates to."""
STATE_OWNER = "services/broker/invocation.py"
STATE_ASSIGNMENT = re.compile(r"\.(_?state)\s*(=|:[^=]*=)(?!=)")
"""``x.state = ...`` / ``x._state = ...`` (an invocation's state changes only through its transition methods)."""


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


def _long_classes(folder: Path, root: Path = ROOT) -> list[str]:
    found: list[str] = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def _state_assignments(folders: list[Path], root: Path = ROOT) -> list[str]:
    found: list[str] = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            if path.relative_to(root).as_posix() == STATE_OWNER:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if STATE_ASSIGNMENT.search(line):
                    found.append(f"{path.relative_to(root)}:{number} {line.strip()}")
    return found


def test_no_class_of_the_broker_or_the_interaction_service_is_longer_than_five_hundred_lines() -> None:
    assert [found for folder in CLASS_CAPPED for found in _long_classes(ROOT / folder)] == []


def test_the_broker_and_the_interaction_authority_stay_split_each_file_under_its_cap() -> None:
    over = {
        name: lines
        for name, cap in FILE_CAPS.items()
        if (lines := len((ROOT / name).read_text(encoding="utf-8").splitlines())) > cap
    }
    assert over == {}


def test_only_the_invocation_module_assigns_an_invocation_state() -> None:
    assert _state_assignments([ROOT / "services" / "broker", ROOT / "tests" / "services" / "broker"]) == []


def test_the_state_check_finds_an_assignment_and_passes_a_comparison(tmp_path: Path) -> None:
    (tmp_path / "moves.py").write_text(
        "invocation.state = InvocationState.LOST\n"
        "invocation._state: InvocationState = InvocationState.LOST\n"
        "same = invocation.state == InvocationState.LOST\n"
        "request = Request(state=STATE)\n"
    )
    assert _state_assignments([tmp_path], root=tmp_path) == [
        "moves.py:1 invocation.state = InvocationState.LOST",
        "moves.py:2 invocation._state: InvocationState = InvocationState.LOST",
    ]


def test_the_class_check_finds_a_long_class(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    (tmp_path / "big.py").write_text(f"class Big:\n{body}\n")
    assert _long_classes(tmp_path, root=tmp_path) == [f"big.py:1 Big ({MAX_CLASS_LINES + 1} lines)"]
