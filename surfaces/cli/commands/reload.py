"""``maka reload``: apply an edited ``mcpServers`` file to the running stack without stopping it.

Sends SIGHUP to the MCP provider (``maka up`` forwards a SIGHUP it gets the same way) and waits until
the provider reports the outcome of that reload (a new ``config_reload_time`` in the broker's
``GetStatus``). The provider is the one that checks the file: it expands ``${VAR}`` from its own
environment (the stack's, not this shell's), and it records the outcome where ``maka status`` reads
it, so a rejected reload stays visible there (when, and one line per problem) until one applies. A bad
file changes nothing: the stack keeps running the previous config. The provider connects added
servers, drains removed ones (their calls in flight may finish within ``MAKA_RELOAD_DRAIN_SECONDS``;
new calls fail ``SERVER_UNAVAILABLE``), reconnects changed ones and leaves the others untouched: their
calls in flight go on.

Prints the changes (``added: a``, ``removed: b``, ``changed: c``, or ``no changes``), or for a
rejected file one ``CONFIG_INVALID: FILE: problem`` line per problem (bounded, never a value) and
``nothing was changed``. Exit codes: 0 applied; 2 the file is invalid; 3 no stack, no provider process
known, or no reload outcome within ``--timeout`` seconds (stable code first on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass

from maka_client import MakaError
from stack.state_dir import read_endpoints
from surfaces.common.server_status import config_json, fetch_status
from surfaces.common.target import add_state_dir_argument

NAME = "reload"
HELP = "re-read the MCP config: added servers connect, removed ones drain, changed ones reconnect"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--timeout`` and ``--state-dir``."""
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the provider (default 30)")
    add_state_dir_argument(parser)


@dataclass(frozen=True)
class Outcome:
    """The provider's config as the broker last heard it: the running ``generation``, when its last
    reload ended (None: none since it started), that reload's ``problems`` (rejected) or ``changes``."""

    generation: int
    reload_time: float | None
    problems: list[str]
    changes: list[str]


async def _outcome(broker: str) -> Outcome | None:
    status = await fetch_status(broker)
    if not status.reporters:
        return None
    config = config_json(max(status.reporters, key=lambda r: r.config_generation))
    last = config["lastReload"]
    return Outcome(
        config["generation"],
        None if last is None else last["time"],
        config["errors"],
        config["changes"],
    )


async def _reload(broker: str, pid: int, timeout: float) -> Outcome | None:
    before = await _outcome(broker)
    os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)  # polling a remote report, bounded by the deadline
        outcome = await _outcome(broker)
        if outcome is None or outcome.reload_time is None:
            continue
        if before is None or outcome.reload_time != before.reload_time:
            return outcome
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
        outcome = asyncio.run(_reload(endpoints.broker, pid, args.timeout))
    except ProcessLookupError:
        print(f"NO_PROVIDER: the MCP provider (pid {pid}) is not running", file=sys.stderr)
        return 3
    except MakaError as error:
        print(f"{error.code}: the broker at {endpoints.broker} did not answer GetStatus", file=sys.stderr)
        return 3
    if outcome is None:
        print(f"TIMEOUT: the provider reported no new config within {args.timeout:g} s", file=sys.stderr)
        return 3
    if outcome.problems:
        for line in outcome.problems:
            print(f"CONFIG_INVALID: {endpoints.config}: {line}", file=sys.stderr)
        print(
            f"nothing was changed: the stack keeps running config generation {outcome.generation}"
            " (`maka status` shows this rejection until a reload applies)",
            file=sys.stderr,
        )
        return 2
    changes = "; ".join(outcome.changes) if outcome.changes else "no changes"
    print(f"config generation {outcome.generation}: {changes}")
    return 0
