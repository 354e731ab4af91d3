"""Loss-free conversions: Form/Answer ⇄ maka.form.v1 protobuf ⇄ MCP JSON (requestedSchema, ElicitResult)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maka.form.v1 import form_pb2
from services.core.form import (
    Action,
    Answer,
    Form,
    FormError,
    FormErrorReason,
    FormValue,
    MultiSelectField,
    NumberField,
    Option,
    Requester,
    SingleSelectField,
    StringField,
    StringFormat,
    Violation,
    answer_from_elicit_result,
    answer_from_proto,
    answer_to_elicit_result,
    answer_to_proto,
    decode_requested_schema,
    form_from_proto,
    form_to_proto,
    form_to_requested_schema,
    validate_answer,
    violations_from_proto,
    violations_to_proto,
)
from tests.services.core.form.strategies import requested_schemas, values_for

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

requesters = st.builds(
    Requester, st.text(max_size=10), st.text(max_size=10), st.text(max_size=10), st.text(max_size=10)
)


def through_proto(form: Form) -> Form:
    wire = form_to_proto(form).SerializeToString()
    return form_from_proto(form_pb2.Form.FromString(wire))


# --- Form ⇄ protobuf ⇄ requestedSchema


@PROPERTY
@given(schema=requested_schemas(), requester=requesters)
def test_schema_to_form_to_proto_to_form_round_trips(schema: dict[str, Any], requester: Requester) -> None:
    form = decode_requested_schema(schema, message="Need input ✍", requester=requester)
    assert through_proto(form) == form


@PROPERTY
@given(schema=requested_schemas())
def test_form_to_requested_schema_to_form_round_trips(schema: dict[str, Any]) -> None:
    form = decode_requested_schema(schema, message="m")
    canonical = form_to_requested_schema(form)
    assert decode_requested_schema(canonical, message="m") == form
    assert form_to_requested_schema(decode_requested_schema(canonical, message="m")) == canonical  # a fixed point


@PROPERTY
@given(schema=requested_schemas())
def test_integer_fields_keep_json_integers_through_proto_and_back_to_schema(schema: dict[str, Any]) -> None:
    form = through_proto(decode_requested_schema(schema, message="m"))
    for field in form.fields:
        if isinstance(field, NumberField) and field.integer and field.default is not None:
            assert type(field.default) is int
    text = json.dumps(form_to_requested_schema(form))
    for name, prop in json.loads(text)["properties"].items():
        if prop["type"] == "integer" and "default" in prop:
            assert isinstance(prop["default"], int), name


def test_canonical_requested_schema_shape() -> None:
    form = Form(
        message="m",
        fields=(
            StringField(name="email", label="E-mail", description="work", required=True, format=StringFormat.EMAIL),
            NumberField(name="n", label="n", integer=True, minimum=0.0, maximum=10.0, default=3.0),
            SingleSelectField(name="plain", label="plain", options=(Option("a", "a"), Option("b", "b"))),
            SingleSelectField(name="titled", label="titled", options=(Option("a", "Ay"),), default="a"),
            MultiSelectField(name="m", label="m", options=(Option("x", "x"),), min_items=0, max_items=1, default=()),
            MultiSelectField(name="mt", label="mt", options=(Option("x", "Ex"),)),
        ),
    )
    assert form_to_requested_schema(form) == {
        "type": "object",
        "properties": {
            "email": {"type": "string", "title": "E-mail", "description": "work", "format": "email"},
            "n": {"type": "integer", "minimum": 0, "maximum": 10, "default": 3},
            "plain": {"type": "string", "enum": ["a", "b"]},
            "titled": {"type": "string", "oneOf": [{"const": "a", "title": "Ay"}], "default": "a"},
            "m": {
                "type": "array",
                "minItems": 0,
                "maxItems": 1,
                "items": {"type": "string", "enum": ["x"]},
                "default": [],
            },
            "mt": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Ex"}]}},
        },
        "required": ["email"],
    }
    assert '"minimum": 0,' in json.dumps(form_to_requested_schema(form))


def test_falsy_defaults_keep_their_presence_through_proto() -> None:
    form = decode_requested_schema(
        {
            "type": "object",
            "properties": {
                "s": {"type": "string", "default": ""},
                "i": {"type": "integer", "default": 0},
                "b": {"type": "boolean", "default": False},
                "m": {"type": "array", "items": {"type": "string", "enum": ["a"]}, "default": []},
                "none": {"type": "string"},
            },
        },
        message="m",
    )
    message = form_to_proto(form)
    assert message.fields[0].string.HasField("default_value")
    assert message.fields[1].integer.HasField("default_value")
    assert message.fields[2].boolean.HasField("default_value")
    assert message.fields[3].multi_select.HasField("default_value")
    assert not message.fields[4].string.HasField("default_value")
    assert through_proto(form) == form


def test_a_proto_field_without_a_kind_is_rejected() -> None:
    message = form_pb2.Form(message="m", fields=[form_pb2.Field(name="a", label="a")])
    with pytest.raises(FormError) as caught:
        form_from_proto(message)
    assert [(v.path, v.reason) for v in caught.value.violations] == [
        ("/properties/a", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE)
    ]


def test_a_proto_string_field_with_an_unknown_format_number_is_rejected() -> None:
    field = form_pb2.Field(name="a", label="a", string=form_pb2.StringField())
    field.string.format = 99  # type: ignore[assignment]  # a newer peer's enum value
    with pytest.raises(FormError) as caught:
        form_from_proto(form_pb2.Form(message="m", fields=[field]))
    assert caught.value.reason is FormErrorReason.SCHEMA_INVALID_VALUE


# --- Answer ⇄ protobuf


@st.composite
def valid_answers(draw: st.DrawFn) -> Answer:
    form = decode_requested_schema(draw(requested_schemas()), message="m")
    action = draw(st.sampled_from(list(Action)))
    if action is not Action.ACCEPT:
        return Answer(action)
    values = {f.name: draw(values_for(f)) for f in form.fields if draw(st.booleans()) or f.required}
    return validate_answer(form, Answer(Action.ACCEPT, values))


@PROPERTY
@given(answer=valid_answers())
def test_answer_to_proto_and_back_round_trips_with_exact_types(answer: Answer) -> None:
    wire = answer_to_proto(answer).SerializeToString()
    back = answer_from_proto(form_pb2.Answer.FromString(wire))
    assert back == answer
    for name, value in answer.values.items():
        assert type(back.values[name]) is type(value)


@PROPERTY
@given(answer=valid_answers())
def test_answer_to_elicit_result_and_back_round_trips_through_json_text(answer: Answer) -> None:
    text = json.dumps(answer_to_elicit_result(answer))
    back = answer_from_elicit_result(json.loads(text))
    assert back == answer
    for name, value in answer.values.items():
        assert type(back.values[name]) is type(value)


def test_integers_use_integer_value_and_numbers_use_number_value() -> None:
    message = answer_to_proto(Answer(Action.ACCEPT, {"i": 2**53, "x": 0.5, "b": True, "s": "", "m": ()}))
    assert message.values["i"].WhichOneof("kind") == "integer_value"
    assert message.values["x"].WhichOneof("kind") == "number_value"
    assert message.values["b"].WhichOneof("kind") == "boolean_value"
    assert message.values["s"].WhichOneof("kind") == "string_value"
    assert message.values["m"].WhichOneof("kind") == "string_list_value"
    assert answer_from_proto(message).values["m"] == ()


def test_proto_answer_with_unspecified_action_or_values_on_decline_is_rejected() -> None:
    with pytest.raises(FormError) as caught:
        answer_from_proto(form_pb2.Answer())
    assert caught.value.reason is FormErrorReason.ANSWER_INVALID_ACTION
    declined = form_pb2.Answer(action=form_pb2.ACTION_DECLINE)
    declined.values["a"].string_value = "x"
    with pytest.raises(FormError) as caught:
        answer_from_proto(declined)
    assert caught.value.reason is FormErrorReason.ANSWER_INVALID_ACTION


def test_proto_answer_value_without_a_kind_is_rejected_naming_the_field() -> None:
    message = form_pb2.Answer(action=form_pb2.ACTION_ACCEPT)
    message.values["a"].SetInParent()
    with pytest.raises(FormError) as caught:
        answer_from_proto(message)
    assert [(v.path, v.reason) for v in caught.value.violations] == [("/a", FormErrorReason.ANSWER_WRONG_TYPE)]


def test_answer_to_proto_rejects_values_protobuf_cannot_carry() -> None:
    bad: dict[str, Any] = {"big": 2**64, "obj": {"k": 1}, "text": "\ud800"}
    with pytest.raises(FormError) as caught:
        answer_to_proto(Answer(Action.ACCEPT, bad))
    assert {(v.path, v.reason) for v in caught.value.violations} == {
        ("/big", FormErrorReason.ANSWER_WRONG_TYPE),
        ("/obj", FormErrorReason.ANSWER_WRONG_TYPE),
        ("/text", FormErrorReason.ANSWER_WRONG_TYPE),
    }


# --- Answer ⇄ bare MCP ElicitResult


def test_elicit_result_shapes_are_bare_and_integers_have_no_fraction() -> None:
    accepted = answer_to_elicit_result(Answer(Action.ACCEPT, {"n": 3, "m": ("a", "b"), "b": False}))
    assert json.dumps(accepted) == '{"action": "accept", "content": {"n": 3, "m": ["a", "b"], "b": false}}'
    assert answer_to_elicit_result(Answer(Action.DECLINE)) == {"action": "decline"}
    assert answer_to_elicit_result(Answer(Action.CANCEL)) == {"action": "cancel"}
    assert answer_to_elicit_result(Answer(Action.ACCEPT)) == {"action": "accept", "content": {}}


def test_elicit_result_refuses_values_on_decline() -> None:
    with pytest.raises(FormError) as caught:
        answer_to_elicit_result(Answer(Action.DECLINE, {"a": "x"}))
    assert caught.value.reason is FormErrorReason.ANSWER_INVALID_ACTION


def test_accept_without_content_decodes_to_no_values() -> None:
    assert answer_from_elicit_result({"action": "accept"}) == Answer(Action.ACCEPT)


@pytest.mark.parametrize(
    ("result", "path", "reason"),
    [
        ([], "$", FormErrorReason.ANSWER_INVALID_ACTION),
        ("accept", "$", FormErrorReason.ANSWER_INVALID_ACTION),
        ({}, "/action", FormErrorReason.ANSWER_INVALID_ACTION),
        ({"action": "ACCEPT"}, "/action", FormErrorReason.ANSWER_INVALID_ACTION),
        ({"action": "submit"}, "/action", FormErrorReason.ANSWER_INVALID_ACTION),
        ({"action": 1}, "/action", FormErrorReason.ANSWER_INVALID_ACTION),
        ({"action": "accept", "_meta": {}}, "/_meta", FormErrorReason.ANSWER_INVALID_ACTION),
        ({"action": "accept", "resultType": "complete"}, "/resultType", FormErrorReason.ANSWER_INVALID_ACTION),
        ({"action": "decline", "content": {}}, "/content", FormErrorReason.ANSWER_INVALID_ACTION),
        ({"action": "cancel", "content": {"a": 1}}, "/content", FormErrorReason.ANSWER_INVALID_ACTION),
        ({"action": "accept", "content": []}, "/content", FormErrorReason.ANSWER_WRONG_TYPE),
        ({"action": "accept", "content": {"a": None}}, "/a", FormErrorReason.ANSWER_WRONG_TYPE),
        ({"action": "accept", "content": {"a": {"b": 1}}}, "/a", FormErrorReason.ANSWER_WRONG_TYPE),
        ({"action": "accept", "content": {"a": [1]}}, "/a", FormErrorReason.ANSWER_WRONG_TYPE),
        ({"action": "accept", "content": {"a": ["x", None]}}, "/a", FormErrorReason.ANSWER_WRONG_TYPE),
        ({"action": "accept", "content": {"a": float("nan")}}, "/a", FormErrorReason.ANSWER_WRONG_TYPE),
        ({"action": "accept", "content": {"a": float("-inf")}}, "/a", FormErrorReason.ANSWER_WRONG_TYPE),
    ],
)
def test_answer_from_elicit_result_decodes_exact_shapes_only(
    result: object, path: str, reason: FormErrorReason
) -> None:
    with pytest.raises(FormError) as caught:
        answer_from_elicit_result(result)
    assert (path, reason) in {(v.path, v.reason) for v in caught.value.violations}


def test_answer_from_elicit_result_lists_every_bad_value() -> None:
    with pytest.raises(FormError) as caught:
        answer_from_elicit_result({"action": "accept", "content": {"a": None, "b": {}, "ok": "x"}})
    assert {v.path for v in caught.value.violations} == {"/a", "/b"}


def test_answer_from_elicit_result_keeps_json_types() -> None:
    answer = answer_from_elicit_result(
        json.loads('{"action":"accept","content":{"i":1,"f":1.0,"b":true,"s":"1","l":["x"]}}')
    )
    values: dict[str, FormValue] = answer.values
    assert [type(values[k]) for k in "ifbsl"] == [int, float, bool, str, tuple]


# --- violations ⇄ protobuf


def test_every_form_error_reason_has_a_proto_value_with_the_same_name() -> None:
    proto_names = {
        name.removeprefix("FORM_ERROR_REASON_")
        for name in form_pb2.DESCRIPTOR.enum_types_by_name["FormErrorReason"].values_by_name
        if not name.endswith("UNSPECIFIED")
    }
    assert proto_names == {reason.value for reason in FormErrorReason}


@given(
    violations=st.lists(
        st.builds(Violation, st.text(max_size=20), st.sampled_from(list(FormErrorReason)), st.text(max_size=40)),
        max_size=5,
    )
)
@PROPERTY
def test_violations_round_trip_through_proto(violations: list[Violation]) -> None:
    wire = [m.SerializeToString() for m in violations_to_proto(violations)]
    assert violations_from_proto(form_pb2.FieldViolation.FromString(w) for w in wire) == violations


def test_an_unknown_proto_reason_degrades_to_a_generic_code_instead_of_crashing() -> None:
    unknown = form_pb2.FieldViolation(path="/a", description="d")
    unknown.reason = 999  # type: ignore[assignment]
    schema_side = form_pb2.FieldViolation(path="/properties/a", reason=form_pb2.FORM_ERROR_REASON_UNSPECIFIED)
    assert [v.reason for v in violations_from_proto([unknown, schema_side])] == [
        FormErrorReason.ANSWER_CONSTRAINT,
        FormErrorReason.SCHEMA_INVALID_VALUE,
    ]


def test_number_bounds_that_are_not_integral_survive_an_integer_field_round_trip() -> None:
    form = Form(message="m", fields=(NumberField(name="n", label="n", integer=True, minimum=0.5, maximum=1e300),))
    back = through_proto(form)
    field = back.fields[0]
    assert isinstance(field, NumberField)
    assert field.minimum == 0.5
    assert field.maximum == 1e300
    assert decode_requested_schema(form_to_requested_schema(back), message="m") == back
