"""``maka auth``: OAuth sign-in of the running stack's MCP servers (broker ``ListSignIns`` and friends).

- ``maka auth status [--json]`` — one line per server that uses OAuth: ``SERVER  signed_in`` or
  ``SERVER  sign_in_required  URL``.
- ``maka auth login SERVER [--timeout S]`` — prints the full authorization URL for you to open (it is
  never opened or fetched by this command) and waits until the server is signed in. The browser is sent
  back to the redirect URI the URL names: the web surface's ``/oauth/callback`` when it runs, otherwise
  this command listens on that loopback address itself and delivers the redirect with ``CompleteSignIn``.
- ``maka auth logout SERVER`` — forgets the server's stored tokens (it asks for a new sign-in).

Exit codes: 0 done; 2 usage; 3 failed, with a stable code first on stderr (``NO_STACK``, ``NOT_FOUND``:
the server uses no OAuth or is unknown, ``TIMED_OUT``, or the gRPC status name). Tokens are never printed.
The bearer token for the broker is read from ``MAKA_CALLER_TOKEN`` when set.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from urllib.parse import parse_qs, urlsplit

from maka_client import MakaError
from stack.state_dir import read_endpoints
from surfaces.common.callback_page import answer_page
from surfaces.common.sign_in import SignIns, SignInView
from surfaces.common.target import add_state_dir_argument, address

NAME = "auth"
HELP = "OAuth sign-in of MCP servers: status, login SERVER (prints the URL and waits), logout SERVER"

TOKEN_ENV = "MAKA_CALLER_TOKEN"
POLL_SECONDS = 0.25
"""How often ``login`` reads the sign-in status while it waits (bounded by ``--timeout``)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``status``, ``login SERVER``, ``logout SERVER``."""
    sub = parser.add_subparsers(dest="auth_command", metavar="ACTION", required=True)
    status = sub.add_parser("status", help="list the sign-in status of every OAuth server")
    status.add_argument("--json", action="store_true", help="print a JSON array")
    login = sub.add_parser("login", help="print the sign-in URL of SERVER and wait until it is signed in")
    login.add_argument("server")
    login.add_argument("--timeout", type=float, default=300.0, help="how long to wait, seconds (default 300)")
    logout = sub.add_parser("logout", help="forget the stored tokens of SERVER")
    logout.add_argument("server")
    for command in (status, login, logout):
        command.add_argument("--broker", default=None, type=address, metavar="HOST:PORT", help="broker address")
        add_state_dir_argument(command)


class _NotFound(Exception):
    pass


def _line(item: SignInView) -> str:
    return f"{item.server}  {item.state}  {item.authorization_url}".rstrip()


async def _find(client: SignIns, server: str) -> SignInView | None:
    return next((item for item in await client.list() if item.server == server), None)


async def _serve_callback(client: SignIns, redirect_uri: str) -> asyncio.Server | None:
    """Listen on ``redirect_uri``'s loopback host:port unless something (the web surface) already does."""
    parts = urlsplit(redirect_uri)
    host, port = parts.hostname or "", parts.port
    if host not in ("127.0.0.1", "localhost", "::1") or port is None:
        return None

    async def respond(_method: str, target: str) -> tuple[int, str]:
        query = parse_qs(urlsplit(target).query)
        values = {name: (query.get(name) or [""])[0] for name in ("code", "state", "iss", "error")}
        try:
            server = await client.complete(values["code"], values["state"], values["iss"], values["error"])
        except MakaError:
            return 400, "This sign-in is not pending."
        return 200, f"Signed in to {server}. You can close this tab."

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer_page(reader, writer, respond)

    try:
        return await asyncio.start_server(handle, host, port)
    except OSError:
        return None  # the web surface serves /oauth/callback there


async def _login(client: SignIns, server: str, timeout: float) -> int:
    item = await _find(client, server)
    if item is None:
        raise _NotFound(f"no MCP server {server!r} uses OAuth sign-in (see `maka auth status`)")
    if item.state == "signed_in":
        print(f"{server}: signed in")
        return 0
    listener = await _serve_callback(client, item.redirect_uri)
    print(f"Sign in to {server}: open this URL in your browser (check the address first):", file=sys.stderr)
    print(item.authorization_url, flush=True)
    print("waiting for the sign-in to complete…", file=sys.stderr, flush=True)
    try:
        async with asyncio.timeout(timeout):
            while True:
                await asyncio.sleep(POLL_SECONDS)
                item = await _find(client, server)
                if item is not None and item.state == "signed_in":
                    print(f"{server}: signed in", file=sys.stderr)
                    return 0
    except TimeoutError:
        print(f"TIMED_OUT: {server} was not signed in within {timeout:g} s", file=sys.stderr)
        return 3
    finally:
        if listener is not None:
            listener.close()
            with contextlib.suppress(Exception):
                await listener.wait_closed()


async def _run(args: argparse.Namespace, broker: str) -> int:
    client = SignIns.connect(broker, token=os.environ.get(TOKEN_ENV) or None)
    try:
        if args.auth_command == "status":
            items = await client.list()
            if args.json:
                print(json.dumps([item.to_json() for item in items], indent=2))
            elif items:
                print("\n".join(_line(item) for item in items))
            else:
                print("no MCP server uses OAuth sign-in")
            return 0
        if args.auth_command == "login":
            return await _login(client, args.server, args.timeout)
        await client.sign_out(args.server)
        print(f"{args.server}: signed out")
        return 0
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    """Run the action; see the module docstring for output and exit codes."""
    try:
        broker = args.broker or read_endpoints(args.state_dir).broker
    except FileNotFoundError as error:
        print(f"NO_STACK: {error}", file=sys.stderr)
        return 3
    try:
        return asyncio.run(_run(args, broker))
    except _NotFound as error:
        print(f"NOT_FOUND: {error}", file=sys.stderr)
        return 3
    except MakaError as error:
        # MakaError.message is the status code's name when the broker sent no details
        print(
            f"{error.code}: {error.message if error.message != error.code else 'the broker refused'}", file=sys.stderr
        )
        return 3
