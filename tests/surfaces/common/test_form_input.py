"""surfaces.common.form_input: raw widget input → typed answer values and inline errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

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
)
from surfaces.common.form_input import (
    FieldInputError,
    check_form_input,
    constraint_texts,
    field_hints,
    field_kind,
    field_to_json,
    filter_options,
    format_time_left,
    initial_raws,
    parse_field,
    plain_text,
    values_from_json,
)

ENVS = (Option("prod", "Production"), Option("stage", "Staging"), Option("dev", "Development"))


def deploy_form() -> Form:
    return Form(
        message="Where should I deploy?",
        fields=(
            SingleSelectField(name="env", label="Environment", required=True, options=ENVS, default="stage"),
            NumberField(name="replicas", label="Replicas", integer=True, minimum=1, maximum=10, default=2),
            BooleanField(name="dry_run", label="Dry run", default=True),
            StringField(name="note", label="Note", max_length=5),
            MultiSelectField(name="regions", label="Regions", options=ENVS, min_items=1, max_items=2),
            StringField(name="when", label="When", format=StringFormat.DATE),
        ),
    )


def test_initial_raws_prefill_every_default_in_raw_form() -> None:
    assert initial_raws(deploy_form()) == ["stage", "2", True, "", None, ""]  # untouched multi select: None


def test_integer_text_parses_to_int_and_keeps_strict_syntax() -> None:
    field = NumberField(name="n", label="N", integer=True)
    assert parse_field(field, " 42 ") == 42
    assert parse_field(field, "") is None
    for bad in ("4.5", "1e3", "0x10", "forty", "--1"):
        with pytest.raises(FieldInputError, match="whole number"):
            parse_field(field, bad)
    with pytest.raises(FieldInputError, match="too large"):
        parse_field(field, str(2**53 + 1))


def test_number_text_parses_to_float_and_rejects_non_json_numbers() -> None:
    field = NumberField(name="x", label="X")
    assert parse_field(field, "-3.5") == -3.5
    assert parse_field(field, "2e2") == 200.0
    for bad in ("NaN", "Infinity", ".5", "1,5"):
        with pytest.raises(FieldInputError):
            parse_field(field, bad)


def test_date_and_date_time_must_be_real_and_rfc3339() -> None:
    day = StringField(name="d", label="D", format=StringFormat.DATE)
    moment = StringField(name="t", label="T", format=StringFormat.DATE_TIME)
    assert parse_field(day, "2026-02-28") == "2026-02-28"
    with pytest.raises(FieldInputError, match="calendar"):
        parse_field(day, "2026-02-30")
    with pytest.raises(FieldInputError, match="YYYY-MM-DD"):
        parse_field(day, "28/02/2026")
    assert parse_field(moment, "2026-02-28T10:00:00Z") == "2026-02-28T10:00:00Z"
    assert parse_field(moment, "2026-02-28T10:00:00.5+02:00") == "2026-02-28T10:00:00.5+02:00"
    with pytest.raises(FieldInputError, match="offset"):
        parse_field(moment, "2026-02-28T10:00:00")


def test_select_picks_must_be_listed_options_and_come_back_in_option_order() -> None:
    single = SingleSelectField(name="env", label="Env", options=ENVS)
    multi = MultiSelectField(name="r", label="R", options=ENVS)
    assert parse_field(single, "dev") == "dev"
    with pytest.raises(FieldInputError):
        parse_field(single, "Production")  # a label is not a value
    assert parse_field(multi, ("dev", "prod")) == ("prod", "dev")
    with pytest.raises(FieldInputError, match="once"):
        parse_field(multi, ("dev", "dev"))
    with pytest.raises(FieldInputError):
        parse_field(multi, ("qa",))


def test_check_form_input_builds_a_typed_accept_answer() -> None:
    check = check_form_input(deploy_form(), ["prod", "3", False, "hi", ("stage",), "2026-03-01"])
    assert check.ok
    assert check.answer is not None
    assert check.answer.action is Action.ACCEPT
    assert check.answer.values["env"] == "prod"
    assert check.answer.values["replicas"] == 3
    assert check.answer.values["dry_run"] is False
    assert check.answer.values["regions"] == ("stage",)


def test_check_form_input_reports_inline_errors_per_field_and_blocks_the_answer() -> None:
    check = check_form_input(deploy_form(), [None, "11", True, "toolong", (), "soon"])
    assert not check.ok
    assert check.answer is None
    assert check.errors[0] == "required"
    assert "10" in check.errors[1]  # maximum named
    assert 3 in check.errors  # maxLength 5
    assert 4 in check.errors  # minItems 1
    assert "YYYY-MM-DD" in check.errors[5]
    assert 2 not in check.errors


def test_filter_options_matches_labels_and_values_case_insensitively() -> None:
    assert [o.value for o in filter_options(ENVS, "STAG")] == ["stage"]
    assert [o.value for o in filter_options(ENVS, "dev")] == ["dev"]
    assert len(filter_options(ENVS, "  ")) == 3


def test_plain_text_marks_controls_and_bidi_overrides_but_keeps_rtl_and_wide_text() -> None:
    assert plain_text("pay\u202eusd 001\x1b[31m") == "pay\ufffdusd 001\u241b[31m"
    assert plain_text("שלום 世界\nnext") == "שלום 世界\nnext"
    assert plain_text("a\nb", keep_newlines=False) == "a b"


def test_time_left_is_formatted_by_magnitude() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert format_time_left(None, now) == "no time limit"
    assert format_time_left(now - timedelta(seconds=1), now) == "expired"
    assert format_time_left(now + timedelta(seconds=45), now) == "45s left"
    assert format_time_left(now + timedelta(minutes=4, seconds=5), now) == "4m 05s left"
    assert format_time_left(now + timedelta(hours=1, minutes=2), now) == "1h 02m left"


def test_field_json_names_kind_constraints_default_and_options() -> None:
    data = field_to_json(deploy_form().fields[1])
    assert data == {
        "name": "replicas",
        "kind": "integer",
        "label": "Replicas",
        "description": "",
        "required": False,
        "constraints": {"minimum": 1, "maximum": 10},
        "default": 2,
        "options": [],
    }
    assert field_kind(deploy_form().fields[5]) == "date"
    assert constraint_texts(deploy_form().fields[4]) == ["pick 1 to 2"]


def test_values_from_json_types_values_by_field() -> None:
    values = values_from_json(deploy_form(), {"replicas": 3.0, "regions": ["prod"], "env": "dev"})
    assert values == {"replicas": 3, "regions": ("prod",), "env": "dev"}
    with pytest.raises(FieldInputError):
        values_from_json(deploy_form(), ["not", "an", "object"])
    with pytest.raises(FieldInputError):
        values_from_json(deploy_form(), {"env": {"nested": 1}})


def test_field_hints_describe_each_kind_for_people_without_internal_type_names() -> None:
    options = (Option("a", "A"), Option("b", "B"), Option("c", "C"))
    assert field_hints(SingleSelectField(name="s", label="L", options=options)) == ["Choose one"]
    picks = MultiSelectField(name="m", label="L", options=options, min_items=1, max_items=3)
    assert field_hints(picks) == ["Pick 1 to 3"]
    assert field_hints(MultiSelectField(name="m", label="L", options=options)) == ["Pick any"]
    whole = NumberField(name="n", label="L", integer=True, minimum=1, maximum=10)
    assert field_hints(whole) == ["Whole number between 1 and 10"]
    assert field_hints(NumberField(name="n", label="L", minimum=0.5)) == ["Number at least 0.5"]
    assert field_hints(BooleanField(name="b", label="L")) == ["Yes or no"]
    assert field_hints(StringField(name="e", label="L", format=StringFormat.EMAIL)) == ["Email address"]
    assert field_hints(StringField(name="d", label="L", format=StringFormat.DATE)) == ["Date (YYYY-MM-DD)"]
    assert field_hints(StringField(name="t", label="L", max_length=20)) == ["Text", "at most 20 characters"]
