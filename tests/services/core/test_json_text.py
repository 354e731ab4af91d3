"""The strict JSON decoder of user and caller text (:mod:`services.core.json_text`)."""

from __future__ import annotations

import pytest

from services.core import json_text


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"env": "staging", "env": "production"}', 'not strict JSON: the name "env" appears twice in one object'),
        ('{"a": [{"b": 1, "b": 1}]}', 'not strict JSON: the name "b" appears twice in one object'),
        ('{"a": NaN}', "not strict JSON: NaN is not a JSON number"),
        ('{"a": -Infinity}', "not strict JSON: -Infinity is not a JSON number"),
        ('{"a": "x\\ud800"}', "not strict JSON: a string has an unpaired surrogate escape (not Unicode)"),
        ('{"\\udfff": 1}', "not strict JSON: a string has an unpaired surrogate escape (not Unicode)"),
        ("[" * 65 + "]" * 65, "not strict JSON: nested deeper than 64 levels"),
        ("[" * 100_000, "not strict JSON: nested deeper than 64 levels"),
        ("{nope", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        (b"\xff{}", "not JSON: the bytes are not UTF-8"),
    ],
)
def test_text_that_is_not_strict_json_is_refused_with_a_sentence_that_quotes_no_value(
    text: str | bytes, problem: str
) -> None:
    with pytest.raises(json_text.JsonTextError) as refused:
        json_text.loads(text)
    assert str(refused.value) == problem


def test_strict_json_decodes_as_the_standard_library_does() -> None:
    text = '{"a": [1, 2.5, "\\ud83d\\ude00", {"b": null}], "c": true, "deep": ' + "[" * 63 + "]" * 63 + "}"
    value = json_text.loads(text)
    assert value["a"] == [1, 2.5, "\N{GRINNING FACE}", {"b": None}]
    assert value["c"] is True
