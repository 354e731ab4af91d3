"""Property tests across the authority and every surface's model (one schema, one rule everywhere:
docs/acceptance.md#protocol-and-form-correctness).

Schemas are generated from MCP 2026-07-28's primitive subset (:mod:`tests.services.core.form.strategies`),
answers for them too. For every decodable schema:

- it renders in every surface's model: the canonical proto round trip, the web page's JSON view, the TUI's
  raw widgets and inline check, the CLI's ``pending`` text and ``--json``;
- an answer the form accepts, typed the way a user types it into the TUI / CLI, is accepted by the
  server's *own* schema (the original ``requestedSchema``, JSON Schema 2020-12 with format checks), as the
  provider checks it before the retry;
- the JSON types on the wire (``ElicitResult.content``) match the schema: integers are JSON integers,
  numbers never booleans, multi-selects arrays of strings, omitted fields stay omitted.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maka.interaction.v1 import interaction_pb2
from services.core.form import (
    Action,
    Answer,
    BooleanField,
    Field,
    FormValue,
    MultiSelectField,
    NumberField,
    SingleSelectField,
    StringField,
    decode_requested_schema,
    validate_answer,
)
from services.core.form.mcp_json import answer_to_elicit_result
from services.core.form.protobuf import form_from_proto, form_to_proto
from surfaces.cli.commands.pending import _human
from surfaces.common.form_input import RawInput, check_form_input, field_hints, initial_raws, values_from_json
from surfaces.common.interactions import InteractionView
from surfaces.web.views import interaction_view
from tests.services.core.form.strategies import requested_schemas, values_for

PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KINDS = {"string", "email", "uri", "date", "date-time", "number", "integer", "boolean", "single_select", "multi_select"}


def _view(schema: dict[str, Any]) -> InteractionView:
    form = decode_requested_schema(schema, message="Please answer")
    record = interaction_pb2.Interaction(
        interaction_id="ix_1", state=interaction_pb2.INTERACTION_STATE_PENDING, form=form_to_proto(form)
    )
    record.binding.session_id = "s"
    record.binding.tool_name = "fx:ask"
    record.round.position, record.round.size = 1, 2
    record.round.deadline.FromMilliseconds(1_900_000_000_000)
    return InteractionView.from_proto(record)


@PROPERTY
@given(schema=requested_schemas())
def test_every_decodable_schema_renders_in_every_surface_model(schema: dict[str, Any]) -> None:
    form = decode_requested_schema(schema, message="Please answer")
    assert form_from_proto(form_to_proto(form)) == form  # what the Interaction service stores
    view = _view(schema)
    assert view.form == form
    page = json.loads(json.dumps(interaction_view(view)))  # the web page's JSON
    assert [f["name"] for f in page["fields"]] == [f.name for f in form.fields]
    assert {f["kind"] for f in page["fields"]} <= KINDS
    assert page["round"]["position"] == 1
    assert page["round"]["size"] == 2
    raws = initial_raws(form)  # the TUI's widgets start from these
    check = check_form_input(form, raws)
    assert check.ok or check.errors or check.form_errors
    for f in form.fields:
        assert field_hints(f)
    text = _human([view])  # maka pending
    assert "form 1 of 2" in text
    assert all(f"[{f.name}]" in text for f in form.fields)
    assert json.loads(json.dumps(view.to_json()))["round"]["size"] == 2  # maka pending --json


def _raw(field: Field, value: FormValue | None) -> RawInput:
    """How a user enters ``value`` into the TUI widget of ``field`` (``None``: left untouched/empty)."""
    if value is None:
        if isinstance(field, StringField | NumberField):
            return ""
        return None
    if isinstance(field, NumberField):
        return str(value) if isinstance(value, int) else repr(value)
    assert isinstance(value, str | bool | tuple)
    return value


@st.composite
def answers(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, FormValue]]:
    schema = draw(requested_schemas())
    form = decode_requested_schema(schema, message="m")
    values: dict[str, FormValue] = {}
    for field in form.fields:
        if field.required or draw(st.booleans()):
            values[field.name] = draw(values_for(field))
    return schema, values


def _unordered(values: dict[str, FormValue]) -> dict[str, object]:
    """Picks compared as sets: a pick list shows options in their order, whatever order they were picked in."""
    return {k: frozenset(v) if isinstance(v, tuple) else v for k, v in values.items()}


def _wire_type_matches(field: Field, value: object) -> bool:
    if isinstance(field, NumberField):
        if isinstance(value, bool):
            return False
        return isinstance(value, int) if field.integer else isinstance(value, int | float)
    if isinstance(field, BooleanField):
        return isinstance(value, bool)
    if isinstance(field, StringField | SingleSelectField):
        return isinstance(value, str)
    assert isinstance(field, MultiSelectField)
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


@PROPERTY
@given(case=answers())
def test_an_answer_the_form_accepts_is_accepted_by_the_servers_own_schema_with_matching_wire_types(
    case: tuple[dict[str, Any], dict[str, FormValue]],
) -> None:
    schema, values = case
    form = decode_requested_schema(schema, message="m")
    canonical = validate_answer(form, Answer(Action.ACCEPT, values))
    # The same answer typed into the TUI's widgets gives the same values. Empty text is "left empty" in a
    # text box (omitted; "required" when required), so "" is only compared where a surface can send it.
    if not any(f.required and values.get(f.name) == "" for f in form.fields):
        typed = check_form_input(form, [_raw(f, values.get(f.name)) for f in form.fields])
        assert typed.ok, (typed.errors, typed.form_errors)
        assert typed.answer is not None
        assert _unordered(typed.answer.values) == _unordered({k: v for k, v in canonical.values.items() if v != ""})
    # ... and so does `maka answer --values JSON` (every key given, so no default is added).
    given_json = json.loads(json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}))
    cli = values_from_json(form, given_json)
    assert validate_answer(form, Answer(Action.ACCEPT, cli)).values == canonical.values
    # On the wire: exactly the answered fields, each in its schema's JSON type, valid for the server's schema.
    content = json.loads(json.dumps(answer_to_elicit_result(canonical)["content"]))
    assert set(content) == set(values)
    by_name = {f.name: f for f in form.fields}
    assert all(_wire_type_matches(by_name[name], value) for name, value in content.items())
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    server = cls(schema, format_checker=cls.FORMAT_CHECKER)
    assert [error.message for error in server.iter_errors(content)] == []


def test_round_summary_is_stable_for_a_known_deadline() -> None:
    from surfaces.common.form_input import round_summary

    deadline = datetime(2026, 12, 1, 12, 5, 9, tzinfo=UTC)
    now = datetime(2026, 12, 1, 12, 1, 4, tzinfo=UTC)
    assert round_summary(1, 2, deadline, now) == "form 1 of 2 · the round ends 12:05:09 UTC (4m 05s left)"
    assert round_summary(1, 1, deadline, now) == "the round ends 12:05:09 UTC (4m 05s left)"
    assert round_summary(0, 0, None, now) == ""
