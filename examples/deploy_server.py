"""The bundled example MCP server: Tools that pause with MCP 2026-07-28 ``input_required``.

Built with the official ``mcp`` SDK's :class:`~mcp.server.mcpserver.MCPServer`, so it is dual-era: a
modern (2026-07-28) client gets ``InputRequiredResult`` with form-mode ``elicitation/create`` requests
(SEP-2322 MRTR); a legacy (<= 2025-11-25) client gets the classic push-style ``elicitation/create``
request on its back-channel. Either way the Tool first checks that the client declared the
``elicitation`` (form) capability for this request and otherwise returns an ``isError`` result
(elicitation.mdx "Capabilities": servers MUST NOT send modes the client did not declare).

Tools:

- ``deploy(artifact)`` - the RFC's user scenario: asks for ``environment`` (``staging`` |
  ``production``) and ``confirm`` under the input key ``target`` with exactly the RFC's
  ``requestedSchema``; completes with ``Deployed <artifact> to <environment>.``; on decline/cancel
  (or ``confirm: false``) returns a result saying nothing was deployed.
- ``release_checklist(release)`` - two rounds with different keys (``details`` then ``signoff``)
  whose forms together use every field kind form mode allows (string formats email/uri/date/
  date-time, number, integer, boolean, untitled ``enum``, titled ``oneOf``, legacy ``enumNames``,
  both multi-select shapes, defaults). Round-1 answers travel to round 2 in ``requestState``, which
  ``MCPServer`` seals (AES-GCM) on the wire.
- ``ping()`` - no input; returns ``pong``.

Run: ``python -m examples.deploy_server`` (stdio) or ``python -m examples.deploy_server --http 8000``
(Streamable HTTP at ``http://127.0.0.1:8000/mcp``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any, Final

import jsonschema
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

SERVER_NAME: Final = "maka-examples"
"""The MCP server name (also the ``requestState`` audience claim; keep it stable across replicas)."""

DEPLOY_KEY: Final = "target"
DEPLOY_MESSAGE: Final = "Choose the deployment target"
DEPLOY_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "environment": {"type": "string", "enum": ["staging", "production"]},
        "confirm": {"type": "boolean"},
    },
    "required": ["environment", "confirm"],
}
"""Exactly the RFC's ``requestedSchema`` ("User scenario")."""

DETAILS_KEY: Final = "details"
DETAILS_MESSAGE: Final = "Release details (round 1 of 2)"
DETAILS_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "owner_email": {"type": "string", "format": "email", "title": "Release owner", "description": "Who to page"},
        "changelog_url": {"type": "string", "format": "uri", "title": "Changelog URL"},
        "release_date": {"type": "string", "format": "date", "title": "Release date"},
        "freeze_at": {"type": "string", "format": "date-time", "title": "Code freeze at"},
        "version": {"type": "string", "title": "Version", "minLength": 1, "maxLength": 32, "default": "1.0.0"},
        "coverage": {"type": "number", "title": "Test coverage %", "minimum": 0, "maximum": 100, "default": 80.5},
        "reviewers": {"type": "integer", "title": "Reviewers", "minimum": 1, "maximum": 10, "default": 2},
        "breaking": {"type": "boolean", "title": "Breaking change", "default": False},
        "channel": {
            "type": "string",
            "title": "Channel",
            "enum": ["stable", "beta", "nightly"],
            "default": "stable",
        },
        "risk": {
            "type": "string",
            "title": "Risk",
            "oneOf": [
                {"const": "low", "title": "Low risk"},
                {"const": "medium", "title": "Medium risk"},
                {"const": "high", "title": "High risk"},
            ],
            "default": "low",
        },
    },
    "required": ["owner_email", "release_date", "version", "reviewers", "channel", "risk"],
}
"""Round 1: string formats, number, integer, boolean, untitled enum, titled oneOf, defaults."""

SIGNOFF_KEY: Final = "signoff"
SIGNOFF_MESSAGE: Final = "Release sign-off (round 2 of 2)"
SIGNOFF_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "title": "Region",
            "enum": ["eu", "us", "apac"],
            "enumNames": ["Europe", "United States", "Asia-Pacific"],
        },
        "platforms": {
            "type": "array",
            "title": "Platforms",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["linux", "macos", "windows"]},
            "default": ["linux"],
        },
        "checks": {
            "type": "array",
            "title": "Checks done",
            "items": {
                "anyOf": [
                    {"const": "tests", "title": "Tests green"},
                    {"const": "docs", "title": "Docs updated"},
                    {"const": "security", "title": "Security review"},
                ]
            },
            "default": ["tests"],
        },
        "notes": {"type": "string", "title": "Notes", "maxLength": 500},
        "approve": {"type": "boolean", "title": "Approve the release"},
    },
    "required": ["region", "platforms", "approve"],
}
"""Round 2: legacy ``enumNames``, both multi-select shapes (``items.enum``, ``items.anyOf``), more defaults."""

NO_ELICITATION_TEXT: Final = (
    "This Tool needs to ask the user, but the client did not declare the elicitation (form) capability."
)

mcp: MCPServer = MCPServer(SERVER_NAME, instructions="Example Tools that ask the user through MCP forms.")


def _text(text: str, *, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


def _declares_form_elicitation(ctx: Context) -> bool:
    """True when this request's client capabilities include form-mode elicitation.

    ``"elicitation": {}`` is equivalent to ``{"form": {}}``; ``{"url": {}}`` alone is not form mode
    (elicitation.mdx "Capabilities").
    """
    caps = ctx.client_capabilities
    if caps is None or caps.elicitation is None:
        return False
    elicitation = caps.elicitation
    return elicitation.form is not None or elicitation.url is None


def _is_modern(ctx: Context) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _form_request(message: str, schema: Mapping[str, Any]) -> ElicitRequest:
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=dict(schema)))


