"""The one rendering rule for untrusted server text (``surfaces/common/untrusted.py``), against the cases the
web page's ``untrusted.js`` runs too."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from surfaces.common.untrusted import MARKER, display_text, shown_text, was_altered

CASES_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "untrusted_text_cases.json"
CASES: list[dict[str, Any]] = json.loads(CASES_PATH.read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_each_shared_case_is_shown_as_expected_and_reports_whether_it_was_altered(case: dict[str, Any]) -> None:
    shown = shown_text(case["input"], multiline=case["multiline"])
    assert shown.text == case["expect"]
    assert shown.altered == case["altered"]


def test_no_control_bidi_zero_width_or_format_character_survives_anywhere_in_unicode() -> None:
    every = "".join(chr(code) for code in range(0x110000))
    for multiline in (False, True):
        shown = display_text(every, multiline=multiline)
        for char in set(shown):
            category = unicodedata.category(char)
            assert category not in ("Cc", "Cf", "Cs") or (multiline and char == "\n"), hex(ord(char))


def test_the_rule_is_idempotent_and_markers_are_visible() -> None:
    hostile = "\x1b]0;title\x07\u202eevil\u200b\n\n\n\nend\x9b"
    once = display_text(hostile, multiline=True)
    assert display_text(once, multiline=True) == once
    assert "\u241b" in once
    assert "\u2407" in once
    assert MARKER in once
    assert was_altered(hostile)
    assert not was_altered(once.replace("\u241b", "").replace("\u2407", "").replace(MARKER, ""))
