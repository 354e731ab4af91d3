"""The Host's authority (``validate_answer``) runs the shared field cases (``tests/fixtures/form_field_cases.json``)
that the CLI/TUI rule and the web page run too: the value a surface sends is accepted as it is, a field left out
is left out (or missing when required), and every refused value is refused with the case's stable reason."""

from __future__ import annotations

from typing import cast

import pytest

from services.core.form import Action, Answer, FormError, FormValue, validate_answer
from tests.helpers.field_cases import FIELD, MISSING_REQUIRED, FieldCase, load_cases, same_value

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_host_accepts_leaves_out_or_refuses_every_shared_field_case(case: FieldCase) -> None:
    form = case.form()
    expect = case.expect
    if "value" in expect:
        values = cast(dict[str, FormValue], {FIELD: expect["value"]})
        accepted = validate_answer(form, Answer(Action.ACCEPT, values))
        assert same_value(accepted.values[FIELD], expect["value"])
    elif expect.get("omitted"):
        accepted = validate_answer(form, Answer(Action.ACCEPT, {}))
        assert FIELD not in accepted.values
    else:
        sent = {} if expect["error"] == MISSING_REQUIRED else {FIELD: expect["answer"]}
        with pytest.raises(FormError) as refused:
            validate_answer(form, Answer(Action.ACCEPT, cast(dict[str, FormValue], sent)))
        assert {violation.reason.value for violation in refused.value.violations} == {expect["error"]}
        assert all(violation.path == f"/{FIELD}" for violation in refused.value.violations)
