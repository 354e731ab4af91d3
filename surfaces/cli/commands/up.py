"""``maka up``: run the whole stack in the foreground (docs/design.md#running-it; ``make run``).

``maka up --config mcp.json [--state-dir DIR] [--ports ephemeral|name=port,...] [--redis-url URL]
[--redis-mode standalone|sentinel|cluster] [--host-id H] [--no-web] [--no-mcp] [-v] [--log-level L]
[--metrics [ephemeral|name=port,...]]``

One stack per state dir: ``maka up`` holds an exclusive lock on ``DIR/maka.lock`` for its whole life;
a second one on the same dir exits 3 with ``STACK_RUNNING: a stack already runs in DIR (pid N); ...``
and touches nothing. ``MAKA_METRICS_LISTEN`` is not passed to the children (they would all bind one
port); ``--metrics`` gives the Interaction service, the broker and the MCP provider each their own
``/metrics`` port, listed in ``endpoints.json`` (``"metrics"``) and in the ready line.

Starts Redis (a private ``redis-server`` with AOF in the state dir, unless ``--redis-url`` /
``MAKA_REDIS_URL`` names one), the Interaction service, the Capability broker, the MCP provider, the
web surface and the MCP front door (the Host's Tools over MCP Streamable HTTP, docs/mcp-front-door.md; off with
``--no-mcp``) as supervised processes, writes ``DIR/endpoints.json`` (the front door's URL under ``"mcp"``), and
prints one ready line on stdout once every health check passes::

    maka is ready: http://127.0.0.1:8765/?token=T (mcp http://127.0.0.1:8766/mcp,
    interaction unix:///abs/.state/sock/interaction.sock, broker unix:///abs/.state/sock/broker.sock, state .state)

The stack is reachable only by the user who started it (:mod:`stack.access`, docs/security.md): ``DIR`` is made
0700, the gRPC services listen on unix sockets in ``DIR/sock/``, and the web page (loopback 8765) and the MCP
front door (loopback 8766) need the owner's token, generated per stack into ``DIR/tokens.json`` (0600): the page
through the printed URL (exchanged for a cookie), the front door as ``Authorization: Bearer``. With ``--ports``
setting gRPC ports (``default``, ``ephemeral``, or naming interaction, broker or provider; ``web=P,mcp=P`` alone
keeps the sockets) the gRPC services listen on loopback TCP instead (50051, 50052, 50053) and each requires that token;
the ``maka`` commands and the client libraries read it through ``endpoints.json``.

SIGHUP (or ``maka reload``) makes the MCP provider re-read the config and apply it without a restart.
A bad config file is refused before anything starts, one ``CONFIG_INVALID:`` line per problem.

Before the ready line only the children's warnings and errors are shown (``-v`` or an explicit
``--log-level`` shows their start-up lines too); after it, every child's log line is forwarded to stderr
(``--log-format human|json``, see :mod:`surfaces.cli.logview`; third-party output such as Redis's banner
goes to ``DIR/logs/``); a child that dies is reported and restarted (see :mod:`stack.supervisor`); one that
exits while starting is named with its last meaningful output line, a taken port with how to choose others.
Ctrl-C / SIGTERM drains and stops
all of them in reverse order, even when stdout/stderr were closed by their reader (``| tee`` killed by
the same Ctrl-C); on Linux the children also get SIGTERM if ``maka up`` itself dies (``kill -9``).
Exit codes: 0 stopped by a signal; 2 usage (bad ``--ports`` / ``--metrics``); 3 the stack could not
start, a child kept dying (``STACK_FAILED:``), another stack holds the state dir (``STACK_RUNNING:``)
or another broker of the same Host id on the same Redis superseded this stack's broker
(``HOST_SUPERSEDED:``; the broker exited 75 and is not restarted, which would fence the other back).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import sys
from pathlib import Path

from stack.access import Access, access_for_ports
from stack.ports import Ports, parse_metrics_ports
from stack.state_dir import Endpoints, StackRunning, StateDirLock
from stack.supervisor import ChildExited, StackEvent
from stack.topology import SUPERSEDED, ConfigInvalid, Stack
from surfaces.cli import logview
from surfaces.common.target import add_state_dir_argument

_PORT_TAKEN = re.compile(r"cannot bind|address (?:already )?in use|EADDRINUSE", re.IGNORECASE)
"""A child's last output line that says its port is taken."""

