"""Property-based fuzzing (hypothesis) of the form contract's untrusted-input decoders: the MCP
``requestedSchema`` decoder and the answer validator.

Whatever arrives, the only failure is :class:`services.core.form.FormError` with reasons from the
closed :class:`FormErrorReason` set, and anything accepted respects the repository caps
(``services/core/limits.py``). Small example counts keep CI fast. Sources: docs/design.md#untrusted-form-copy
("exact-shape decoding, flat primitive schemas only, repository caps"), RFC criterion 5.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.core.form import (
    Action,
    Answer,
    FormError,
    FormErrorReason,
    check_form,
    decode_requested_schema,
    validate_answer,
)
from services.core.limits import DEFAULT_LIMITS, Limits

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TIGHT = Limits(max_fields=4, max_options=4, max_message_chars=50, max_label_chars=20, max_request_bytes=2048)
"""Small caps so random input actually reaches them."""

KEYWORDS = [
    "type", "title", "description", "default", "enum", "enumNames", "oneOf", "anyOf", "const", "items",
    "minLength", "maxLength", "format", "minimum", "maximum", "minItems", "maxItems", "properties", "required",
    "$ref", "pattern", "additionalProperties",
]  # fmt: skip
TYPES = ["string", "number", "integer", "boolean", "array", "object", "null", "str"]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(TYPES),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.sampled_from(KEYWORDS) | st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)
property_schemas = st.dictionaries(st.sampled_from(KEYWORDS), json_values, max_size=6) | st.fixed_dictionaries(
    {"type": st.sampled_from(TYPES)},
    optional={
        "enum": st.lists(st.text(max_size=30), max_size=8),
        "minLength": json_scalars,
        "maxLength": json_scalars,
        "minimum": json_scalars,
        "maximum": json_scalars,
        "default": json_values,
        "title": st.text(max_size=40),
        "format": st.sampled_from(["email", "uri", "date", "date-time", "regex"]),
        "items": json_values,
    },
)
schemas = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.just("object"), "properties": st.dictionaries(st.text(max_size=12), property_schemas, max_size=7)},
        optional={"required": st.lists(st.text(max_size=12), max_size=4) | json_values},
    ),
)
CLOSED_REASONS = frozenset(FormErrorReason)
T = TypeVar("T")


def _outcome(make: Callable[[], T]) -> T | FormError:
    """``make()``'s value, or the :class:`FormError` it raised (any other exception propagates: a bug)."""
    try:
        return make()
    except FormError as error:
        return error


@FUZZ
@given(schema=schemas, message=st.text(max_size=80))
def test_the_schema_decoder_returns_a_capped_form_or_a_form_error_for_any_input(schema: object, message: str) -> None:
    form = _outcome(lambda: decode_requested_schema(schema, message=message, limits=TIGHT))
    if isinstance(form, FormError):
        assert {v.reason for v in form.violations} <= CLOSED_REASONS
        return
    assert len(form.fields) <= TIGHT.max_fields
    assert len(form.message) <= TIGHT.max_message_chars
    assert len({f.name for f in form.fields}) == len(form.fields)
    for field in form.fields:
        assert len(field.label) <= TIGHT.max_label_chars
        assert len(getattr(field, "options", ())) <= TIGHT.max_options
    assert check_form(form, limits=TIGHT) == form  # what we publish passes the host-side safety net


@FUZZ
@given(size=st.integers(min_value=1, max_value=5), blow=st.sampled_from(["fields", "options", "message", "bytes"]))
def test_oversized_schemas_are_rejected_with_limit_exceeded(size: int, blow: str) -> None:
    properties: dict[str, Any] = {f"f{i}": {"type": "string"} for i in range(2)}
    message = "m"
    if blow == "fields":
        properties = {f"f{i}": {"type": "boolean"} for i in range(TIGHT.max_fields + size)}
    elif blow == "options":
        properties = {"pick": {"type": "string", "enum": [f"o{i}" for i in range(TIGHT.max_options + size)]}}
    elif blow == "message":
        message = "x" * (TIGHT.max_message_chars + size)
    else:
        properties = {"f": {"type": "string", "description": "d" * (TIGHT.max_request_bytes * size)}}
    with pytest.raises(FormError) as caught:
        decode_requested_schema({"type": "object", "properties": properties}, message=message, limits=TIGHT)
    assert FormErrorReason.LIMIT_EXCEEDED in {v.reason for v in caught.value.violations}


FORM = decode_requested_schema(
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 20},
            "email": {"type": "string", "format": "email"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1},
            "ok": {"type": "boolean", "default": False},
            "color": {"type": "string", "enum": ["red", "green", "blue"]},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 2},
        },
        "required": ["name", "age"],
    },
    message="Tell me",
)
answer_values = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.lists(st.text(max_size=5), max_size=4).map(tuple),
    st.none(),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
answers = st.builds(
    Answer,
    action=st.sampled_from(list(Action)),
    values=st.dictionaries(
        st.sampled_from([f.name for f in FORM.fields]) | st.text(max_size=10), answer_values, max_size=9
    ),
)


@FUZZ
@given(answer=answers)
def test_the_answer_validator_accepts_only_conforming_values_and_otherwise_raises_a_form_error(answer: Answer) -> None:
    canonical = _outcome(lambda: validate_answer(FORM, answer))
    if isinstance(canonical, FormError):
        assert {v.reason for v in canonical.violations} <= CLOSED_REASONS
        assert all(str(value) not in str(canonical) for value in answer.values.values() if len(str(value)) > 6)
        return
    if canonical.action is not Action.ACCEPT:
        assert canonical.values == {}
        return
    names = [f.name for f in FORM.fields]
    assert set(canonical.values) <= set(names)
    assert {"name", "age"} <= set(canonical.values)
    assert 1 <= len(str(canonical.values["name"])) <= 20
    age = canonical.values["age"]
    assert isinstance(age, int)
    assert not isinstance(age, bool)
    assert 0 <= age <= 150
    if "tags" in canonical.values:
        tags = canonical.values["tags"]
        assert isinstance(tags, tuple)
        assert len(tags) <= 2
        assert set(tags) <= {"a", "b", "c"}
    assert len(json.dumps(dict(canonical.values)).encode()) <= DEFAULT_LIMITS.max_answer_bytes


@FUZZ
@given(extra=st.integers(min_value=1, max_value=1000))
def test_an_oversized_answer_is_rejected_before_anything_else(extra: int) -> None:
    huge = "n" * (DEFAULT_LIMITS.max_answer_bytes + extra)
    with pytest.raises(FormError) as caught:
        validate_answer(FORM, Answer(Action.ACCEPT, {"name": huge, "age": 1}))
    assert caught.value.reason in (FormErrorReason.LIMIT_EXCEEDED, FormErrorReason.ANSWER_CONSTRAINT)
    assert huge not in str(caught.value)
