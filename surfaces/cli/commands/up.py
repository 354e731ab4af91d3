"""``maka up``: run the whole stack in the foreground (DESIGN.md §7; ``make run``).

``maka up --config mcp.json [--state-dir DIR] [--ports ephemeral|name=port,...] [--redis-url URL]
[--host-id H] [--no-web] [--log-level L]``

Starts Redis (a private ``redis-server`` with AOF in the state dir, unless ``--redis-url`` /
``MAKA_REDIS_URL`` names one), the Interaction service, the Capability broker, the MCP provider and
the web surface as supervised processes on loopback (defaults 50051, 50052, 50053, 8765), writes
``DIR/endpoints.json``, and prints one ready line on stdout once every health check passes::

    maka is ready: http://127.0.0.1:8765 (interaction 127.0.0.1:50051, broker 127.0.0.1:50052, state .state)

Every child's log lines are forwarded to stderr prefixed with ``[name]``; a child that dies is
reported and restarted (see :mod:`surfaces.stack.supervisor`). Ctrl-C / SIGTERM drains and stops
all of them in reverse order. Exit codes: 0 stopped by a signal; 2 usage (bad ``--ports``);
3 the stack could not start or a child kept dying (message on stderr, prefixed ``STACK_FAILED:``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from surfaces.cli.endpoints import Endpoints, add_state_dir_argument
from surfaces.stack.supervisor import Ports, Stack, StackEvent

NAME = "up"
HELP = "start the whole stack (Redis, Interaction service, broker, MCP provider, web) in the foreground"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config``, ``--state-dir``, ``--ports``, ``--redis-url``, ``--host-id``, ``--no-web``,
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
        default="default",
        metavar="SPEC",
        help="'default' (50051-50053, web 8765), 'ephemeral', or name=port,... (interaction, broker, provider, web)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("MAKA_REDIS_URL") or None,
        help="use this Redis instead of a private redis-server (default: $MAKA_REDIS_URL)",
    )
    parser.add_argument("--host-id", default=os.environ.get("MAKA_HOST_ID", "local"), help="Host id (default local)")
    parser.add_argument("--no-web", action="store_true", help="do not start the web surface")
    parser.add_argument("--log-level", default=os.environ.get("MAKA_LOG_LEVEL", "INFO"), help="children's log level")


def ready_line(endpoints: Endpoints, state_dir: Path) -> str:
    """The one line printed when the stack is up."""
    web = endpoints.web or "web surface off (use `maka tui`)"
    return f"maka is ready: {web} (interaction {endpoints.interaction}, broker {endpoints.broker}, state {state_dir})"


async def _up(args: argparse.Namespace, ports: Ports) -> int:
    stack = Stack(
        args.config,
        args.state_dir,
        ports=ports,
        redis_url=args.redis_url,
        host_id=args.host_id,
        web=not args.no_web,
        log_level=args.log_level,
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    events = stack.subscribe()
    starting = asyncio.ensure_future(stack.start())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():  # interrupted while starting: start() stops what it began
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        print("maka stopped before it was ready", file=sys.stderr)
        return 0
    stopped.cancel()
    if (error := starting.exception()) is not None:
        print(f"STACK_FAILED: {error}", file=sys.stderr)
        if "before it was ready" in str(error):
            print("  (its log lines are above; if a port is taken, try --ports ephemeral)", file=sys.stderr)
        return 3
    print(ready_line(starting.result(), args.state_dir), flush=True)
    code = 0
    gave_up = asyncio.ensure_future(_gave_up(events))
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({gave_up, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if gave_up.done():
        print(f"STACK_FAILED: {gave_up.result()} kept dying; stopping the stack", file=sys.stderr)
        code = 3
    gave_up.cancel()
    stopped.cancel()
    print("maka is stopping", file=sys.stderr, flush=True)
    await stack.stop()
    print("maka stopped", file=sys.stderr, flush=True)
    return code


async def _gave_up(events: asyncio.Queue[StackEvent]) -> str:
    while True:
        event = await events.get()
        if event.kind == "gave_up":
            return event.name


def run(args: argparse.Namespace) -> int:
    """Entry point of ``maka up``; see the module docstring."""
    try:
        ports = Ports.parse(args.ports)
    except ValueError as error:
        print(f"USAGE: {error}", file=sys.stderr)
        return 2
    return asyncio.run(_up(args, ports))
