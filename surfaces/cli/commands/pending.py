"""``maka pending``: list the pending forms of the running stack (docs/design.md#running-it).

``maka pending [--session S ...] [--json]`` prints every pending form the caller may see (or those of the
given sessions), each field with its limits, default and choices (the first 20; ``--json`` lists all).
With ``--json`` the output is a JSON array, one object per form (see
:meth:`surfaces.common.interactions.InteractionView.to_json`: id, session, tool, message, requester,
fields with kind/label/required/constraints/default/options, expires_at, and for an answered form its
``delivery``). ``maka pending --id ID`` shows that one form whether pending or settled (``GetInteraction``):
its state, close reason and - once answered - whether the answer was ``delivered`` to the Tool or ``lost``
with its call, and why (docs/security.md "No answer after settlement"). Exit codes: 0 listed, 2 usage,
3 failed (stable code, e.g. ``UNAVAILABLE``, ``NOT_FOUND`` or ``NO_STACK``, first on stderr).

``--hosts a,b`` (or ``'*'``: every Host the token may use; default ``$MAKA_HOST_IDS``) lists the forms of a
whole pool of Hosts, each line with its ``host=`` (``"host"`` in ``--json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime

from maka_client import MakaError
from services.core.form import Field
from surfaces.common.form_input import (
    constraint_texts,
    default_value,
    field_kind,
    field_options,
    plain_text,
    value_to_json,
)
from surfaces.common.interactions import (
    CLOSE_REASON_TEXT,
    LOST_TEXT,
    Delivery,
    Interactions,
    InteractionState,
    InteractionView,
    deadline_text,
    round_line,
)
from surfaces.common.target import add_target_arguments, host_id, interaction_target, pool
from surfaces.common.untrusted import display_text

NAME = "pending"
HELP = "list pending forms (id, session, message, requester, fields, expiry)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--session S`` (repeatable), ``--json``, ``--state-dir``, ``--interaction``."""
    parser.add_argument("--session", action="append", default=[], metavar="S", help="only this session (repeatable)")
    parser.add_argument("--json", action="store_true", help="print a JSON array")
    parser.add_argument(
        "--id", default=None, metavar="ID", help="show this one form, pending or settled (state, delivery)"
    )
    add_target_arguments(parser)


def fail(code: str, message: str) -> int:
    """Print ``CODE: message`` on stderr and return exit code 3."""
    print(f"{code}: {message}", file=sys.stderr)
    return 3


MAX_LISTED_OPTIONS = 20
"""Options listed per select field (``--json`` lists every one)."""


def field_details(field: Field) -> list[str]:
    """A field's limits, default and choices, one line each (``maka pending``)."""
    lines: list[str] = []
    limits = constraint_texts(field)
    if limits:
        lines.append("limits: " + "; ".join(limits))
    default = default_value(field)
    if default is not None:
        shown = value_to_json(default)
        lines.append(f"default: {json.dumps(shown, ensure_ascii=False)}")
    options = field_options(field)
    if options:
        listed = ", ".join(
            plain_text(o.value, keep_newlines=False)
            + (f" ({plain_text(o.label, keep_newlines=False)})" if o.label and o.label != o.value else "")
            for o in options[:MAX_LISTED_OPTIONS]
        )
        more = (
            f", ... and {len(options) - MAX_LISTED_OPTIONS} more (--json lists all)"
            if len(options) > MAX_LISTED_OPTIONS
            else ""
        )
        lines.append(f"choices: {listed}{more}")
    return lines


def _human(views: list[InteractionView], *, show_host: bool = False) -> str:
    if not views:
        return "no pending forms"
    now = datetime.now(UTC)
    lines: list[str] = []
    for view in views:
        requester = view.form.requester
        host = f"  host={plain_text(view.host_id, keep_newlines=False)}" if show_host else ""
        lines.append(
            f"{view.interaction_id}{host}  session={view.session_id}"
            f"  tool={plain_text(view.tool_name, keep_newlines=False)}  ({deadline_text(view, now)})"
        )
        lines.append(
            f"  provider {plain_text(requester.provider_display_name or requester.provider_id)};"
            f" claimed server {plain_text(requester.claimed_server)}, Tool {plain_text(requester.claimed_tool)}"
        )
        summary = round_line(view)
        if summary:
            lines.append(f"  {summary}")
        lines.append("  " + plain_text(view.form.message).replace("\n", "\n  "))
        for f in view.form.fields:
            label = plain_text(f.label, keep_newlines=False)
            lines.append(f"  - {label}{' *' if f.required else ''} [{f.name}] {field_kind(f)}")
            lines.extend(f"      {line}" for line in field_details(f))
    return "\n".join(lines)


def _settled_line(view: InteractionView) -> str:
    """One line for a form that is no longer pending: its outcome and, when answered, its delivery."""
    if view.state is InteractionState.ANSWERED:
        action = view.answer.action.value if view.answer is not None else "answered"
        text = f"{view.interaction_id}: answered ({action})"
        if view.delivery is Delivery.DELIVERED:
            return text + "; delivered to the Tool"
        if view.delivery is Delivery.LOST:
            reason = CLOSE_REASON_TEXT[view.delivery_lost_reason]
            return text + f"; lost - {LOST_TEXT.format(reason=reason)}"
        if view.delivery is Delivery.PENDING:
            return text + "; not yet confirmed delivered"
        return text
    return f"{view.interaction_id}: closed ({CLOSE_REASON_TEXT[view.close_reason]})"


async def _list(
    target: str, host: str, hosts: tuple[str, ...] | None, sessions: list[str], interaction_id: str | None
) -> list[InteractionView]:
    async with Interactions.connect(target, host_id=host, pool=hosts) as client:
        if interaction_id is not None:
            session = sessions[0] if len(sessions) == 1 else ""
            return [await client.get(interaction_id, session_id=session)]
        return await client.pending(sessions)


def run(args: argparse.Namespace) -> int:
    """List pending forms; see the module docstring for output and exit codes."""
    try:
        target = interaction_target(args)
    except (FileNotFoundError, ValueError) as error:
        return fail("NO_STACK", str(error))
    try:
        hosts = pool(args)
        views = asyncio.run(_list(target, host_id(args), hosts, list(args.session), args.id))
    except MakaError as error:
        return fail(error.reason, error.message)
    if args.json:
        print(json.dumps([v.to_json(with_host=hosts is not None) for v in views], ensure_ascii=False, indent=2))
    elif args.id is not None and not views[0].pending:
        print(display_text(_settled_line(views[0])))
    else:
        # Every line carries server text (property names, defaults, patterns, labels): one rule for all of it.
        print(display_text(_human(views, show_host=hosts is not None), multiline=True))
    return 0
