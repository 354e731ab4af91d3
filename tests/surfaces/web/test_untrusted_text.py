"""The page's untrusted-text rule (``static/js/untrusted.js``) runs the shared cases under Node's test runner,
the same cases ``tests/surfaces/common/test_untrusted.py`` runs against ``surfaces/common/untrusted.py``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NODE = ROOT / ".tools" / "bin" / "node22"
RUNNER = Path(__file__).with_name("untrusted_cases.test.mjs")
CASES = ROOT / "tests" / "fixtures" / "untrusted_text_cases.json"


def test_the_page_shows_every_shared_untrusted_text_case_as_the_python_rule_does() -> None:
    count = len(json.loads(CASES.read_text(encoding="utf-8"))["cases"])
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
    assert f"# pass {count}\n" in result.stdout, result.stdout
    assert "# fail 0\n" in result.stdout
