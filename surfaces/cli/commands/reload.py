"""``maka reload``: apply an edited ``mcpServers`` file to the running stack without stopping it.

Checks the file first (as ``maka config check`` does; a bad file is refused here with one line per
problem and nothing changes), then sends SIGHUP to the MCP provider (``maka up`` forwards a SIGHUP it
gets the same way), and waits until the provider reports the new config generation. The provider
connects added servers, drains removed ones (their calls in flight may finish within
``MAKA_RELOAD_DRAIN_SECONDS``; new calls fail ``SERVER_UNAVAILABLE``), reconnects changed ones and
leaves the others untouched: their calls in flight go on.

Prints the changes (``added: a``, ``removed: b``, ``changed: c``, or ``no changes``). Exit codes: 0
applied; 2 the file is invalid; 3 no stack, no provider process known, or no new generation within
``--timeout`` seconds (stable code first on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import grpc.aio

from services.mcp_provider.config import ConfigError, check_config
from stack.state_dir import read_endpoints
from surfaces.common.server_status import fetch_status
from surfaces.common.target import add_state_dir_argument

NAME = "reload"
HELP = "re-read the MCP config: added servers connect, removed ones drain, changed ones reconnect"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--timeout`` and ``--state-dir``."""
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the provider (default 30)")
    add_state_dir_argument(parser)


async def _generation(broker: str) -> tuple[int, list[str], list[str]]:
    status = await fetch_status(broker)
    if not status.reporters:
        return 0, [], []
    reporter = max(status.reporters, key=lambda r: r.config_generation)
    return reporter.config_generation, list(reporter.config_errors), list(reporter.config_changes)


async def _reload(broker: str, pid: int, timeout: float) -> tuple[int, list[str], list[str]] | None:
    before, old_errors, _ = await _generation(broker)
    os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)  # polling a remote report, bounded by the deadline
        generation, errors, changes = await _generation(broker)
        if generation > before or (errors and errors != old_errors):
            return generation, errors, changes
    return None


def run(args: argparse.Namespace) -> int:
    """Reload; see the module docstring for output and exit codes."""
    try:
        endpoints = read_endpoints(args.state_dir)
    except FileNotFoundError as error:
        print(f"NO_STACK: {error}", file=sys.stderr)
        return 3
    pid = endpoints.pids.get("provider")
    if not endpoints.config or pid is None:
        print("NO_PROVIDER: endpoints.json names no MCP provider process or config file", file=sys.stderr)
        return 3
    try:
        check_config(Path(endpoints.config))
    except ConfigError as error:
        for problem in error.problems:
            print(f"CONFIG_INVALID: {endpoints.config}: {problem}", file=sys.stderr)
        print("nothing was changed", file=sys.stderr)
        return 2
    try:
        outcome = asyncio.run(_reload(endpoints.broker, pid, args.timeout))
    except ProcessLookupError:
        print(f"NO_PROVIDER: the MCP provider (pid {pid}) is not running", file=sys.stderr)
        return 3
    except grpc.aio.AioRpcError as error:
        print(f"{error.code().name}: the broker at {endpoints.broker} did not answer GetStatus", file=sys.stderr)
        return 3
    if outcome is None:
        print(f"TIMEOUT: the provider reported no new config within {args.timeout:g} s", file=sys.stderr)
        return 3
    generation, errors, changes = outcome
    if errors:
        for line in errors:
            print(f"CONFIG_INVALID: {line}", file=sys.stderr)
        return 2
    print(f"config generation {generation}: " + ("; ".join(changes) if changes else "no changes"))
    return 0
