"""The CLI and TUI's rule for typed input (``check_form_input``) runs the shared field cases
(``tests/fixtures/form_field_cases.json``) that the Host's authority and the web page run too."""

from __future__ import annotations

from typing import Any

import pytest

from surfaces.common.form_input import RawInput, check_form_input, initial_raw
from tests.helpers.field_cases import FIELD, MISSING_REQUIRED, FieldCase, load_cases, same_value

CASES = load_cases()


def typed(value: Any) -> RawInput:
    """A case's input as a CLI/TUI widget holds it (picks are a tuple)."""
    return tuple(value) if isinstance(value, list) else value


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_cli_and_tui_accept_leave_out_or_refuse_every_shared_field_case(case: FieldCase) -> None:
    form = case.form()
    raw = initial_raw(form.fields[0]) if case.untouched else typed(case.input)
    check = check_form_input(form, [raw])
    expect = case.expect
    if "value" in expect:
        assert check.ok, check.errors
        assert check.answer is not None
        assert same_value(check.answer.values[FIELD], expect["value"])
    elif expect.get("omitted"):
        assert check.ok, check.errors
        assert check.answer is not None
        assert FIELD not in check.answer.values
    else:
        assert not check.ok
        assert 0 in check.errors, check.form_errors
        if expect["error"] == MISSING_REQUIRED:
            assert check.errors[0] == "required"