NAME = "up"
HELP = "start the whole stack (Redis, Interaction service, broker, MCP provider, web, MCP endpoint) in the foreground"
EXAMPLES = """\
  maka up --config examples/mcp.json
  maka up --config mcp.json --ports web=0,mcp=0            when 8765 or 8766 are taken
  maka up --config mcp.json --ports ephemeral              gRPC on loopback TCP too (each needs the token)
  maka up --config mcp.json --ports interaction=6051,web=9000 --state-dir /tmp/maka
  maka up --config mcp.json -v                              show the services' start-up lines
  make run PORTS=ephemeral UP_ARGS='-v'                     the same through make"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config``, ``--state-dir``, ``--ports``, ``--redis-url``, ``--host-id``, ``--no-web``, ``--no-mcp``,
    ``--log-level``."""
    parser.add_argument(
        "--config",
        type=Path,
        default=Path(os.environ["MAKA_MCP_CONFIG"]) if os.environ.get("MAKA_MCP_CONFIG") else None,
        required=not os.environ.get("MAKA_MCP_CONFIG"),
        metavar="MCP_JSON",
        help="mcpServers JSON for the MCP provider (default: $MAKA_MCP_CONFIG), e.g. examples/mcp.json",
    )
    add_state_dir_argument(parser)
    parser.add_argument(
        "--ports",
        default=None,
        metavar="SPEC",
        help="'default' (50051-50053, web 8765, mcp 8766), 'ephemeral', or name=port,... (interaction, broker,"
        " provider, web, mcp). Without it, or naming only web/mcp, the gRPC services listen on unix sockets in the"
        " state dir; with gRPC ports they listen on loopback TCP and each requires the owner's token"
        " (STATE_DIR/tokens.json)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("MAKA_REDIS_URL") or None,
        help="use this Redis instead of a private redis-server (default: $MAKA_REDIS_URL)",
    )
    parser.add_argument(
        "--redis-mode",
        choices=("standalone", "sentinel", "cluster"),
        default=os.environ.get("MAKA_REDIS_MODE") or "standalone",
        help="how --redis-url is read: a URL (standalone), or comma-separated host:port sentinels / cluster seed"
        " nodes (default: $MAKA_REDIS_MODE or standalone; sentinel/cluster need --redis-url)",
    )
    parser.add_argument("--host-id", default=os.environ.get("MAKA_HOST_ID", "local"), help="Host id (default local)")
    parser.add_argument("--no-web", action="store_true", help="do not start the web surface")
    parser.add_argument(
        "--no-mcp", action="store_true", help="do not serve the Host's Tools over MCP (the front door at /mcp)"
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("MAKA_LOG_LEVEL") or None,
        help="children's log level (default: $MAKA_LOG_LEVEL or INFO); when given, every line is shown while"
        " starting too",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show the services' start-up lines (by default only warnings and errors before the ready line)",
    )
    parser.add_argument(
        "--log-format",
        choices=logview.FORMATS,
        default=os.environ.get("MAKA_LOG_FORMAT", "auto"),
        help="human lines (default on a terminal) or JSON lines (default otherwise); "
        "third-party output goes to STATE_DIR/logs/",
    )
    parser.add_argument(
        "--metrics",
        nargs="?",
        const="ephemeral",
        default=None,
        metavar="SPEC",
        help="serve Prometheus /metrics per service: 'ephemeral' (default) or name=port,... "
        "(interaction, broker, provider); URLs go to endpoints.json and the ready line",
    )


def ready_line(endpoints: Endpoints, state_dir: Path, token: str = "") -> str:
    """The one line printed when the stack is up; with the owner's ``token`` the web address carries it
    (``/?token=...``: opening it signs the browser in, as Jupyter's does)."""
    web = endpoints.web or "web surface off (use `maka tui`)"
    if endpoints.web and token:
        web = f"{endpoints.web}/?token={token}"
    metrics = ""
    if endpoints.metrics:
        metrics = "; metrics " + ", ".join(f"{name} {url}" for name, url in endpoints.metrics.items())
    mcp = f"mcp {endpoints.mcp}, " if endpoints.mcp else ""
    return (
        f"maka is ready: {web} ({mcp}interaction {endpoints.interaction}, broker {endpoints.broker},"
        f" state {state_dir}{metrics})"
    )


def _say(text: str, *, err: bool = True) -> None:
    """Print one line; a closed stdout/stderr (the reader went away) must never stop the shutdown."""
    with contextlib.suppress(BrokenPipeError, ValueError, OSError):
        print(text, file=sys.stderr if err else sys.stdout, flush=True)


