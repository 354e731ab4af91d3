"""``maka web``: serve the browser forms surface (see :mod:`surfaces.web.app`) in the foreground.

``maka web [--session S ...] [--listen HOST:PORT] [--state-dir DIR | --interaction HOST:PORT]`` starts the
web surface against the stack's Interaction service and prints its URL. Settings not given as options
come from ``MAKA_*`` variables (:class:`surfaces.web.settings.WebSettings`: ``MAKA_WEB_LISTEN``, default
``127.0.0.1:8765``; ``MAKA_WEB_PORT_FILE``; ``MAKA_SURFACE_TOKEN``; ``MAKA_SESSIONS``). On the stack of a
``maka up`` (its state dir) the page needs that stack's owner token, as ``maka up``'s own does: the printed URL
carries it (``/?token=...``; docs/security.md "Other local users"). Exit codes: 0 stopped
by SIGINT/SIGTERM, 2 bad option, 3 no stack found (``NO_STACK``) or the address cannot be bound (``BIND_FAILED``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from pydantic import ValidationError

from services.core.settings import settings_problem
from stack.state_dir import read_endpoints
from surfaces.cli.commands.pending import fail
from surfaces.common.target import add_target_arguments, host_id, interaction_target, local_owner_token
from surfaces.web.main import build, start_web
from surfaces.web.settings import WebSettings

NAME = "web"
HELP = "serve the browser forms surface (loopback by default)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--session S`` (repeatable), ``--listen HOST:PORT`` and the target options."""
    parser.add_argument(
        "--session", action="append", default=[], metavar="S", help="show this session's forms (repeatable)"
    )
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=None,
        help="address to bind (default: $MAKA_WEB_LISTEN or 127.0.0.1:8765)",
    )
    add_target_arguments(parser)


def settings_from(args: argparse.Namespace) -> WebSettings:
    """The web settings: ``MAKA_*`` variables, overridden by the options given.

    Raises ``FileNotFoundError``/``ValueError`` when no Interaction service can be found, and
    ``pydantic.ValidationError`` for a malformed ``MAKA_*`` value.
    """
    overrides: dict[str, object] = {}
    if args.interaction or "MAKA_INTERACTION_TARGET" not in os.environ:
        overrides["interaction_target"] = interaction_target(args)
    if "MAKA_BROKER_TARGET" not in os.environ and not args.interaction:
        with contextlib.suppress(FileNotFoundError, ValueError, TypeError):
            overrides["broker_target"] = read_endpoints(args.state_dir).broker
    if args.host_id or "MAKA_HOST_ID" not in os.environ:
        overrides["host_id"] = host_id(args)
    if args.hosts is not None:
        overrides["host_ids"] = args.hosts
    elif args.host_id:
        overrides["host_ids"] = ""  # an explicit Host wins over $MAKA_HOST_IDS
    if args.listen:
        overrides["web_listen"] = args.listen
    if args.session:
        overrides["sessions"] = list(args.session)
    settings = WebSettings()
    return settings.model_copy(update=overrides)


def naming_the_owner_token(settings: WebSettings, args: argparse.Namespace) -> WebSettings:
    """``settings`` whose sign-in page names the owner token and the tokens file of the ``maka up`` stack in
    ``args.state_dir`` (``MAKA_WEB_OWNER_TOKENS_FILE``, unless set), for a page signing in with that token."""
    if settings.web_owner_tokens_file is not None:
        return settings
    with contextlib.suppress(FileNotFoundError, ValueError, TypeError, OSError):
        tokens = read_endpoints(args.state_dir).tokens
        if tokens:
            return settings.model_copy(update={"web_owner_tokens_file": Path(tokens)})
    return settings


async def _serve(settings: WebSettings, owner_token: str | None = None) -> None:
    app = await build(settings)
    try:
        running = await start_web(app, settings)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, running.request_stop)
        # the page of a `maka up` stack needs its owner's token: the URL that signs the browser in, as maka up's
        url = f"{running.url}/?token={owner_token}" if owner_token else running.url
        print(f"maka web: {url}  (Ctrl+C to stop)", flush=True)
        await running.task
    finally:
        await app.close()


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    try:
        settings = settings_from(args)
        settings.listen_host_port()
    except (FileNotFoundError, ValueError, ValidationError) as error:
        if isinstance(error, FileNotFoundError) or "endpoints" in str(error):
            return fail("NO_STACK", str(error))
        print(f"maka web: {settings_problem(error) if isinstance(error, ValidationError) else error}", file=sys.stderr)
        return 2
    owner = local_owner_token(args)
    owner = owner if owner and settings.surface_token.get_secret_value() == owner else None
    try:
        asyncio.run(_serve(naming_the_owner_token(settings, args) if owner else settings, owner))
    except RuntimeError as error:
        return fail("BIND_FAILED", str(error))
    except KeyboardInterrupt:
        pass
    return 0
