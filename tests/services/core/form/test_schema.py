"""decode_requested_schema and check_form (MCP 2026-07-28 elicitation "Requested Schema"; RFC criterion 5)."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.core.form import (
    BooleanField,
    Form,
    FormError,
    FormErrorReason,
    MultiSelectField,
    NumberField,
    Option,
    Requester,
    SingleSelectField,
    StringField,
    StringFormat,
    check_form,
    decode_requested_schema,
)
from services.core.limits import DEFAULT_LIMITS, Limits
from tests.services.core.form.strategies import requested_schemas

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decode(schema: object, message: str = "Please answer", limits: Limits = DEFAULT_LIMITS) -> Form:
    return decode_requested_schema(schema, message=message, limits=limits)


def rejects(schema: object, message: str = "Please answer", limits: Limits = DEFAULT_LIMITS) -> FormError:
    with pytest.raises(FormError) as caught:
        decode(schema, message, limits)
    return caught.value


def codes(error: FormError) -> set[tuple[str, FormErrorReason]]:
    return {(violation.path, violation.reason) for violation in error.violations}


def obj(properties: dict[str, Any], **root: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **root}


# --- shapes real servers send


def test_sdk_style_schema_with_root_title_decodes_every_kind_in_property_order() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "UserInfo",
        "description": "Who you are",
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 40},
            "email": {"type": "string", "format": "email", "description": "Work address"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "ratio": {"type": "number", "minimum": 0.5, "maximum": 2.5},
            "subscribe": {"type": "boolean", "title": "Subscribe?"},
            "color": {"type": "string", "enum": ["red", "green"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1, "maxItems": 2},
        },
        "required": ["name", "tags"],
    }
    form = decode(schema)
    assert form.message == "Please answer"
    assert [f.name for f in form.fields] == ["name", "email", "age", "ratio", "subscribe", "color", "tags"]
    assert form.fields[0] == StringField(name="name", label="Name", required=True, min_length=1, max_length=40)
    assert form.fields[1] == StringField(
        name="email", label="email", description="Work address", format=StringFormat.EMAIL
    )
    assert form.fields[2] == NumberField(name="age", label="age", integer=True, minimum=0, maximum=150)
    assert form.fields[3] == NumberField(name="ratio", label="ratio", minimum=0.5, maximum=2.5)
    assert form.fields[4] == BooleanField(name="subscribe", label="Subscribe?")
    assert form.fields[5] == SingleSelectField(
        name="color", label="color", options=(Option("red", "red"), Option("green", "green"))
    )
    assert form.fields[6] == MultiSelectField(
        name="tags", label="tags", required=True, options=(Option("a", "a"), Option("b", "b")), min_items=1, max_items=2
    )


def test_root_additional_properties_false_is_tolerated_but_true_is_rejected() -> None:
    assert decode(obj({"a": {"type": "string"}}, additionalProperties=False)).fields[0].name == "a"
    error = rejects(obj({"a": {"type": "string"}}, additionalProperties=True))
    assert codes(error) == {("/additionalProperties", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD)}


def test_legacy_enum_names_with_matching_length_become_non_ascii_labels() -> None:
    form = decode(obj({"city": {"type": "string", "enum": ["mun", "koe"], "enumNames": ["München", "Köln 🏙"]}}))
    field = form.fields[0]
    assert isinstance(field, SingleSelectField)
    assert field.options == (Option("mun", "München"), Option("koe", "Köln 🏙"))


@pytest.mark.parametrize("enum_names", [["Only one"], ["A", "B", "C"], []])
def test_legacy_enum_names_with_mismatched_length_fall_back_to_raw_values(enum_names: list[str]) -> None:
    form = decode(obj({"pick": {"type": "string", "enum": ["x", "y"], "enumNames": enum_names}}))
    field = form.fields[0]
    assert isinstance(field, SingleSelectField)
    assert field.options == (Option("x", "x"), Option("y", "y"))


@pytest.mark.parametrize("typed", [True, False], ids=["with-type", "without-type"])
def test_titled_one_of_decodes_to_labelled_options_with_or_without_type(typed: bool) -> None:
    prop: dict[str, Any] = {"oneOf": [{"const": "p1", "title": "Première"}, {"const": "p2", "title": "Second"}]}
    if typed:
        prop["type"] = "string"
    field = decode(obj({"plan": prop}, required=["plan"])).fields[0]
    assert field == SingleSelectField(
        name="plan", label="plan", required=True, options=(Option("p1", "Première"), Option("p2", "Second"))
    )


def test_both_multi_select_shapes_decode_to_the_same_kind() -> None:
    untitled = decode(obj({"m": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}})).fields[0]
    titled = decode(
        obj(
            {
                "m": {
                    "type": "array",
                    "items": {"anyOf": [{"const": "a", "title": "Ay"}, {"const": "b", "title": "Bee"}]},
                }
            }
        )
    ).fields[0]
    assert untitled == MultiSelectField(name="m", label="m", options=(Option("a", "a"), Option("b", "b")))
    assert titled == MultiSelectField(name="m", label="m", options=(Option("a", "Ay"), Option("b", "Bee")))


def test_empty_properties_is_a_valid_form_with_zero_fields() -> None:
    assert decode(obj({})).fields == ()


def test_every_kind_optional_with_falsy_defaults_keeps_each_default_in_its_type() -> None:
    form = decode(
        obj(
            {
                "s": {"type": "string", "default": ""},
                "i": {"type": "integer", "default": 0},
                "i2": {"type": "integer", "default": 3.0},
                "n": {"type": "number", "default": 0.0},
                "b": {"type": "boolean", "default": False},
                "one": {"type": "string", "enum": ["x", "y"], "default": "y"},
                "many": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "default": []},
            }
        )
    )
    defaults = {field.name: field.default for field in form.fields}
    assert defaults == {"s": "", "i": 0, "i2": 3, "n": 0.0, "b": False, "one": "y", "many": ()}
    assert type(defaults["i2"]) is int
    assert type(defaults["b"]) is bool
    assert all(not field.required for field in form.fields)


def test_request_state_never_appears_because_decode_reads_only_message_and_schema() -> None:
    form = decode(obj({"a": {"type": "string"}}), message="hi")
    assert set(dataclasses.asdict(form)) == {"message", "fields", "requester"}


def test_requester_provenance_is_carried_through() -> None:
    requester = Requester("prov-1", "Deploy provider", "deploy-server", "deploy")
    form = decode_requested_schema(obj({}), message="m", requester=requester)
    assert form.requester == requester


# --- rejected structures


def test_enum_behind_ref_is_rejected_naming_ref_and_defs() -> None:
    schema = {
        "$defs": {"Color": {"enum": ["red", "green"], "title": "Color", "type": "string"}},
        "properties": {"color": {"$ref": "#/$defs/Color"}},
        "required": ["color"],
        "title": "Model",
        "type": "object",
    }
    error = rejects(schema)
    assert codes(error) == {
        ("/$defs", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        ("/properties/color/$ref", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
    }


@pytest.mark.parametrize(
    ("prop", "path", "reason"),
    [
        ({"type": "object", "properties": {"x": {"type": "string"}}}, "/type", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
        ({"type": ["string", "null"]}, "/type", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
        ({"type": "null"}, "/type", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
        (
            {"type": "array", "items": {"type": "number", "enum": [1]}},
            "/items/type",
            FormErrorReason.SCHEMA_UNSUPPORTED_TYPE,
        ),
        ({"type": "array", "items": {"type": "string"}}, "/items", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
        ({"type": "array", "items": {"type": "object"}}, "/items/type", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
        ({"type": "array"}, "/items", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
        ({"type": "array", "items": [{"type": "string"}]}, "/items", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
        ({"type": "string", "pattern": "^a$"}, "/pattern", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        (
            {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "/anyOf",
            FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD,
        ),
        ({"allOf": [{"type": "string"}]}, "/allOf", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        ({"type": "string", "enum": ["a"], "minLength": 1}, "/minLength", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        ({"type": "string", "enumNames": ["A"]}, "/enumNames", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        ({"type": "string", "const": "a"}, "/const", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        ({"type": "number", "exclusiveMinimum": 0}, "/exclusiveMinimum", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        (
            {"type": "array", "items": {"type": "string", "enum": ["a"]}, "uniqueItems": True},
            "/uniqueItems",
            FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD,
        ),
        (
            {"type": "array", "items": {"type": "string", "enum": ["a"], "minLength": 1}},
            "/items/minLength",
            FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD,
        ),
        (
            {"oneOf": [{"const": "a", "title": "A", "description": "d"}]},
            "/oneOf/0/description",
            FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD,
        ),
        ({"title": "only a title"}, "/type", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
        ({"type": "str"}, "/type", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "format": "password"}, "/format", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "format": 5}, "/format", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "minLength": -1}, "/minLength", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "minLength": True}, "/minLength", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "maxLength": 1.5}, "/maxLength", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "maxLength": 2**32}, "/maxLength", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "minLength": 5, "maxLength": 4}, "/minLength", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "number", "minimum": 2, "maximum": 1}, "/minimum", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "number", "minimum": "0"}, "/minimum", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "number", "maximum": False}, "/maximum", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "title": 7}, "/title", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "description": ["x"]}, "/description", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "enum": []}, "/enum", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "enum": ["a", 1]}, "/enum", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "enum": "a"}, "/enum", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"type": "string", "enum": ["a"], "enumNames": "A"}, "/enumNames", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"oneOf": [{"const": "a"}]}, "/oneOf/0", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"oneOf": [{"const": 1, "title": "One"}]}, "/oneOf/0", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"oneOf": ["a"]}, "/oneOf/0", FormErrorReason.SCHEMA_INVALID_VALUE),
        ({"oneOf": {"const": "a"}}, "/oneOf", FormErrorReason.SCHEMA_INVALID_VALUE),
        (
            {"type": "array", "items": {"type": "string", "enum": ["a"]}, "minItems": 2},
            "/minItems",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
        (
            {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 2, "maxItems": 1},
            "/minItems",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
        ("string", "", FormErrorReason.SCHEMA_INVALID_VALUE),
        (True, "", FormErrorReason.SCHEMA_INVALID_VALUE),
    ],
)
def test_structures_outside_the_flat_primitive_subset_are_rejected_with_code_and_path(
    prop: object, path: str, reason: FormErrorReason
) -> None:
    error = rejects(obj({"field": prop}))
    assert ("/properties/field" + path, reason) in codes(error)


@pytest.mark.parametrize(
    ("schema", "path", "reason"),
    [
        ([], "$", FormErrorReason.SCHEMA_NOT_OBJECT),
        ("object", "$", FormErrorReason.SCHEMA_NOT_OBJECT),
        (None, "$", FormErrorReason.SCHEMA_NOT_OBJECT),
        ({"type": "array", "properties": {}}, "/type", FormErrorReason.SCHEMA_NOT_OBJECT),
        ({"properties": {}}, "/type", FormErrorReason.SCHEMA_NOT_OBJECT),
        ({"type": "object"}, "/properties", FormErrorReason.SCHEMA_NOT_OBJECT),
        ({"type": "object", "properties": []}, "/properties", FormErrorReason.SCHEMA_NOT_OBJECT),
        (
            {"type": "object", "properties": {}, "required": ["ghost"]},
            "/required/0",
            FormErrorReason.SCHEMA_UNKNOWN_REQUIRED,
        ),
        ({"type": "object", "properties": {}, "required": "ghost"}, "/required", FormErrorReason.SCHEMA_INVALID_VALUE),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "a"]},
            "/required/1",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
        ({"type": "object", "properties": {}, "$defs": {}}, "/$defs", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        ({"type": "object", "properties": {}, "allOf": []}, "/allOf", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        ({"type": "object", "properties": {}, "title": 3}, "/title", FormErrorReason.SCHEMA_INVALID_VALUE),
        (
            {"type": "object", "properties": {"": {"type": "string"}}},
            "/properties/",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
    ],
)
def test_bad_roots_are_rejected_with_code_and_path(schema: object, path: str, reason: FormErrorReason) -> None:
    assert (path, reason) in codes(rejects(schema))


@pytest.mark.parametrize(
    ("prop", "path"),
    [
        ({"type": "string", "enum": ["a", "b", "a"]}, "/enum/2"),
        ({"type": "string", "enum": ["a", "a"], "enumNames": ["A", "B"]}, "/enum/1"),
        ({"oneOf": [{"const": "a", "title": "A"}, {"const": "a", "title": "Again"}]}, "/oneOf/1"),
        ({"type": "array", "items": {"type": "string", "enum": ["x", "x"]}}, "/items/enum/1"),
        (
            {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}, {"const": "x", "title": "Y"}]}},
            "/items/anyOf/1",
        ),
    ],
)
def test_duplicate_option_values_are_rejected_at_the_second_occurrence(prop: dict[str, Any], path: str) -> None:
    assert codes(rejects(obj({"f": prop}))) == {("/properties/f" + path, FormErrorReason.SCHEMA_DUPLICATE_OPTION)}


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "default": 1},
        {"type": "string", "default": None},
        {"type": "string", "minLength": 3, "default": "ab"},
        {"type": "string", "format": "date", "default": "2024-02-30"},
        {"type": "integer", "default": 1.5},
        {"type": "integer", "default": True},
        {"type": "integer", "minimum": 0, "default": -1},
        {"type": "number", "default": "1"},
        {"type": "number", "maximum": 1, "default": 1.01},
        {"type": "boolean", "default": "false"},
        {"type": "boolean", "default": 0},
        {"type": "string", "enum": ["a"], "default": "b"},
        {"oneOf": [{"const": "a", "title": "A"}], "default": "A"},
        {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": "a"},
        {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": ["a", "a"]},
        {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": ["c"]},
        {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1, "default": []},
        {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 1, "default": ["a", "b"]},
    ],
)
def test_a_default_that_does_not_fit_its_own_field_is_dropped_and_the_form_still_decodes(prop: dict[str, Any]) -> None:
    [field] = decode_requested_schema(obj({"f": prop}), message="m").fields
    assert field.default is None
    assert check_form(decode_requested_schema(obj({"f": prop}), message="m")).fields == (field,)


def test_every_violation_is_listed_not_just_the_first() -> None:
    schema = obj(
        {
            "a": {"type": "object"},
            "b": {"type": "string", "pattern": "x", "format": "hostname"},
            "c": {"type": "string", "enum": ["x", "x"]},
            "ok": {"type": "string"},
        },
        required=["nope"],
        **{"$ref": "#/x"},
    )
    assert codes(rejects(schema)) == {
        ("/$ref", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        ("/required/0", FormErrorReason.SCHEMA_UNKNOWN_REQUIRED),
        ("/properties/a/type", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
        ("/properties/b/pattern", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
        ("/properties/c/enum/1", FormErrorReason.SCHEMA_DUPLICATE_OPTION),
    }


def test_property_names_are_escaped_as_json_pointers_in_paths() -> None:
    error = rejects(obj({"a/b~c": {"type": "object"}}))
    assert codes(error) == {("/properties/a~1b~0c/type", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE)}


class _Weird:
    pass


def _deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(levels):
        node = {"x": node}
    return node


def _circular() -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object"}
    node["properties"] = {"self": node}
    return node


@pytest.mark.parametrize(
    "schema",
    [
        1,
        1.5,
        b"{}",
        {1: 2},
        {"type": "object", "properties": {1: {"type": "string"}}},
        {"type": "object", "properties": {"a": {1: "string"}}},
        {"type": "object", "properties": {"a": {"type": "number", "minimum": float("nan")}}},
        {"type": "object", "properties": {"a": {"type": "number", "minimum": float("inf")}}},
        {"type": "object", "properties": {"a": {"type": "string", "title": "\ud800"}}},
        {"type": "object", "properties": {"a": {"type": "string", "default": _Weird()}}},
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": {"a"}},
        {"type": "object", "properties": {"a": {"type": "integer", "maximum": 10**400}}},
        {"type": "object", "properties": _deep(100_000)},
        _circular(),
    ],
    ids=lambda value: type(value).__name__,
)
def test_weird_input_raises_form_error_and_nothing_else(schema: object) -> None:
    rejects(schema)


def test_a_message_that_is_not_a_string_is_rejected() -> None:
    with pytest.raises(FormError) as caught:
        decode_requested_schema(obj({}), message=5)  # type: ignore[arg-type]
    assert codes(caught.value) == {("/message", FormErrorReason.SCHEMA_INVALID_VALUE)}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
_schema_keys = st.sampled_from(
    ["type", "properties", "required", "enum", "oneOf", "items", "default", "minLength", "minimum", "title", "$ref"]
)
_schema_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.sampled_from(["object", "string", "array", "integer"]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(_schema_keys | st.text(max_size=4), children, max_size=5)
    ),
    max_leaves=25,
)


@PROPERTY
@given(schema=st.one_of(_json, _schema_like, _schema_like.map(lambda p: {"type": "object", "properties": {"p": p}})))
def test_arbitrary_json_either_decodes_or_raises_form_error(schema: object) -> None:
    form: Form | None = None
    try:
        form = decode(schema)
    except FormError as error:
        violations = error.violations
    else:
        violations = ()
    assert (form is None) == bool(violations)
    if form is not None:
        assert check_form(form) == form


# --- caps: exactly at accepted, one past rejected


def _request_bytes(schema: dict[str, Any], message: str) -> int:
    return len(json.dumps({"message": message, "requestedSchema": schema}, ensure_ascii=False).encode("utf-8"))


def _schema_of_exact_bytes(target: int, message: str) -> dict[str, Any]:
    """Fields whose multi-byte descriptions make the request exactly ``target`` UTF-8 bytes."""
    properties: dict[str, Any] = {}
    schema = obj(properties)
    index = 0
    while _request_bytes(schema, message) < target:
        name = f"f{index}"
        properties[name] = {"type": "string", "description": ""}
        room = target - _request_bytes(schema, message)
        if room < 0:
            del properties[name]
            break
        emoji = min(room // 4, DEFAULT_LIMITS.max_description_chars - 3)
        properties[name]["description"] = "💬" * emoji + "a" * min(3, room - 4 * emoji)
        index += 1
    # Trim or pad the last description with ASCII to hit the target exactly.
    last = properties[f"f{index - 1}"]
    while _request_bytes(schema, message) > target:
        last["description"] = last["description"][:-1]
    while _request_bytes(schema, message) < target:
        last["description"] = "a" + last["description"]
    assert _request_bytes(schema, message) == target
    return schema


def test_request_exactly_at_the_default_byte_cap_is_accepted_and_one_byte_past_is_rejected() -> None:
    cap = DEFAULT_LIMITS.max_request_bytes
    at_cap = _schema_of_exact_bytes(cap, "Fill in ✍")
    assert len(decode(at_cap, "Fill in ✍").fields) <= DEFAULT_LIMITS.max_fields
    past = copy.deepcopy(at_cap)
    past["properties"]["f0"]["description"] = past["properties"]["f0"]["description"][:-1] + "é"  # +1 byte
    error = rejects(past, "Fill in ✍")
    assert codes(error) == {("$", FormErrorReason.LIMIT_EXCEEDED)}


def test_byte_cap_is_checked_first_before_any_structure() -> None:
    huge = {"$ref": "x" * 200, "type": "array"}
    size = _request_bytes(huge, "")
    assert codes(rejects(huge, "", Limits(max_request_bytes=size - 1))) == {("$", FormErrorReason.LIMIT_EXCEEDED)}


def test_a_legacy_schema_whose_canonical_form_outgrows_the_byte_cap_is_rejected_at_decode() -> None:
    schema = obj({"p": {"type": "string", "enum": ["a", "b", "c"], "enumNames": ["A", "B", "C"]}})
    limits = Limits(max_request_bytes=_request_bytes(schema, "m"))
    assert codes(rejects(schema, "m", limits)) == {("$", FormErrorReason.LIMIT_EXCEEDED)}


@pytest.mark.parametrize("extra", [0, 1])
def test_field_count_cap(extra: int) -> None:
    count = DEFAULT_LIMITS.max_fields + extra
    schema = obj({f"f{i}": {"type": "boolean"} for i in range(count)})
    if extra == 0:
        assert len(decode(schema).fields) == count
    else:
        assert codes(rejects(schema)) == {("/properties", FormErrorReason.LIMIT_EXCEEDED)}


@pytest.mark.parametrize("shape", ["enum", "oneOf", "items.enum", "items.anyOf"])
@pytest.mark.parametrize("extra", [0, 1])
def test_option_count_cap_for_every_select_shape(shape: str, extra: int) -> None:
    values = [f"v{i}" for i in range(DEFAULT_LIMITS.max_options + extra)]
    titled = [{"const": v, "title": v.upper()} for v in values]
    shapes: dict[str, dict[str, Any]] = {
        "enum": {"type": "string", "enum": values},
        "oneOf": {"type": "string", "oneOf": titled},
        "items.enum": {"type": "array", "items": {"type": "string", "enum": values}},
        "items.anyOf": {"type": "array", "items": {"anyOf": titled}},
    }
    prop = shapes[shape]
    if extra == 0:
        field = decode(obj({"s": prop})).fields[0]
        assert isinstance(field, SingleSelectField | MultiSelectField)
        assert len(field.options) == DEFAULT_LIMITS.max_options
    else:
        path = "/properties/s/" + shape.replace(".", "/")
        assert codes(rejects(obj({"s": prop}))) == {(path, FormErrorReason.LIMIT_EXCEEDED)}


def _text_of(chars: int) -> str:
    """``chars`` code points, several UTF-8 bytes each, so caps are seen to count code points."""
    return ("é🎉" * chars)[:chars]


@pytest.mark.parametrize(
    ("build", "cap", "path"),
    [
        (
            lambda n: (obj({"a": {"type": "string", "title": _text_of(n)}}), "m"),
            DEFAULT_LIMITS.max_label_chars,
            "/properties/a/title",
        ),
        (
            lambda n: (obj({"a": {"type": "string", "description": _text_of(n)}}), "m"),
            DEFAULT_LIMITS.max_description_chars,
            "/properties/a/description",
        ),
        (
            lambda n: (obj({_text_of(n): {"type": "string"}}), "m"),
            DEFAULT_LIMITS.max_label_chars,
            "/properties/" + _text_of(201),
        ),
        (lambda n: (obj({}), _text_of(n)), DEFAULT_LIMITS.max_message_chars, "/message"),
        (
            lambda n: (obj({"a": {"oneOf": [{"const": "v", "title": _text_of(n)}]}}), "m"),
            DEFAULT_LIMITS.max_label_chars,
            "/properties/a/oneOf/0",
        ),
        (
            lambda n: (obj({"a": {"type": "string", "enum": ["v"], "enumNames": [_text_of(n)]}}), "m"),
            DEFAULT_LIMITS.max_label_chars,
            "/properties/a/enum/0",
        ),
        (
            lambda n: (obj({"a": {"type": "string", "enum": [_text_of(n)]}}), "m"),
            DEFAULT_LIMITS.max_option_value_chars,
            "/properties/a/enum/0",
        ),
        (
            lambda n: (obj({"a": {"type": "string", "minLength": n}}), "m"),
            DEFAULT_LIMITS.max_string_value_chars,
            "/properties/a/minLength",
        ),
    ],
    ids=["title", "description", "property-name", "message", "oneOf-title", "enumNames", "option-value", "minLength"],
)
def test_text_caps_count_code_points_exactly_at_accepted_one_past_rejected(build: Any, cap: int, path: str) -> None:
    schema, message = build(cap)
    decode(schema, message)
    schema, message = build(cap + 1)
    assert codes(rejects(schema, message)) == {(path, FormErrorReason.LIMIT_EXCEEDED)}


def test_requester_text_over_the_label_cap_is_rejected() -> None:
    requester = Requester(claimed_server="s" * (DEFAULT_LIMITS.max_label_chars + 1))
    with pytest.raises(FormError) as caught:
        decode_requested_schema(obj({}), message="m", requester=requester)
    assert codes(caught.value) == {("/requester/claimed_server", FormErrorReason.LIMIT_EXCEEDED)}


# --- check_form


def _form(*fields: Any, message: str = "m") -> Form:
    return Form(message=message, fields=tuple(fields))


def test_check_form_returns_a_valid_form_unchanged() -> None:
    form = decode(obj({"a": {"type": "string", "enum": ["x"], "default": "x"}, "b": {"type": "integer"}}))
    assert check_form(form) is form


@pytest.mark.parametrize(
    ("form", "path", "reason"),
    [
        (_form(StringField(name="", label="x")), "/properties/", FormErrorReason.SCHEMA_INVALID_VALUE),
        (
            _form(BooleanField(name="a", label="a"), StringField(name="a", label="b")),
            "/properties/a",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
        (
            _form(SingleSelectField(name="s", label="s", options=(Option("x", "x"), Option("x", "y")))),
            "/properties/s/oneOf/1",
            FormErrorReason.SCHEMA_DUPLICATE_OPTION,
        ),
        (
            _form(SingleSelectField(name="s", label="s", options=())),
            "/properties/s/enum",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
        (
            _form(SingleSelectField(name="s", label="s", options=(Option("x", "x"),), default="y")),
            "/properties/s/default",
            FormErrorReason.SCHEMA_INVALID_DEFAULT,
        ),
        (
            _form(NumberField(name="n", label="n", integer=True, default=1.5)),
            "/properties/n/default",
            FormErrorReason.SCHEMA_INVALID_DEFAULT,
        ),
        (
            _form(NumberField(name="n", label="n", minimum=float("nan"))),
            "/properties/n/minimum",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
        (
            _form(NumberField(name="n", label="n", minimum=2, maximum=1)),
            "/properties/n/minimum",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
        (
            _form(StringField(name="t", label="t", min_length=3, max_length=2)),
            "/properties/t/minLength",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
        (
            _form(StringField(name="t", label="t", max_length=2**32)),
            "/properties/t/maxLength",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
        (_form(StringField(name="t", label="t" * 201)), "/properties/t/title", FormErrorReason.LIMIT_EXCEEDED),
        (
            _form(MultiSelectField(name="m", label="m", options=(Option("a", "a"),), min_items=2)),
            "/properties/m/minItems",
            FormErrorReason.SCHEMA_INVALID_VALUE,
        ),
        (_form(message="x" * 4001), "/message", FormErrorReason.LIMIT_EXCEEDED),
        (
            _form(*[BooleanField(name=f"b{i}", label="b") for i in range(33)]),
            "/properties",
            FormErrorReason.LIMIT_EXCEEDED,
        ),
        (
            Form(message="m", fields=(), requester=Requester(claimed_tool="t" * 201)),
            "/requester/claimed_tool",
            FormErrorReason.LIMIT_EXCEEDED,
        ),
    ],
)
def test_check_form_rejects_what_decode_would_reject(form: Form, path: str, reason: FormErrorReason) -> None:
    with pytest.raises(FormError) as caught:
        check_form(form)
    assert (path, reason) in codes(caught.value)


def test_check_form_enforces_the_byte_cap_on_the_canonical_schema() -> None:
    form = decode(obj({"a": {"type": "string", "description": "d" * 100}}))
    from services.core.form import form_to_requested_schema

    size = _request_bytes(form_to_requested_schema(form), form.message)
    assert check_form(form, limits=Limits(max_request_bytes=size)) is form
    with pytest.raises(FormError) as caught:
        check_form(form, limits=Limits(max_request_bytes=size - 1))
    assert codes(caught.value) == {("$", FormErrorReason.LIMIT_EXCEEDED)}


def test_check_form_turns_a_malformed_form_into_form_error() -> None:
    broken = Form(message="m", fields=(StringField(name="a", label=None),))  # type: ignore[arg-type]
    with pytest.raises(FormError):
        check_form(broken)


@PROPERTY
@given(schema=requested_schemas())
def test_every_schema_from_the_allowed_subset_decodes_and_passes_check_form(schema: dict[str, Any]) -> None:
    original = copy.deepcopy(schema)
    form = decode(schema)
    assert schema == original  # the server's schema is read, never changed (the provider keeps it)
    assert [field.name for field in form.fields] == list(schema["properties"])
    assert {field.name for field in form.fields if field.required} == set(schema.get("required", []))
    assert check_form(form) is form


_MUTATIONS: list[tuple[str, FormErrorReason]] = [
    ("pattern", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
    ("ref", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD),
    ("nested-object", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
    ("union", FormErrorReason.SCHEMA_UNSUPPORTED_TYPE),
    ("duplicate-option", FormErrorReason.SCHEMA_DUPLICATE_OPTION),
]


def _mutate(prop: dict[str, Any], mutation: str) -> tuple[dict[str, Any], str] | None:
    """A mutated copy of ``prop`` and the expected path suffix, or ``None`` when it does not apply."""
    prop = copy.deepcopy(prop)
    if mutation == "pattern":
        prop["pattern"] = ".*"
        return prop, "/pattern"
    if mutation == "ref":
        prop["$ref"] = "#/$defs/X"
        return prop, "/$ref"
    if mutation == "nested-object":
        prop["type"] = "object"
        return prop, "/type"
    if mutation == "union":
        prop["type"] = [prop.get("type", "string"), "null"]
        return prop, "/type"
    options = (
        prop.get("enum") or prop.get("oneOf") or prop.get("items", {}).get("enum") or prop.get("items", {}).get("anyOf")
    )
    if options is None:
        return None
    options.append(copy.deepcopy(options[0]))
    key = (
        next(k for k in ("enum", "oneOf") if k in prop)
        if "items" not in prop
        else "items/" + next(k for k in ("enum", "anyOf") if k in prop["items"])
    )
    return prop, f"/{key}/{len(options) - 1}"


@PROPERTY
@given(schema=requested_schemas(), mutation=st.sampled_from(_MUTATIONS), data=st.data())
def test_mutated_schemas_are_rejected_with_the_right_code_and_path(
    schema: dict[str, Any], mutation: tuple[str, FormErrorReason], data: st.DataObject
) -> None:
    kind, reason = mutation
    if not schema["properties"]:
        schema["properties"]["only"] = {"type": "string", "enum": ["a"]}
    name = data.draw(st.sampled_from(list(schema["properties"])))
    mutated = _mutate(schema["properties"][name], kind)
    if mutated is None:
        return
    prop, suffix = mutated
    schema["properties"][name] = prop
    error = rejects(schema)
    from services.core.form.errors import pointer

    assert (pointer("properties", name) + suffix, reason) in codes(error)


@PROPERTY
@given(schema=requested_schemas(), data=st.data())
def test_a_default_that_is_not_a_value_of_its_field_is_dropped_and_the_rest_is_kept(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    if not schema["properties"]:
        return
    name = data.draw(st.sampled_from(list(schema["properties"])))
    expected = decode_requested_schema(copy.deepcopy(schema), message="m")
    schema["properties"][name]["default"] = {"not": "a primitive"}
    form = decode_requested_schema(schema, message="m")
    assert [f.name for f in form.fields] == [f.name for f in expected.fields]
    [field] = [f for f in form.fields if f.name == name]
    assert field.default is None
    assert check_form(form) is form


@PROPERTY
@given(schema=requested_schemas(), ghost=st.text(min_size=1, max_size=5))
def test_a_required_name_that_is_not_a_property_is_rejected(schema: dict[str, Any], ghost: str) -> None:
    if ghost in schema["properties"]:
        return
    schema["required"] = [*schema.get("required", []), ghost]
    assert (f"/required/{len(schema['required']) - 1}", FormErrorReason.SCHEMA_UNKNOWN_REQUIRED) in codes(
        rejects(schema)
    )


# --- reasonable schemas do not fail the whole call, and an unsupported dialect is an error
# (docs/acceptance.md#protocol-and-form-correctness)


def test_integer_bounds_beyond_2_pow_53_are_accepted_as_the_nearest_double() -> None:
    schema = obj({"n": {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}})
    [field] = decode_requested_schema(schema, message="m").fields
    assert isinstance(field, NumberField)
    assert field.minimum == -(2.0**63)
    assert field.maximum == 2.0**63
    assert check_form(decode_requested_schema(schema, message="m"))


def test_harmless_root_annotations_are_accepted_and_ignored() -> None:
    schema = obj(
        {"s": {"type": "string"}},
        **{"$id": "https://example.com/forms/deploy", "$comment": "v2", "examples": [{"s": "x"}]},
    )
    assert [f.name for f in decode_requested_schema(schema, message="m").fields] == ["s"]


@pytest.mark.parametrize(
    "dialect",
    [
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema#",
    ],
)
def test_a_supported_schema_dialect_is_accepted(dialect: str) -> None:
    assert decode_requested_schema(obj({"s": {"type": "string"}}, **{"$schema": dialect}), message="m").fields


@pytest.mark.parametrize(
    "dialect",
    ["http://json-schema.org/draft-04/schema#", "https://example.com/my-dialect", "", "2020-12"],
)
def test_an_unsupported_schema_dialect_is_an_error_not_validated_as_2020_12(dialect: str) -> None:
    schema = obj({"s": {"type": "string"}}, **{"$schema": dialect})
    assert codes(rejects(schema)) == {("/$schema", FormErrorReason.SCHEMA_UNSUPPORTED_KEYWORD)}


def test_a_time_zone_list_of_a_thousand_options_decodes() -> None:
    zones = [f"Area/City_{i:04d}" for i in range(1000)]
    form = decode_requested_schema(
        {"type": "object", "properties": {"tz": {"type": "string", "enum": zones}}, "required": ["tz"]},
        message="Which time zone?",
    )

    assert len(form.fields[0].options) == 1000  # type: ignore[union-attr]
