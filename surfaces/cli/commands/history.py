"""``maka history``: the settled forms of the running stack, newest first (docs/cli.md#commands).

``maka history [--session S ...] [--limit N] [--json]`` lists what the caller may see of the Interaction
service's history (``ListHistory``): when each form settled, its Tool and provider, the outcome (the answer's
action, or why it closed), who answered (the principal - a token's name, never the token - and the surface it
used) and whether the answer reached the Tool. Never an answer value. ``--json`` prints a JSON array (see
:func:`surfaces.common.interactions.history_json`). Exit codes: 0 listed, 2 usage, 3 failed (stable code, e.g.
``UNAVAILABLE`` or ``NO_STACK``, first on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from maka_client import HistoryEntry, MakaError
from surfaces.common.form_input import plain_text
from surfaces.common.interactions import Interactions, history_json
from surfaces.common.target import add_target_arguments, host_id, interaction_target, pool
from surfaces.common.untrusted import display_text

NAME = "history"
HELP = "list settled forms, newest first (Tool, outcome, who answered, when; never a value)"
EXAMPLES = """\
  maka history                      the 20 most recent settled forms
  maka history --limit 100 --json   the last 100 as JSON"""

MAX_LIMIT = 10_000
"""Most entries one ``maka history`` lists (it reads them page by page)."""
_PAGE = 500
"""Entries asked for per ``ListHistory`` page (the service's maximum)."""


def _limit(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_LIMIT}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--session S`` (repeatable), ``--limit N``, ``--json``, ``--state-dir``, ``--interaction``."""
    parser.add_argument("--session", action="append", default=[], metavar="S", help="only this session (repeatable)")
    parser.add_argument("--limit", type=_limit, default=20, metavar="N", help="list at most N forms (default 20)")
    parser.add_argument("--json", action="store_true", help="print a JSON array")
    add_target_arguments(parser)


async def _read(
    target: str, host: str, hosts: tuple[str, ...] | None, sessions: list[str], limit: int
) -> list[HistoryEntry]:
    """The newest ``limit`` entries (in a pool, a page holds the newest of every Host: sorted, then cut)."""
    entries: list[HistoryEntry] = []
    token = ""
    async with Interactions.connect(target, host_id=host, pool=hosts, surface_kind="cli") as client:
        while len(entries) < limit:
            page = await client.history(sessions, page_size=min(limit - len(entries), _PAGE), page_token=token)
            entries.extend(page.entries)
            token = page.next_page_token
            if not token:
                break
    entries.sort(key=lambda e: e.settled_at.timestamp() if e.settled_at is not None else 0.0, reverse=True)
    return entries[:limit]


def _outcome(entry: HistoryEntry) -> str:
    if entry.state != "answered":
        return f"closed: {entry.close_reason}"
    action = entry.action.value if entry.action is not None else "answered"
    if entry.delivery == "lost":
        return f"{action}, lost ({entry.delivery_lost_reason})"
    return f"{action}, {entry.delivery or 'pending'}"


def _who(entry: HistoryEntry) -> str:
    who = entry.answered_by
    if who is None:
        return "-"
    kind = "" if who.principal_kind == "token" else f" ({who.principal_kind})"
    if who.via:
        kind = f" ({who.principal_kind}, through {who.via})"
    return f"{who.principal}{kind} via {who.surface_kind or 'unknown'}"


def _human(entries: list[HistoryEntry]) -> str:
    if not entries:
        return "no settled forms"
    rows = [("SETTLED (UTC)", "TOOL", "OUTCOME", "ANSWERED BY", "SESSION", "ID")]
    for entry in entries:
        settled = entry.settled_at.strftime("%Y-%m-%d %H:%M:%S") if entry.settled_at is not None else "-"
        tool = plain_text(entry.tool_name, keep_newlines=False)
        rows.append(
            (
                settled,
                tool,
                _outcome(entry),
                plain_text(_who(entry), keep_newlines=False),
                entry.session_id,
                entry.interaction_id,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]) for row in rows
    )


def run(args: argparse.Namespace) -> int:
    """List settled forms; see the module docstring for output and exit codes."""
    try:
        target = interaction_target(args)
    except (FileNotFoundError, ValueError) as error:
        print(f"NO_STACK: {error}", file=sys.stderr)
        return 3
    try:
        entries = asyncio.run(_read(target, host_id(args), pool(args), list(args.session), args.limit))
    except MakaError as error:
        print(f"{error.reason}: {error.message}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps([history_json(e) for e in entries], ensure_ascii=False, indent=2))
    else:
        print(display_text(_human(entries), multiline=True))
    return 0
