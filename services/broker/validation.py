"""Shape checks of what providers and callers send the Capability broker, and the broker's caps.

Each check returns the first problem as a sentence for the ``FrameRejected`` / ``FAILURE_CODE_INVALID_REQUEST``
message, or ``None``; none of them reads or changes broker state (the :class:`~services.broker.broker.Broker`
decides what a problem means for the stream or the call).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from maka.broker.v1 import broker_pb2
from services.core import json_text
from services.core.limits import MAX_ID_CHARS

MAX_AUTHORIZATION_URL_CHARS = 8192
"""Cap of a published OAuth authorization URL."""
MAX_MESSAGE_CHARS = 2000
"""Provider failure / progress messages are cut to this many code points."""
MAX_DISPLAY_NAME_CHARS = 128
"""Longest provider display name accepted."""

_PROVIDER_ID = re.compile(r"[A-Za-z0-9._:-]+")
_DISPLAY_NAME = re.compile(r"[A-Za-z0-9 ._:()/-]*")


def check_id(name: str, value: str) -> str | None:
    """The problem of an id called ``name``: empty, longer than :data:`MAX_ID_CHARS` code points, or with
    characters that are not printable; ``None`` when it is fine."""
    if not value:
        return f"{name} is required"
    if len(value) > MAX_ID_CHARS:
        return f"{name} is longer than {MAX_ID_CHARS} characters"
    if not value.isprintable():
        return f"{name} has control characters"
    return None


def check_provider_id(value: str) -> str | None:
    """The problem of a provider id: :func:`check_id`'s, or a character outside ``A-Z a-z 0-9 . _ : -`` (one
    script, nothing that renders like another provider's id); ``None`` when it is fine."""
    problem = check_id("provider_id", value)
    if problem is None and not _PROVIDER_ID.fullmatch(value):
        problem = "provider_id may only contain A-Z a-z 0-9 . _ : -"
    return problem


def check_display_name(value: str) -> str | None:
    """The problem of a provider display name (empty is fine: the provider id is shown): longer than
    :data:`MAX_DISPLAY_NAME_CHARS`, or a character outside ASCII letters, digits, space and ``. _ : ( ) / -``."""
    if len(value) > MAX_DISPLAY_NAME_CHARS:
        return f"display_name is longer than {MAX_DISPLAY_NAME_CHARS} characters"
    if not _DISPLAY_NAME.fullmatch(value):
        return "display_name may only contain A-Z a-z 0-9, spaces and . _ : ( ) / -"
    return None


def check_tools(
    descriptors: Iterable[broker_pb2.ToolDescriptor],
) -> tuple[dict[str, broker_pb2.ToolDescriptor], str | None]:
    """A provider's Tools by qualified ``SERVER:TOOL`` name and ``None``, or ``{}`` and the first problem: a name
    or ``claimed_server`` that :func:`check_id` refuses, a ``claimed_server`` with ``:``, an input or output
    schema or annotations that are not a JSON object, the same qualified name twice."""
    tools: dict[str, broker_pb2.ToolDescriptor] = {}
    for descriptor in descriptors:
        for name, value in (("tool name", descriptor.name), ("claimed_server", descriptor.claimed_server)):
            problem = check_id(name, value)
            if problem is not None:
                return {}, problem
        if ":" in descriptor.claimed_server:
            return {}, "claimed_server must not contain ':'"
        for field_name, text in (
            ("input_schema_json", descriptor.input_schema_json),
            ("output_schema_json", descriptor.output_schema_json),
            ("annotations_json", descriptor.annotations_json),
        ):
            if text:
                try:
                    schema = json.loads(text)
                except ValueError:
                    schema = None
                if not isinstance(schema, dict):
                    return {}, f"{field_name} of {descriptor.name} is not a JSON object"
        qualified = f"{descriptor.claimed_server}:{descriptor.name}"
        if qualified in tools:
            return {}, f"duplicate Tool {qualified}"
        tools[qualified] = descriptor
    return tools, None


def check_sign_in_status(status: broker_pb2.SignInStatus) -> str | None:
    """The first problem of a provider's ``sign_in_status`` frame: ``server`` must be a valid id without ``:``,
    ``authorization_url`` at most :data:`MAX_AUTHORIZATION_URL_CHARS` and present exactly when the state is
    ``SIGN_IN_STATE_REQUIRED``."""
    problem = check_id("server", status.server)
    if problem is None and ":" in status.server:
        problem = "server must not contain ':'"
    if problem is None and len(status.authorization_url) > MAX_AUTHORIZATION_URL_CHARS:
        problem = "authorization_url is too long"
    if problem is None and (status.state == broker_pb2.SignInState.SIGN_IN_STATE_REQUIRED) != bool(
        status.authorization_url
    ):
        problem = "authorization_url is required with SIGN_IN_STATE_REQUIRED and only then"
    return problem


def check_call_request(request: broker_pb2.CallToolRequest, arguments_json: str) -> tuple[dict[str, Any], str | None]:
    """A ``CallTool`` request's arguments (``arguments_json`` parsed) and ``None``, or ``{}`` and the first problem
    of its shape: every id (and ``call_id`` when given) as :func:`check_id` wants it, ``tool_name`` qualified as
    ``SERVER:TOOL``, the arguments a JSON object. Whether the Tool exists and its arguments fit its
    ``inputSchema`` is the broker's routing decision."""
    for name, value in (
        ("session_id", request.session_id),
        ("turn_id", request.turn_id),
        ("tool_use_id", request.tool_use_id),
        ("tool_name", request.tool_name),
    ):
        problem = check_id(name, value)
        if problem is not None:
            return {}, problem
    if request.call_id:
        problem = check_id("call_id", request.call_id)
        if problem is not None:
            return {}, problem
    server, sep, tool = request.tool_name.partition(":")
    if not sep or not server or not tool:
        return {}, "tool_name must be qualified as SERVER:TOOL"
    try:
        arguments = json_text.loads(arguments_json)
    except json_text.JsonTextError as error:
        return {}, f"arguments_json is {error}"
    if not isinstance(arguments, dict):
        return {}, "arguments_json must be a JSON object"
    return arguments, None
