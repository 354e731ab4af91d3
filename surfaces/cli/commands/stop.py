"""``maka stop``: stop live Tool calls through the broker's ``Stop`` (RFC criterion 7).

``maka stop [INVOCATION] [--session S] [--turn T] [--all]``

Stops one call (``INVOCATION``, the id ``maka call`` printed as "call accepted (invocation ...)"), every live
invocation of a turn (``--turn``), of a whole session (default session ``default``), or of the whole Host
(``--all``, global Stop). A pending form is aborted: no retry is sent to the MCP server and no ``cancel``
answer is made up. Prints how many invocations stopped.

On a team's pool of Hosts (``--broker dns:///team-a-host:50052`` or ``ipv4:A,B``; docs/clients.md "Pools of
Hosts") every Host of the pool is asked, a draining one included: a call stops on the Host that owns it, a
session's or turn's calls on whichever Hosts run them.

Exit codes: 0 done (also when nothing was running); 2 usage (``INVOCATION`` or ``--all`` with another scope);
3 the broker refused or cannot be reached (on a pool: a Host did not answer; the others' calls are stopped), with
a stable code first on stderr (``NO_STACK``, ``UNAVAILABLE`` or another gRPC status name). The broker is
``--broker HOST:PORT``, else ``MAKA_BROKER_TARGET``, else ``endpoints.json``; the bearer token is read from
``MAKA_CALLER_TOKEN``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from maka.broker.v1 import broker_pb2
from maka_client import BrokerClient, MakaError
from surfaces.common.target import add_broker_argument, add_state_dir_argument, broker_endpoints

NAME = "stop"
HELP = "stop a live Tool call (INVOCATION), the calls of a turn, a session, or (--all) the whole Host"

TOKEN_ENV = "MAKA_CALLER_TOKEN"
TIMEOUT_SECONDS = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``INVOCATION``, ``--session``, ``--turn``, ``--all``, ``--broker`` and ``--state-dir``."""
    parser.add_argument(
        "invocation", nargs="?", default="", metavar="INVOCATION", help="stop this one call (its invocation id)"
    )
    parser.add_argument("--session", default=None, metavar="S", help="session id (default: default)")
    parser.add_argument("--turn", default="", metavar="T", help="stop only this turn of the session")
    parser.add_argument("--all", action="store_true", help="stop every live call of the Host (global Stop)")
    add_broker_argument(parser)
    add_state_dir_argument(parser)


def build_request(args: argparse.Namespace) -> broker_pb2.StopRequest:
    """The ``StopRequest`` for ``args``; raises ``ValueError`` for ``INVOCATION`` or ``--all`` combined with
    another scope."""
    if args.invocation:
        if args.all or args.session is not None or args.turn:
            raise ValueError("INVOCATION stops one call; do not combine it with --session, --turn or --all")
        return broker_pb2.StopRequest(invocation_id=args.invocation)
    if args.all:
        if args.session is not None or args.turn:
            raise ValueError("--all stops everything; do not combine it with --session or --turn")
        return broker_pb2.StopRequest(all=True)
    return broker_pb2.StopRequest(session_id=args.session or "default", turn_id=args.turn)


async def _stop(broker: str, request: broker_pb2.StopRequest) -> tuple[int, bool]:
    """How many stopped, and whether ``broker`` named a pool."""
    async with BrokerClient.from_env(broker, token=os.environ.get(TOKEN_ENV) or None) as client:
        return await client.stop(
            request.session_id,
            request.turn_id,
            all_sessions=request.all,
            invocation_id=request.invocation_id,
            timeout=TIMEOUT_SECONDS,
        ), client.pool


def run(args: argparse.Namespace) -> int:
    """Entry point of ``maka stop``; see the module docstring for output and exit codes."""
    try:
        request = build_request(args)
    except ValueError as error:
        print(f"USAGE: {error}", file=sys.stderr)
        return 2
    try:
        _, broker = broker_endpoints(args)
    except FileNotFoundError as error:
        print(f"NO_STACK: {error}", file=sys.stderr)
        return 3
    try:
        stopped, pool = asyncio.run(_stop(broker, request))
    except MakaError as error:
        print(f"{error.code}: {error.message or 'the broker refused Stop'}", file=sys.stderr)
        return 3
    if request.invocation_id:
        where = "the pool" if pool else "the Host"
        done = f"stopped call {request.invocation_id}"
        print(done if stopped else f"call {request.invocation_id} is not running on {where}")
        return 0
    if request.all:
        scope = "the pool" if pool else "the Host"
    else:
        scope = f"session {request.session_id}" + (f" turn {request.turn_id}" if request.turn_id else "")
    print(f"stopped {stopped} invocation(s) of {scope}")
    return 0