def _validated(answer: ElicitResult, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The accepted ``content`` checked against ``schema``; malformed input is a JSON-RPC error.

    Raises ``MCPError(-32602)`` (mrtr.mdx "Error Handling": malformed responses are errors).
    """
    content: dict[str, Any] = dict(answer.content or {})
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    validator = jsonschema.Draft202012Validator(dict(schema), format_checker=checker)
    problems = sorted(error.json_path for error in validator.iter_errors(content))
    if problems:
        raise MCPError(INVALID_PARAMS, f"input response does not match the requested schema at {', '.join(problems)}")
    return content


async def _ask(
    ctx: Context, key: str, message: str, schema: Mapping[str, Any], state: str | None = None
) -> ElicitResult | InputRequiredResult:
    """Ask once: on a modern request return ``InputRequiredResult``; on legacy push ``elicitation/create``."""
    if _is_modern(ctx):
        return InputRequiredResult(input_requests={key: _form_request(message, schema)}, request_state=state)
    return await ctx.request_context.session.elicit_form(message, dict(schema), related_request_id=ctx.request_id)


def _response(ctx: Context, key: str) -> ElicitResult | None:
    """This round's ``ElicitResult`` under ``key`` (None on the first round or when it is missing)."""
    answer = (ctx.input_responses or {}).get(key)
    return answer if isinstance(answer, ElicitResult) else None


def _deploy_outcome(artifact: str, answer: ElicitResult) -> CallToolResult:
    if answer.action != "accept":
        verb = "declined" if answer.action == "decline" else "cancelled"
        return _text(f"Deployment of {artifact} was {verb} by the user; nothing was deployed.")
    content = _validated(answer, DEPLOY_SCHEMA)
    environment = str(content["environment"])
    if content["confirm"] is not True:
        return _text(f"Deployment of {artifact} to {environment} was not confirmed; nothing was deployed.")
    return _text(f"Deployed {artifact} to {environment}.")


@mcp.tool(title="Deploy an artifact", annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
async def deploy(artifact: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    """Deploy a build artifact; asks the user for the target environment and a confirmation."""
    if not _declares_form_elicitation(ctx):
        return _text(NO_ELICITATION_TEXT, is_error=True)
    answer = _response(ctx, DEPLOY_KEY)
    if answer is None:
        asked = await _ask(ctx, DEPLOY_KEY, DEPLOY_MESSAGE, DEPLOY_SCHEMA)
        if isinstance(asked, InputRequiredResult):
            return asked
        answer = asked
    return _deploy_outcome(artifact, answer)


def _checklist_summary(release: str, details: Mapping[str, Any], signoff: Mapping[str, Any]) -> str:
    verdict = "approved" if signoff.get("approve") is True else "not approved"
    return (
        f"Release {release} {details.get('version', '')} {verdict}: owner {details['owner_email']}, "
        f"date {details['release_date']}, channel {details['channel']}, risk {details['risk']}, "
        f"reviewers {details['reviewers']}, region {signoff['region']}, "
        f"platforms {','.join(signoff['platforms'])}."
    )


def _not_answered(release: str, answer: ElicitResult, round_no: int) -> CallToolResult:
    verb = "declined" if answer.action == "decline" else "cancelled"
    return _text(f"Release checklist for {release} was {verb} in round {round_no}; nothing was recorded.")


@mcp.tool()
async def release_checklist(release: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    """Walk a release checklist in two form rounds (details, then sign-off) and summarise it."""
    if not _declares_form_elicitation(ctx):
        return _text(NO_ELICITATION_TEXT, is_error=True)
    modern = _is_modern(ctx)
    signoff = _response(ctx, SIGNOFF_KEY)
    if modern and signoff is not None and ctx.request_state:
        details = json.loads(ctx.request_state)  # sealed by MCPServer: tampering fails before we see it
        if signoff.action != "accept":
            return _not_answered(release, signoff, 2)
        return _text(_checklist_summary(release, details, _validated(signoff, SIGNOFF_SCHEMA)))
    first = _response(ctx, DETAILS_KEY)
    if first is None:
        asked = await _ask(ctx, DETAILS_KEY, DETAILS_MESSAGE, DETAILS_SCHEMA)
        if isinstance(asked, InputRequiredResult):
            return asked
        first = asked
    if first.action != "accept":
        return _not_answered(release, first, 1)
    details = _validated(first, DETAILS_SCHEMA)
    second = await _ask(ctx, SIGNOFF_KEY, SIGNOFF_MESSAGE, SIGNOFF_SCHEMA, state=json.dumps(details))
    if isinstance(second, InputRequiredResult):
        return second
    if second.action != "accept":
        return _not_answered(release, second, 2)
    return _text(_checklist_summary(release, details, _validated(second, SIGNOFF_SCHEMA)))


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
async def ping() -> str:
    """Answer "pong" (no input, no form)."""  # the docstring is the Tool description a model reads: plain text
    return "pong"


def main(argv: list[str] | None = None) -> None:
    """Run over stdio (default) or Streamable HTTP with ``--http PORT`` (path ``/mcp``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp")
    parser.add_argument("--host", default="127.0.0.1", help="bind address for --http (default 127.0.0.1)")
    args = parser.parse_args(argv)
    if args.http is None:
        mcp.run()
    else:
        mcp.run("streamable-http", host=args.host, port=args.http)


if __name__ == "__main__":
    main()