async def _up(args: argparse.Namespace, ports: Ports, access: Access, metrics: dict[str, int] | None) -> int:
    view = logview.LogView(
        args.state_dir.resolve(),
        getattr(args, "log_format", "auto"),
        quiet=not (getattr(args, "verbose", False) or args.log_level),
    )
    stack = Stack(
        args.config,
        args.state_dir,
        ports=ports,
        redis_url=args.redis_url,
        redis_mode=args.redis_mode,
        host_id=args.host_id,
        web=not args.no_web,
        mcp=not getattr(args, "no_mcp", False),
        log_level=args.log_level or "INFO",
        metrics=metrics,
        sink=view,
        access=access,
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, lambda: _reload(stack))
    events = stack.subscribe()
    starting = asyncio.ensure_future(stack.start())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():  # interrupted while starting: start() stops what it began
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        _say("maka stopped before it was ready")
        return 0
    stopped.cancel()
    if isinstance(error := starting.exception(), ConfigInvalid):
        for problem in error.problems:
            _say(f"CONFIG_INVALID: {args.config}: {problem}")
        _say("  (`maka config check FILE` checks a file without starting anything)")
        return 3
    if error is not None:
        _say(f"STACK_FAILED: {error}")
        if isinstance(error, ChildExited) and _PORT_TAKEN.search(error.cause):
            _say(
                "  (a port is taken: choose others with --ports NAME=P,..., e.g. --ports web=9000,mcp=9001;"
                " with make: make run PORTS=web=9000,mcp=9001)"
            )
        elif isinstance(error, ChildExited):
            log = args.state_dir.resolve() / "logs" / f"{error.name}.log"
            _say(f"  (its log lines are above; the rest of its output, if any, is in {log})")
        elif "before it was ready" in str(error) or "not ready within" in str(error):
            _say("  (its log lines are above; if a port is taken, choose others: --ports web=9000,mcp=9001)")
        return 3
    code = 0
    try:
        _say(ready_line(starting.result(), args.state_dir, stack.owner_token), err=False)
        view.started()
        gave_up = asyncio.ensure_future(_gave_up(events))
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({gave_up, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if gave_up.done():
            event = gave_up.result()
            if event.detail.startswith(SUPERSEDED):
                _say(f"{event.detail}; stopping this stack")
            else:
                _say(f"STACK_FAILED: {event.name} kept dying; stopping the stack")
            code = 3
        gave_up.cancel()
        stopped.cancel()
        _say("maka is stopping")
    finally:  # whatever happened above (a write error, a cancel), the children are stopped
        await stack.stop()
    _say("maka stopped")
    return code


def _reload(stack: Stack) -> None:
    """SIGHUP: forward it to the MCP provider, which re-reads the config (``maka reload``)."""
    if stack.reload_config():
        _say("maka: reloading the MCP config (SIGHUP sent to the provider)")
    else:
        _say("maka: no MCP provider is running; nothing to reload")


async def _gave_up(events: asyncio.Queue[StackEvent]) -> StackEvent:
    while True:
        event = await events.get()
        if event.kind == "gave_up":
            return event


def run(args: argparse.Namespace) -> int:
    """Entry point of ``maka up``; see the module docstring."""
    try:
        ports = Ports.parse(args.ports) if args.ports is not None else Ports()
    except ValueError as error:
        print(f"USAGE: {error}", file=sys.stderr)
        return 2
    try:
        metrics = parse_metrics_ports(args.metrics) if args.metrics is not None else None
    except ValueError as error:
        print(f"USAGE: {error}", file=sys.stderr)
        return 2
    if args.redis_mode != "standalone" and not args.redis_url:
        print(f"USAGE: --redis-mode {args.redis_mode} needs --redis-url (the sentinels or seed nodes)", file=sys.stderr)
        return 2
    lock = StateDirLock(args.state_dir.resolve())
    try:
        lock.acquire()
    except StackRunning as error:
        print(f"STACK_RUNNING: {error}", file=sys.stderr)
        return 3
    except OSError as error:
        print(f"STACK_FAILED: cannot lock {lock.path}: {error}", file=sys.stderr)
        return 3
    try:
        # gRPC on unix sockets in the owner-only state dir, unless TCP ports were asked for: then tokens
        return asyncio.run(_up(args, ports, access_for_ports(args.ports), metrics))
    finally:
        lock.release()
