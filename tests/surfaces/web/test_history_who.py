"""Who answered a settled form reads the same in ``maka history`` and the web page's history view, ``via`` (the
service that answered for a person) included: both run the shared cases in ``tests/fixtures/history_who_cases.json``
(the page's ``whoText`` under Node's test runner)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from maka_client import AnsweredBy, HistoryEntry
from surfaces.cli.commands.history import _who

ROOT = Path(__file__).resolve().parents[3]
NODE = ROOT / ".tools" / "bin" / "node22"
RUNNER = Path(__file__).with_name("history_who_cases.test.mjs")
CASES: list[dict[str, Any]] = json.loads((ROOT / "tests" / "fixtures" / "history_who_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_maka_history_names_who_answered_as_the_shared_case_says(case: dict[str, Any]) -> None:
    who = case["answered_by"]
    answered_by = AnsweredBy(
        who["principal"], who["principal_kind"], who["surface"], who["issuer"] or "", who["via"] or ""
    )
    assert _who(cast("HistoryEntry", SimpleNamespace(answered_by=answered_by))) == case["expect"]


def test_the_page_names_who_answered_as_every_shared_case_says() -> None:
    result = subprocess.run(
        [str(NODE), "--test", "--test-reporter=tap", str(RUNNER)],
        cwd=ROOT,
        env={**os.environ, "NODE_OPTIONS": ""},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"# pass {len(CASES) + 1}\n" in result.stdout, result.stdout
    assert "# fail 0\n" in result.stdout
