"""``python -m tests.conformance.client URL``: the client the official MCP conformance harness runs.

Harness client contract (``@modelcontextprotocol/conformance@0.2.0-alpha.12``): the scenario name is in
``MCP_CONFORMANCE_SCENARIO``, the protocol version in ``MCP_CONFORMANCE_PROTOCOL_VERSION``, optional
scenario data (e.g. the arguments of ``http-custom-headers``, pre-registered OAuth client credentials)
in ``MCP_CONFORMANCE_CONTEXT``, the scenario server's URL is the last argument, and the client exits 0
when done. This module starts the whole stack in-process (private redis-server, Interaction service,
broker, MCP provider pointed at the URL), an automatic answering surface that accepts every form with
its defaults and completes every sign-in prompt, makes the calls the scenario expects through the
broker, prints one JSON line per call, and stops everything. It is test code, not a ``maka`` command.

Exit codes: 0 every call met the scenario's plan; 1 a call did not (details on stdout);
2 usage error (no URL, unknown scenario or version); 3 the stack did not start or the run timed out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

SCENARIO_ENV = "MCP_CONFORMANCE_SCENARIO"
VERSION_ENV = "MCP_CONFORMANCE_PROTOCOL_VERSION"
DEFAULT_VERSION = "2025-11-25"
"""What the harness sends when run without ``--spec-version``."""


def build_parser() -> argparse.ArgumentParser:
    """``SERVER_URL`` plus optional overrides of the harness environment variables."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.conformance.client",
        description="MCP conformance-harness client: run one harness scenario through the whole stack",
    )
    parser.add_argument("server_url", help="the scenario server URL (the harness appends it)")
    parser.add_argument("--scenario", default=None, help=f"scenario name (default: ${SCENARIO_ENV})")
    parser.add_argument(
        "--protocol-version", default=None, help=f"protocol version (default: ${VERSION_ENV} or {DEFAULT_VERSION})"
    )
    parser.add_argument("--timeout", type=float, default=90.0, help="bound of the whole run, seconds (default 90)")
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=30.0,
        help="how long the MCP provider may take to connect to the server, seconds (default 30)",
    )
    parser.add_argument("--log-level", default="WARNING", help="stack log level on stderr (default WARNING)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenario; returns the exit code documented in the module docstring."""
    from services.core import logs
    from stack.errors import StackError
    from tests.conformance.client import runner
    from tests.conformance.client.scenarios import UnsupportedScenario

    args = build_parser().parse_args(argv)
    scenario = args.scenario or os.environ.get(SCENARIO_ENV, "")
    version = args.protocol_version or os.environ.get(VERSION_ENV) or DEFAULT_VERSION
    if not scenario:
        print(f"conformance-client: no scenario (set {SCENARIO_ENV} or pass --scenario)", file=sys.stderr)
        return 2
    logs.configure("conformance-client", args.log_level)
    try:
        ok = asyncio.run(
            runner.run(
                args.server_url,
                scenario,
                version,
                out=sys.stdout,
                timeout=args.timeout,
                connect_timeout=args.connect_timeout,
            )
        )
    except UnsupportedScenario as error:
        print(f"conformance-client: {error}", file=sys.stderr)
        return 2
    except StackError as error:
        print(f"conformance-client: stack_failed: {error}", file=sys.stderr)
        return 3
    except TimeoutError:
        print(f"conformance-client: timed_out: no complete run within {args.timeout} s", file=sys.stderr)
        return 3
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
