"""Tool arguments checked against the inputSchema: one line per problem, JSON pointers, no values."""

from __future__ import annotations

import json

from services.broker.arguments import MAX_PROBLEMS, argument_problems, pointer

SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1},
            "env": {"enum": ["staging", "prod"]},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}},
            "a/b": {"type": "string"},
        },
        "required": ["n", "env"],
        "additionalProperties": False,
    }
)


def test_each_problem_is_a_pointer_and_what_is_wrong_without_the_value() -> None:
    problems = argument_problems(SCHEMA, {"n": "secret-value", "tags": ["ok", "toolong"], "a/b": 3, "x": 1})

    assert sorted(problems) == sorted(
        [
            '/a~1b: must be of type "string"',
            "/env: is required",
            '/n: must be of type "integer"',
            "/tags/1: must have at most 3 characters",
            "/x: is not an allowed property",
        ]
    )
    assert not any("secret-value" in p or "toolong" in p for p in problems)


def test_fitting_arguments_no_schema_and_an_invalid_schema_have_no_problems() -> None:
    assert argument_problems(SCHEMA, {"n": 2, "env": "prod"}) == []
    assert argument_problems("", {"anything": 1}) == []
    assert argument_problems(json.dumps({"type": "nonsense"}), {"n": 1}) == []


def test_many_problems_are_capped_with_a_count() -> None:
    schema = json.dumps({"type": "object", "additionalProperties": False})
    problems = argument_problems(schema, {f"k{i}": i for i in range(15)})

    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1] == "and 5 more"


def test_pointers_escape_tilde_and_slash() -> None:
    assert pointer(["a/b", "c~d", 0]) == "/a~1b/c~0d/0"
    assert pointer([]) == ""


def test_a_null_for_an_optional_parameter_counts_as_not_provided() -> None:
    schema = json.dumps(
        {
            "type": "object",
            "properties": {"region": {"type": "string"}, "verbose": {"type": "boolean"}},
            "required": ["region"],
        }
    )

    assert argument_problems(schema, {"region": "us-east1", "verbose": None}) == []
    assert argument_problems(schema, {"region": None}) == ['/region: must be of type "string"']
    assert argument_problems(schema, {"region": "us-east1", "verbose": "yes"}) == [
        '/verbose: must be of type "boolean"'
    ]
