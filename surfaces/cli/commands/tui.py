"""``maka tui``: the Textual forms surface (see :mod:`surfaces.tui.app`).

``maka tui [--session S ...] [--state-dir DIR | --interaction HOST:PORT] [--host-id ID]`` attaches to the given sessions
(default: every session the surface token may see). Exit codes: 0 quit, 3 no stack found (``NO_STACK``).
On every reconnect the address is looked up again (``endpoints.json`` is re-read unless ``--interaction``
was given), so the TUI follows a stack restarted on other ports (see :mod:`surfaces.tui.backend`). Pending
OAuth sign-ins (broker ``ListSignIns``) are shown above the forms with their full authorization URL.

A person signed in with ``maka login`` (``MAKA_OIDC_ISSUER``) is followed: the TUI reads their stored sign-in
again before every call and reconnect (renewed when its ID token expired), so a new ``maka login`` or a renewal
takes effect without restarting the TUI. A token given in ``MAKA_SURFACE_TOKEN`` is used as given.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
from collections.abc import Awaitable, Callable

from surfaces.cli.commands.pending import fail
from surfaces.common.interactions import Interactions
from surfaces.common.target import add_target_arguments, host_id, interaction_target, pool

NAME = "tui"
HELP = "answer pending forms in a terminal UI"

TOKEN_ENV = "MAKA_SURFACE_TOKEN"
"""The surface bearer token, also sent to the broker's sign-in RPCs."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--session S`` (repeatable) and the target options."""
    parser.add_argument(
        "--session", action="append", default=[], metavar="S", help="attach to this session (repeatable)"
    )
    add_target_arguments(parser)


def person_token() -> Callable[[], Awaitable[str | None]] | None:
    """What gives the ID token of the person signed in at ``MAKA_OIDC_ISSUER`` now (renewed when it expired;
    :func:`surfaces.common.login.current`), when the TUI's token is theirs (the ``maka`` entry point gave it from
    their sign-in); None when there is no issuer, nobody signed in, or ``MAKA_SURFACE_TOKEN`` was set otherwise."""
    issuer = os.environ.get("MAKA_OIDC_ISSUER", "").strip()
    started_with = os.environ.get(TOKEN_ENV)
    if not issuer or not started_with:
        return None
    # Imported only with an issuer set, as the entry point does: Authlib and the JOSE stack are slow to load.
    from surfaces.common import login

    settings = login.LoginSettings()

    async def token() -> str | None:
        sign_in = await login.current(settings, issuer)
        return sign_in.id_token if sign_in is not None else None

    try:
        theirs = asyncio.run(token())
    except (login.SignInExpired, ValueError):
        return None
    return token if theirs == started_with else None


def run(args: argparse.Namespace) -> int:
    """Run the TUI until the user quits (Ctrl+Q)."""
    # Imported when the command runs: Textual and the app would slow every `maka` start (`--help` loads all commands).
    from stack.state_dir import read_endpoints
    from surfaces.common.server_status import fetch_status, server_json
    from surfaces.common.sign_in import SignIns, SignInView
    from surfaces.tui.app import MakaTui
    from surfaces.tui.backend import FollowingBackend

    try:
        interaction_target(args)
    except (FileNotFoundError, ValueError) as error:
        return fail("NO_STACK", str(error))

    followed = person_token()

    async def current_token() -> str | None:
        if followed is not None:
            with contextlib.suppress(Exception):  # an expired sign-in: the broker's refusal says so
                return await followed()
        return os.environ.get(TOKEN_ENV) or None

    async def sign_ins() -> list[SignInView]:
        """The broker's sign-in prompts (read from ``endpoints.json`` each time: the stack may restart)."""
        client = SignIns.connect(read_endpoints(args.state_dir).broker, token=await current_token())
        try:
            return await client.list()
        finally:
            await client.close()

    async def server_status() -> list[dict[str, object]]:
        status = await fetch_status(read_endpoints(args.state_dir).broker, token=await current_token())
        return [server_json(server) for server in status.servers]

    hosts = pool(args)
    app = MakaTui(
        lambda: FollowingBackend(
            lambda: interaction_target(args),
            connect=functools.partial(Interactions.connect, host_id=host_id(args), pool=hosts, surface_kind="tui"),
            token=followed,
        ),
        session_ids=list(args.session),
        sign_ins=sign_ins,
        server_status=server_status,
        show_hosts=hosts is not None,
    )
    app.run()
    return 0
