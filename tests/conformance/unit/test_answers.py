"""The automatic answer: defaults first, else the minimal value each field's constraints allow."""

from __future__ import annotations

from services.core.form import (
    Action,
    BooleanField,
    Form,
    MultiSelectField,
    NumberField,
    Option,
    SingleSelectField,
    StringField,
    StringFormat,
    validate_answer,
)
from tests.conformance.client.answers import FORMAT_SAMPLES, automatic_answer, field_value

OPTIONS = (
    Option(value="staging", label="Staging"),
    Option(value="production", label="Production"),
    Option(value="dev", label="Dev"),
)


def test_fields_with_defaults_are_answered_with_their_defaults() -> None:
    form = Form(
        message="Defaults",
        fields=(
            StringField(name="line", label="Line", default="It was a dark and stormy night."),
            NumberField(name="count", label="Count", integer=True, default=7),
            BooleanField(name="agree", label="Agree", default=False),
            SingleSelectField(name="env", label="Env", options=OPTIONS, default="production"),
            MultiSelectField(name="tags", label="Tags", options=OPTIONS, default=("dev", "staging")),
        ),
    )

    answer = automatic_answer(form)

    assert answer.action is Action.ACCEPT
    assert answer.values == {
        "line": "It was a dark and stormy night.",
        "count": 7,
        "agree": False,
        "env": "production",
        "tags": ("dev", "staging"),
    }


def test_strings_without_default_get_a_format_sample_or_the_shortest_allowed_text() -> None:
    assert (
        field_value(StringField(name="email", label="Email", format=StringFormat.EMAIL))
        == FORMAT_SAMPLES[StringFormat.EMAIL]
    )
    assert field_value(StringField(name="when", label="When", format=StringFormat.DATE_TIME)) == "2026-07-28T00:00:00Z"
    assert field_value(StringField(name="name", label="Name")) == "x"
    assert field_value(StringField(name="code", label="Code", min_length=4, max_length=8)) == "xxxx"
    assert field_value(StringField(name="empty", label="Empty", max_length=0)) == ""


def test_numbers_without_default_get_their_minimum_rounded_up_for_integers() -> None:
    assert field_value(NumberField(name="age", label="Age", integer=True, minimum=0.5, maximum=150)) == 1
    assert field_value(NumberField(name="ratio", label="Ratio", minimum=0.25)) == 0.25
    assert field_value(NumberField(name="debt", label="Debt", integer=True, maximum=-2.5)) == -3
    assert field_value(NumberField(name="any", label="Any")) == 0


def test_booleans_and_selects_without_default_accept_and_pick_the_first_options() -> None:
    assert field_value(BooleanField(name="confirmed", label="Confirmed")) is True
    assert field_value(SingleSelectField(name="env", label="Env", options=OPTIONS)) == "staging"
    assert field_value(MultiSelectField(name="tags", label="Tags", options=OPTIONS)) == ("staging",)
    assert field_value(MultiSelectField(name="two", label="Two", options=OPTIONS, min_items=2, max_items=3)) == (
        "staging",
        "production",
    )


def test_automatic_answer_passes_the_form_contracts_validation() -> None:
    form = Form(
        message="Deploy",
        fields=(
            SingleSelectField(name="environment", label="Environment", required=True, options=OPTIONS[:2]),
            BooleanField(name="confirm", label="Confirm", required=True),
            StringField(name="contact", label="Contact", required=True, format=StringFormat.EMAIL),
            NumberField(name="replicas", label="Replicas", required=True, integer=True, minimum=1, maximum=9),
            MultiSelectField(name="regions", label="Regions", required=True, options=OPTIONS, min_items=1, max_items=2),
        ),
    )

    answer = automatic_answer(form)

    assert validate_answer(form, answer).values == answer.values
