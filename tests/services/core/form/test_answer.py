"""validate_answer (MCP 2026-07-28 elicitation "Response Actions"/"Requested Schema"; RFC criterion 5)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.core.form import (
    Action,
    Answer,
    Form,
    FormError,
    FormErrorReason,
    FormValue,
    answer_to_elicit_result,
    decode_requested_schema,
    form_to_requested_schema,
    validate_answer,
)
from services.core.form.errors import pointer
from services.core.form.model import BooleanField, MultiSelectField, NumberField, SingleSelectField, StringField
from services.core.limits import DEFAULT_LIMITS, Limits
from tests.services.core.form.strategies import requested_schemas, values_for

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SECRET = "hunter2-SECRET-value"


def form_of(properties: dict[str, Any], required: list[str] | None = None) -> Form:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return decode_requested_schema(schema, message="m")


def accept(form: Form, values: dict[str, Any], limits: Limits = DEFAULT_LIMITS) -> dict[str, FormValue]:
    return validate_answer(form, Answer(Action.ACCEPT, values), limits=limits).values


def rejected(form: Form, values: dict[str, Any], limits: Limits = DEFAULT_LIMITS) -> set[tuple[str, FormErrorReason]]:
    with pytest.raises(FormError) as caught:
        validate_answer(form, Answer(Action.ACCEPT, values), limits=limits)
    return {(v.path, v.reason) for v in caught.value.violations}


INTEGER = form_of({"n": {"type": "integer"}})
NUMBER = form_of({"x": {"type": "number"}})


# --- integers and numbers


@pytest.mark.parametrize(
    ("given_value", "expected"), [(1.0, 1), (1e1, 10), (2**53, 2**53), (-(2**53), -(2**53)), (0, 0)]
)
def test_an_integral_number_is_accepted_for_an_integer_field_and_sent_as_a_json_integer(
    given_value: float, expected: int
) -> None:
    values = accept(INTEGER, {"n": given_value})
    assert values["n"] == expected
    assert type(values["n"]) is int
    assert (
        json.dumps(answer_to_elicit_result(Answer(Action.ACCEPT, values)))
        == f'{{"action": "accept", "content": {{"n": {expected}}}}}'
    )


@pytest.mark.parametrize(
    "bad", [9007199254740993, -9007199254740993, 1.5, 1e300, float("nan"), float("inf"), True, False, "1", None, [1]]
)
def test_an_integer_field_rejects_non_integral_unsafe_or_non_numbers(bad: object) -> None:
    assert rejected(INTEGER, {"n": bad}) == {("/n", FormErrorReason.ANSWER_WRONG_TYPE)}


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), True, "0.5", 2**53 + 1, None])
def test_a_number_field_rejects_nan_infinity_booleans_and_strings(bad: object) -> None:
    assert rejected(NUMBER, {"x": bad}) == {("/x", FormErrorReason.ANSWER_WRONG_TYPE)}


def test_a_number_field_keeps_ints_and_floats_as_given() -> None:
    assert accept(NUMBER, {"x": 3}) == {"x": 3}
    assert accept(NUMBER, {"x": 0.25}) == {"x": 0.25}


def test_numeric_bounds_are_inclusive() -> None:
    form = form_of({"n": {"type": "integer", "minimum": 1, "maximum": 3}})
    assert accept(form, {"n": 1}) == {"n": 1}
    assert accept(form, {"n": 3.0}) == {"n": 3}
    assert rejected(form, {"n": 0}) == {("/n", FormErrorReason.ANSWER_CONSTRAINT)}
    assert rejected(form, {"n": 4}) == {("/n", FormErrorReason.ANSWER_CONSTRAINT)}


# --- strings


def test_string_lengths_are_counted_in_code_points() -> None:
    form = form_of({"s": {"type": "string", "minLength": 2, "maxLength": 3}})
    assert accept(form, {"s": "😀😀😀"}) == {"s": "😀😀😀"}  # 3 code points, 12 UTF-8 bytes
    assert accept(form, {"s": "e\u0301e"}) == {"s": "e\u0301e"}  # combining accent counts as a code point
    assert rejected(form, {"s": "😀😀😀😀"}) == {("/s", FormErrorReason.ANSWER_CONSTRAINT)}
    assert rejected(form, {"s": "😀"}) == {("/s", FormErrorReason.ANSWER_CONSTRAINT)}


def test_the_repository_string_cap_applies_without_max_length() -> None:
    form = form_of({"s": {"type": "string"}})
    limits = Limits(max_string_value_chars=5)
    assert accept(form, {"s": "ü" * 5}, limits) == {"s": "ü" * 5}
    assert rejected(form, {"s": "ü" * 6}, limits) == {("/s", FormErrorReason.LIMIT_EXCEEDED)}


def test_text_with_unpaired_surrogates_is_rejected() -> None:
    assert rejected(form_of({"s": {"type": "string"}}), {"s": "a\ud800"}) == {("/s", FormErrorReason.ANSWER_WRONG_TYPE)}


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        (
            "email",
            [
                "a@example.com",
                "ü@bücher.de",
                "first.last+tag@sub.example.org",
                "ops@corp.local",
                "x@example.test",
                "a@localhost",
                "a@b",
                "root@[192.0.2.1]",
            ],
            ["no-at", "a@@example.com", "", "a b@example.com", "a@-x.com", "a@", "@example.com", "a@x..y"],
        ),
        (
            "uri",
            ["https://example.com/x?y#z", "urn:isbn:0451450523", "mailto:a@example.com"],
            ["not a uri", "/relative", ""],
        ),
        ("date", ["2024-02-29", "0001-01-01"], ["2024-02-30", "2024-2-1", "24-02-01", "2024-02-01T00:00:00Z"]),
        (
            "date-time",
            ["2024-02-29T12:30:00Z", "2024-02-29T12:30:00.5+05:30", "2024-02-29t12:30:00z"],
            ["2024-02-29 12:30:00", "2024-02-29T12:30:00", "2024-02-29", "2024-02-29T25:00:00Z"],
        ),
    ],
)
def test_formats_are_checked_with_libraries(fmt: str, good: list[str], bad: list[str]) -> None:
    form = form_of({"f": {"type": "string", "format": fmt}})
    for value in good:
        assert accept(form, {"f": value}) == {"f": value}
    for value in bad:
        assert rejected(form, {"f": value}) == {("/f", FormErrorReason.ANSWER_CONSTRAINT)}, value


# --- booleans and selects


def test_a_boolean_field_takes_only_json_booleans() -> None:
    form = form_of({"b": {"type": "boolean"}})
    assert accept(form, {"b": False}) == {"b": False}
    for bad in (0, 1, "true", None):
        assert rejected(form, {"b": bad}) == {("/b", FormErrorReason.ANSWER_WRONG_TYPE)}


def test_a_single_select_takes_only_declared_option_values_not_labels() -> None:
    form = form_of({"p": {"oneOf": [{"const": "p1", "title": "Plan one"}]}})
    assert accept(form, {"p": "p1"}) == {"p": "p1"}
    assert rejected(form, {"p": "Plan one"}) == {("/p", FormErrorReason.ANSWER_CONSTRAINT)}
    assert rejected(form, {"p": ["p1"]}) == {("/p", FormErrorReason.ANSWER_WRONG_TYPE)}


MULTI = {"type": "array", "items": {"anyOf": [{"const": c, "title": c.upper()} for c in "abcd"]}, "maxItems": 2}


def test_a_multi_select_is_normalized_to_a_tuple_in_submitted_order() -> None:
    assert accept(form_of({"m": MULTI}), {"m": ["b", "a"]}) == {"m": ("b", "a")}


def test_too_many_picks_repeated_picks_and_unknown_picks_are_each_reported() -> None:
    form = form_of({"m": MULTI})
    assert rejected(form, {"m": ["a", "b", "c"]}) == {("/m", FormErrorReason.ANSWER_CONSTRAINT)}
    assert rejected(form, {"m": ["a", "a"]}) == {("/m", FormErrorReason.ANSWER_CONSTRAINT)}
    assert rejected(form, {"m": ["z"]}) == {("/m", FormErrorReason.ANSWER_CONSTRAINT)}
    with pytest.raises(FormError) as caught:
        validate_answer(form, Answer(Action.ACCEPT, {"m": ("a", "a", "z")}))
    assert len(caught.value.violations) == 3  # not a member, not unique, too many
    for bad in ("a", [1], None):
        assert rejected(form, {"m": bad}) == {("/m", FormErrorReason.ANSWER_WRONG_TYPE)}


def test_a_required_multi_select_submitted_empty_is_present_unless_min_items_says_otherwise() -> None:
    plain = form_of({"m": {"type": "array", "items": {"type": "string", "enum": ["a"]}}}, required=["m"])
    assert accept(plain, {"m": []}) == {"m": ()}
    at_least_one = form_of({"m": {"type": "array", "items": {"type": "string", "enum": ["a"]}, "minItems": 1}}, ["m"])
    assert rejected(at_least_one, {"m": []}) == {("/m", FormErrorReason.ANSWER_CONSTRAINT)}
    assert rejected(at_least_one, {}) == {("/m", FormErrorReason.ANSWER_MISSING_REQUIRED)}


# --- shape of the answer


def test_values_for_undeclared_fields_are_rejected() -> None:
    assert rejected(form_of({"a": {"type": "string"}}), {"a": "x", "b/c": 1}) == {
        ("/b~1c", FormErrorReason.ANSWER_UNKNOWN_FIELD)
    }


def test_a_required_field_without_default_must_be_present_and_optional_ones_may_be_left_out() -> None:
    form = form_of({"r": {"type": "string"}, "o": {"type": "string"}}, required=["r"])
    assert rejected(form, {"o": "x"}) == {("/r", FormErrorReason.ANSWER_MISSING_REQUIRED)}
    assert accept(form, {"r": ""}) == {"r": ""}


@pytest.mark.parametrize("action", [Action.DECLINE, Action.CANCEL])
def test_decline_and_cancel_carry_no_values(action: Action) -> None:
    form = form_of({"a": {"type": "string"}}, required=["a"])
    assert validate_answer(form, Answer(action)) == Answer(action)
    with pytest.raises(FormError) as caught:
        validate_answer(form, Answer(action, {"a": "x"}))
    assert caught.value.reason is FormErrorReason.ANSWER_INVALID_ACTION


def test_an_action_outside_the_enum_is_rejected() -> None:
    with pytest.raises(FormError) as caught:
        validate_answer(form_of({}), Answer("accept"))  # type: ignore[arg-type]
    assert caught.value.reason is FormErrorReason.ANSWER_INVALID_ACTION


def test_every_field_violation_is_listed() -> None:
    form = form_of(
        {
            "s": {"type": "string", "maxLength": 1},
            "n": {"type": "integer"},
            "b": {"type": "boolean"},
            "r": {"type": "string"},
        },
        required=["r"],
    )
    assert rejected(form, {"s": "long", "n": 0.5, "b": "yes", "zz": 1}) == {
        ("/s", FormErrorReason.ANSWER_CONSTRAINT),
        ("/n", FormErrorReason.ANSWER_WRONG_TYPE),
        ("/b", FormErrorReason.ANSWER_WRONG_TYPE),
        ("/r", FormErrorReason.ANSWER_MISSING_REQUIRED),
        ("/zz", FormErrorReason.ANSWER_UNKNOWN_FIELD),
    }


def test_error_messages_never_quote_the_submitted_value() -> None:
    form = form_of(
        {
            "s": {"type": "string", "maxLength": 3, "format": "email"},
            "n": {"type": "number"},
            "one": {"type": "string", "enum": ["a"]},
            "many": {"type": "array", "items": {"type": "string", "enum": ["a"]}},
        }
    )
    with pytest.raises(FormError) as caught:
        validate_answer(
            form, Answer(Action.ACCEPT, {"s": SECRET, "n": SECRET, "one": SECRET, "many": (SECRET, SECRET)})
        )
    error = caught.value
    assert len(error.violations) >= 4
    assert SECRET not in str(error)
    assert SECRET not in repr(error.violations)


def test_the_answer_byte_cap_is_inclusive() -> None:
    form = form_of({"s": {"type": "string"}})
    values = {"s": "é" * 10}
    size = len(json.dumps(values, ensure_ascii=False).encode("utf-8"))
    assert accept(form, values, Limits(max_answer_bytes=size)) == values
    assert rejected(form, values, Limits(max_answer_bytes=size - 1)) == {("$", FormErrorReason.LIMIT_EXCEEDED)}


# --- defaults


def test_omitted_fields_stay_omitted_and_are_never_refilled_with_their_defaults() -> None:
    form = form_of(
        {
            "s": {"type": "string", "default": ""},
            "i": {"type": "integer", "default": 0},
            "n": {"type": "number", "default": 0.5},
            "f": {"type": "boolean", "default": False},
            "t": {"type": "boolean", "default": True},
            "one": {"type": "string", "enum": ["x", "y"], "default": "y"},
            "many": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "default": ["y", "x"]},
            "none": {"type": "array", "items": {"type": "string", "enum": ["x"]}, "default": []},
            "nodefault": {"type": "string"},
        }
    )
    assert accept(form, {}) == {}
    sent = {"s": "", "i": 0, "n": 0.5, "f": False, "t": True, "one": "y", "many": ["y", "x"], "none": []}
    values = accept(form, sent)
    assert values == {"s": "", "i": 0, "n": 0.5, "f": False, "t": True, "one": "y", "many": ("y", "x"), "none": ()}
    assert type(values["i"]) is int
    assert type(values["f"]) is bool
    content = answer_to_elicit_result(Answer(Action.ACCEPT, values))["content"]
    assert json.loads(json.dumps(content)) == {
        "s": "",
        "i": 0,
        "n": 0.5,
        "f": False,
        "t": True,
        "one": "y",
        "many": ["y", "x"],
        "none": [],
    }


@pytest.mark.parametrize("default", [True, False])
def test_a_required_field_left_out_is_missing_even_with_a_default(default: bool) -> None:
    form = form_of({"ok": {"type": "boolean", "default": default}}, required=["ok"])
    assert rejected(form, {}) == {("/ok", FormErrorReason.ANSWER_MISSING_REQUIRED)}
    assert accept(form, {"ok": default}) == {"ok": default}


def test_a_required_boolean_without_default_needs_an_explicit_choice() -> None:
    form = form_of({"ok": {"type": "boolean"}}, required=["ok"])
    assert rejected(form, {}) == {("/ok", FormErrorReason.ANSWER_MISSING_REQUIRED)}
    assert accept(form, {"ok": False}) == {"ok": False}
    assert accept(form, {"ok": True}) == {"ok": True}


def test_an_optional_boolean_without_default_left_out_is_omitted() -> None:
    assert accept(form_of({"ok": {"type": "boolean"}}), {}) == {}


def test_a_submitted_value_wins_over_the_default() -> None:
    form = form_of({"ok": {"type": "boolean", "default": True}})
    assert accept(form, {"ok": False}) == {"ok": False}


def test_values_come_back_in_form_order() -> None:
    form = form_of({"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string", "default": "z"}})
    assert list(accept(form, {"c": "x", "b": "1", "a": "2"})) == ["a", "b", "c"]


# --- properties


@st.composite
def forms_and_values(draw: st.DrawFn) -> tuple[Form, dict[str, FormValue]]:
    """A decoded form and a full set of values satisfying it (each required field present, optional ones maybe)."""
    form = decode_requested_schema(draw(requested_schemas()), message="m")
    values: dict[str, FormValue] = {}
    for field in form.fields:
        if not field.required and draw(st.booleans()):
            continue
        values[field.name] = draw(values_for(field))
    return form, values


@PROPERTY
@given(case=forms_and_values())
def test_every_value_generated_to_satisfy_a_form_validates(case: tuple[Form, dict[str, FormValue]]) -> None:
    form, values = case
    result = validate_answer(form, Answer(Action.ACCEPT, values))
    for field in form.fields:
        if field.name in values:
            assert result.values[field.name] == values[field.name]
        else:
            assert field.name not in result.values  # never refilled with a default
    # Cross-check with an independent JSON Schema validator against the canonical requestedSchema.
    content = answer_to_elicit_result(result)["content"]
    validator = jsonschema.Draft202012Validator(
        form_to_requested_schema(form), format_checker=jsonschema.FormatChecker()
    )
    assert list(validator.iter_errors(json.loads(json.dumps(content)))) == []


def _wrong_type(field: object) -> object:
    if isinstance(field, StringField | SingleSelectField):
        return 7
    if isinstance(field, NumberField):
        return True
    if isinstance(field, BooleanField):
        return "true"
    assert isinstance(field, MultiSelectField)
    return "not-a-list"


@PROPERTY
@given(case=forms_and_values(), data=st.data())
def test_mutated_values_are_rejected_with_the_right_code(
    case: tuple[Form, dict[str, FormValue]], data: st.DataObject
) -> None:
    form, values = case
    mutation = data.draw(st.sampled_from(["unknown", "wrong-type", "missing", "nan", "not-an-option", "decline"]))
    expected: tuple[str, FormErrorReason]
    if mutation == "unknown":
        key = data.draw(st.text(min_size=1, max_size=6).filter(lambda k: k not in {f.name for f in form.fields}))
        values[key] = "x"
        expected = (pointer(key), FormErrorReason.ANSWER_UNKNOWN_FIELD)
    elif mutation == "decline":
        values["anything"] = 1
        with pytest.raises(FormError) as caught:
            validate_answer(form, Answer(Action.DECLINE, values))
        assert caught.value.reason is FormErrorReason.ANSWER_INVALID_ACTION
        return
    else:
        candidates = {
            "wrong-type": form.fields,
            "missing": [f for f in form.fields if f.required and f.default is None],
            "nan": [f for f in form.fields if isinstance(f, NumberField)],
            "not-an-option": [f for f in form.fields if isinstance(f, SingleSelectField)],
        }[mutation]
        if not candidates:
            return
        field = data.draw(st.sampled_from(list(candidates)))
        if mutation == "wrong-type":
            values[field.name] = _wrong_type(field)  # type: ignore[assignment]
            expected = (pointer(field.name), FormErrorReason.ANSWER_WRONG_TYPE)
        elif mutation == "missing":
            values.pop(field.name, None)
            expected = (pointer(field.name), FormErrorReason.ANSWER_MISSING_REQUIRED)
        elif mutation == "nan":
            values[field.name] = float("nan")
            expected = (pointer(field.name), FormErrorReason.ANSWER_WRONG_TYPE)
        else:
            assert isinstance(field, SingleSelectField)
            outsider = "".join(option.value for option in field.options) + "\x00"
            values[field.name] = outsider
            expected = (pointer(field.name), FormErrorReason.ANSWER_CONSTRAINT)
    with pytest.raises(FormError) as caught:
        validate_answer(form, Answer(Action.ACCEPT, values))
    assert expected in {(v.path, v.reason) for v in caught.value.violations}
