"""Hypothesis strategies for the MCP 2026-07-28 form subset (``client/elicitation.mdx`` "Requested Schema").

``requested_schemas()`` draws ``requestedSchema`` JSON objects from the allowed flat primitive subset, in every
shape real servers send (plain/format strings, number/integer bounds, booleans, ``enum``, titled ``oneOf`` with and
without ``type``, legacy ``enum`` + ``enumNames`` with matching and mismatched lengths, ``items.enum`` and
``items.anyOf`` multi-selects), each with an optional ``default`` that satisfies its own field.
``values_for(field)`` draws a value that satisfies a decoded field.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from hypothesis import strategies as st

from services.core.form import (
    BooleanField,
    Field,
    FormValue,
    MultiSelectField,
    NumberField,
    SingleSelectField,
    StringField,
    StringFormat,
)

MAX_SAFE = 2**53

TEXT_CHARS = st.characters(exclude_categories=["Cs"])
"""Any Unicode scalar value (no unpaired surrogates): names, labels and values are untrusted Unicode."""

names = st.text(TEXT_CHARS, min_size=1, max_size=12)
labels = st.text(TEXT_CHARS, max_size=24)
option_values = st.text(TEXT_CHARS, max_size=12)

_EMAILS = st.sampled_from(["a@example.com", "first.last@sub.example.org", "ü@bücher.de", "x+tag@example.net"])
_URIS = st.sampled_from(["https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:a@example.com", "ftp://h/p"])
_DATES = st.dates(min_value=dt.date(1, 1, 1)).map(lambda d: d.isoformat())
_DATE_TIMES = st.datetimes(
    min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=st.just(dt.UTC)
).map(lambda d: d.isoformat())
FORMAT_VALUES: dict[StringFormat, st.SearchStrategy[str]] = {
    StringFormat.EMAIL: _EMAILS,
    StringFormat.URI: _URIS,
    StringFormat.DATE: _DATES,
    StringFormat.DATE_TIME: _DATE_TIMES,
}


def string_values(min_length: int | None, max_length: int | None, fmt: StringFormat | None) -> st.SearchStrategy[str]:
    """Strings satisfying the constraints (formats are drawn without length constraints)."""
    if fmt is not None:
        return FORMAT_VALUES[fmt]
    return st.text(TEXT_CHARS, min_size=min_length or 0, max_size=max_length if max_length is not None else 30)


def number_values(
    minimum: int | float | None, maximum: int | float | None, *, integer: bool
) -> st.SearchStrategy[int] | st.SearchStrategy[int | float]:
    """Numbers within ``[minimum, maximum]``; integers within ±2^53."""
    low = -MAX_SAFE if minimum is None else max(-MAX_SAFE, math.ceil(minimum))
    high = MAX_SAFE if maximum is None else min(MAX_SAFE, math.floor(maximum))
    ints = st.integers(low, high)
    if integer:
        return ints
    floats = st.floats(minimum, maximum, allow_nan=False, allow_infinity=False)
    return st.one_of(ints, floats) if low <= high else floats


def multi_values(values: list[str], min_items: int | None, max_items: int | None) -> st.SearchStrategy[list[str]]:
    """Unique picks from ``values`` within the item counts."""
    high = len(values) if max_items is None else min(max_items, len(values))
    return st.lists(st.sampled_from(values), unique=True, min_size=min_items or 0, max_size=high)


def values_for(field: Field) -> st.SearchStrategy[FormValue]:
    """A value that satisfies ``field`` (multi-selects as tuples, as :func:`validate_answer` returns them)."""
    if isinstance(field, StringField):
        return string_values(field.min_length, field.max_length, field.format)
    if isinstance(field, NumberField):
        return number_values(field.minimum, field.maximum, integer=field.integer)
    if isinstance(field, BooleanField):
        return st.booleans()
    if isinstance(field, SingleSelectField):
        return st.sampled_from([option.value for option in field.options])
    assert isinstance(field, MultiSelectField)
    return multi_values([option.value for option in field.options], field.min_items, field.max_items).map(tuple)


@st.composite
def _annotations(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["title"] = draw(labels)
    if draw(st.booleans()):
        out["description"] = draw(st.text(TEXT_CHARS, max_size=60))
    return out


def _maybe_default(draw: st.DrawFn, schema: dict[str, Any], values: st.SearchStrategy[Any]) -> dict[str, Any]:
    if draw(st.booleans()):
        schema["default"] = draw(values)
    return schema


@st.composite
def string_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """``StringSchema``: optional ``minLength``/``maxLength`` or ``format``."""
    schema: dict[str, Any] = {"type": "string", **draw(_annotations())}
    fmt: StringFormat | None = draw(st.none() | st.sampled_from(list(StringFormat)))
    min_length = max_length = None
    if fmt is not None:
        schema["format"] = fmt.value
    else:
        if draw(st.booleans()):
            min_length = draw(st.integers(0, 5))
            schema["minLength"] = min_length
        if draw(st.booleans()):
            max_length = draw(st.integers(min_length or 0, 20))
            schema["maxLength"] = max_length
    return _maybe_default(draw, schema, string_values(min_length, max_length, fmt))


_bounds = st.one_of(
    st.integers(-MAX_SAFE, MAX_SAFE),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300),
)


@st.composite
def number_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """``NumberSchema`` (``number`` or ``integer``) with optional ``minimum <= maximum``."""
    integer = draw(st.booleans())
    schema: dict[str, Any] = {"type": "integer" if integer else "number", **draw(_annotations())}
    bound = st.integers(-1000, 1000) if integer else _bounds
    low, high = sorted([draw(bound), draw(bound)])
    minimum = low if draw(st.booleans()) else None
    maximum = high if draw(st.booleans()) else None
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return _maybe_default(draw, schema, number_values(minimum, maximum, integer=integer))


@st.composite
def boolean_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """``BooleanSchema`` (``false`` defaults included)."""
    return _maybe_default(draw, {"type": "boolean", **draw(_annotations())}, st.booleans())


_option_lists = st.lists(option_values, min_size=1, max_size=8, unique=True)


@st.composite
def single_select_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """``enum``, titled ``oneOf`` (with and without ``type``), legacy ``enum`` + ``enumNames`` (any length)."""
    values = draw(_option_lists)
    shape = draw(st.sampled_from(["enum", "oneOf", "oneOf-untyped", "enumNames"]))
    schema: dict[str, Any] = {} if shape == "oneOf-untyped" else {"type": "string"}
    schema.update(draw(_annotations()))
    if shape == "enum":
        schema["enum"] = values
    elif shape.startswith("oneOf"):
        schema["oneOf"] = [{"const": value, "title": draw(labels)} for value in values]
    else:
        schema["enum"] = values
        schema["enumNames"] = draw(st.lists(labels, max_size=len(values) + 1))
    return _maybe_default(draw, schema, st.sampled_from(values))


@st.composite
def multi_select_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """``type: "array"`` with ``items.enum`` or ``items.anyOf`` of ``{const, title}``; optional item counts."""
    values = draw(_option_lists)
    schema: dict[str, Any] = {"type": "array", **draw(_annotations())}
    if draw(st.booleans()):
        schema["items"] = {"type": "string", "enum": values}
    else:
        schema["items"] = {"anyOf": [{"const": value, "title": draw(labels)} for value in values]}
    min_items = max_items = None
    if draw(st.booleans()):
        min_items = draw(st.integers(0, len(values)))
        schema["minItems"] = min_items
    if draw(st.booleans()):
        max_items = draw(st.integers(min_items or 0, len(values) + 2))
        schema["maxItems"] = max_items
    return _maybe_default(draw, schema, multi_values(values, min_items, max_items))


property_schemas = st.one_of(
    string_schemas(), number_schemas(), boolean_schemas(), single_select_schemas(), multi_select_schemas()
)


@st.composite
def requested_schemas(draw: st.DrawFn, *, max_fields: int = 6) -> dict[str, Any]:
    """A whole ``requestedSchema`` from the allowed subset (optional ``required``, ``$schema`` and root ``title``)."""
    properties = draw(st.dictionaries(names, property_schemas, max_size=max_fields))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if len(properties) > 0 and draw(st.booleans()):
        schema["required"] = draw(st.lists(st.sampled_from(list(properties)), unique=True))
    if draw(st.booleans()):
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    if draw(st.booleans()):
        schema["title"] = draw(labels)
    return schema
