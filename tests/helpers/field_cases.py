"""The shared field-validation cases (``tests/fixtures/form_field_cases.json``) that the Host's authority, the
CLI/TUI rule and the web page's ``fields.js`` all run; the fixture's ``description`` is their format."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.core.form import Field, Form, decode_requested_schema

CASES_PATH = Path(__file__).resolve().parent.parent / "fixtures" / "form_field_cases.json"
FIELD = "f"
"""Every case's one field is named ``f``."""
MISSING_REQUIRED = "ANSWER_MISSING_REQUIRED"


@dataclass(frozen=True)
class FieldCase:
    """One case: a field, what the user typed, and what every validator must make of it."""

    data: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def untouched(self) -> bool:
        return bool(self.data.get("untouched", False))

    @property
    def input(self) -> Any:
        return self.data["input"]

    @property
    def expect(self) -> dict[str, Any]:
        expect: dict[str, Any] = self.data["expect"]
        return expect

    def form(self) -> Form:
        """The one-field form the case's schema decodes to (by the Host's own decoder)."""
        schema = {
            "type": "object",
            "properties": {FIELD: self.data["schema"]},
            "required": [FIELD] if self.data["required"] else [],
        }
        return decode_requested_schema(schema, message="field case")

    def field(self) -> Field:
        return self.form().fields[0]


def load_cases() -> list[FieldCase]:
    """Every case of the fixture, in its order."""
    return [FieldCase(case) for case in json.loads(CASES_PATH.read_text(encoding="utf-8"))["cases"]]


def same_value(actual: object, expected: object) -> bool:
    """Whether a validator's ``actual`` value is the case's JSON ``expected`` one (a tuple is a list; a bool is
    never equal to a number)."""
    if isinstance(actual, tuple):
        actual = list(actual)
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    return actual == expected
