"""Tool arguments checked against the Tool's ``inputSchema`` before the call (``INVALID_ARGUMENTS``).

MCP servers validate their own arguments, but their errors differ per SDK (often a raw
``-32602`` with a stack of pydantic text). The broker checks first, with ``jsonschema`` (the
dialect the schema's ``$schema`` names, default 2020-12), and reports each problem as
``<JSON pointer>: <what is wrong>`` (RFC 6901 pointers; the pointer of a missing property names that
property). Problem texts name schema keywords and schema values, never argument values. At most
:data:`MAX_PROBLEMS` are listed. ``maka call --no-validate`` (``skip_argument_validation``) skips
the check. A schema that is not valid JSON Schema is not enforced (the server decides).

A ``null`` for an optional Tool parameter (a top-level property the schema does not list in
``required``) counts as not provided: MCP treats the two alike (SEP-2243: a client omits the
``Mcp-Param-*`` header of a parameter whose value is null or not provided, which the conformance
scenario ``http-custom-headers`` calls with ``"verbose": null`` for a ``boolean`` parameter), and
callers such as models often write ``null`` for a parameter they leave out. The arguments are sent
to the server unchanged; only the check skips those nulls.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

MAX_PROBLEMS = 10
"""Most problems listed in one INVALID_ARGUMENTS message."""
MAX_SCHEMA_VALUE_CHARS = 80
"""Schema values quoted in a problem (an enum, a pattern) are cut to this many characters."""


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Validator | None:
    try:
        schema = json.loads(schema_json)
    except ValueError:
        return None
    if not isinstance(schema, dict):
        return None
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None
    validator: Validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return validator


def _escape(part: object) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


def pointer(path: Iterable[object]) -> str:
    """The RFC 6901 JSON pointer of ``path`` (``""`` for the whole arguments object)."""
    return "".join(f"/{_escape(p)}" for p in path)


def _quote(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_SCHEMA_VALUE_CHARS else text[: MAX_SCHEMA_VALUE_CHARS - 1] + "…"


def _describe(error: ValidationError) -> list[str]:
    where = pointer(error.absolute_path)
    keyword = error.validator
    value: Any = error.validator_value
    instance = error.instance
    if keyword == "required" and isinstance(instance, Mapping):
        return [f"{where}/{_escape(name)}: is required" for name in value if name not in instance]
    if keyword == "additionalProperties" and isinstance(instance, Mapping):
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        known = set(schema.get("properties", {}))
        return [f"{where}/{_escape(name)}: is not an allowed property" for name in instance if name not in known]
    texts = {
        "type": f"must be of type {_quote(value)}",
        "enum": f"must be one of {_quote(value)}",
        "const": f"must be {_quote(value)}",
        "minimum": f"must be >= {value}",
        "maximum": f"must be <= {value}",
        "exclusiveMinimum": f"must be > {value}",
        "exclusiveMaximum": f"must be < {value}",
        "minLength": f"must have at least {value} characters",
        "maxLength": f"must have at most {value} characters",
        "minItems": f"must have at least {value} items",
        "maxItems": f"must have at most {value} items",
        "pattern": f"must match the pattern {_quote(value)}",
        "format": f"must be a valid {value}",
        "uniqueItems": "must have unique items",
    }
    return [f"{where or '/'}: {texts.get(str(keyword), f'fails the {keyword} rule')}"]


def _without_optional_nulls(schema: object, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """``arguments`` without the ``null`` values of parameters ``schema`` does not require."""
    required = schema.get("required", []) if isinstance(schema, Mapping) else []
    if not isinstance(required, list):
        required = []
    if not any(value is None and name not in required for name, value in arguments.items()):
        return arguments
    return {name: value for name, value in arguments.items() if value is not None or name in required}


def argument_problems(schema_json: str, arguments: Mapping[str, Any]) -> list[str]:
    """Every way ``arguments`` break the Tool's input schema (``schema_json``), one line each; empty
    when they fit, when there is no schema, or when the schema itself is not valid JSON Schema."""
    if not schema_json:
        return []
    validator = _validator(schema_json)
    if validator is None:
        return []
    problems: list[str] = []
    checked = _without_optional_nulls(validator.schema, arguments)
    for error in sorted(validator.iter_errors(checked), key=lambda e: list(map(str, e.absolute_path))):
        for line in _describe(error):
            if line not in problems:
                problems.append(line)
    if len(problems) > MAX_PROBLEMS:
        problems = [*problems[:MAX_PROBLEMS], f"and {len(problems) - MAX_PROBLEMS} more"]
    return problems
