"""``maka tui``: the Textual forms surface (see :mod:`surfaces.tui.app`).

``maka tui [--session S ...] [--state-dir DIR | --interaction HOST:PORT] [--host-id ID]`` attaches to the given sessions
(default: every session the surface token may see). Exit codes: 0 quit, 3 no stack found (``NO_STACK``).
On every reconnect the address is looked up again (``endpoints.json`` is re-read unless ``--interaction``
was given), so the TUI follows a stack restarted on other ports (see :mod:`surfaces.tui.backend`). Pending
OAuth sign-ins (broker ``ListSignIns``) are shown above the forms with their full authorization URL.
"""

from __future__ import annotations

import argparse
import functools
import os

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

    async def sign_ins() -> list[SignInView]:
        """The broker's sign-in prompts (read from ``endpoints.json`` each time: the stack may restart)."""
        client = SignIns.connect(read_endpoints(args.state_dir).broker, token=os.environ.get(TOKEN_ENV) or None)
        try:
            return await client.list()
        finally:
            await client.close()

    async def server_status() -> list[dict[str, object]]:
        status = await fetch_status(read_endpoints(args.state_dir).broker)
        return [server_json(server) for server in status.servers]

    hosts = pool(args)
    app = MakaTui(
        lambda: FollowingBackend(
            lambda: interaction_target(args),
            connect=functools.partial(Interactions.connect, host_id=host_id(args), pool=hosts, surface_kind="tui"),
        ),
        session_ids=list(args.session),
        sign_ins=sign_ins,
        server_status=server_status,
        show_hosts=hosts is not None,
    )
    app.run()
    return 0
