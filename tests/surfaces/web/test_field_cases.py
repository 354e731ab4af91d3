"""The web page's field rules (``static/js/fields.js``) run the shared field cases under Node's test runner."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from surfaces.common.form_input import field_to_json
from tests.helpers.field_cases import load_cases

ROOT = Path(__file__).resolve().parents[3]
NODE = ROOT / ".tools" / "bin" / "node22"
RUNNER = Path(__file__).with_name("field_cases.test.mjs")


def test_the_page_accepts_refuses_or_leaves_out_every_shared_field_case(tmp_path: Path) -> None:
    cases = load_cases()
    page_cases = [{**case.data, "field": field_to_json(case.field())} for case in cases]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(page_cases), encoding="utf-8")
    # The page's date-time widget holds local time; the cases are written for a browser in UTC.
    env = {**os.environ, "MAKA_FIELD_CASES": str(path), "TZ": "UTC", "NODE_OPTIONS": ""}
    result = subprocess.run(
        [str(NODE), "--test", "--test-reporter=tap", str(RUNNER)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"# pass {len(cases)}\n" in result.stdout, result.stdout
    assert "# fail 0\n" in result.stdout
