"""An OAuth-protected MCP server for tests: the official conformance harness's ``auth/metadata-default``
scenario (its resource server and authorization server, whose ``/authorize`` redirects with a code
at once), started in the harness's interactive mode."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from tests.conformance.harness import HARNESS, NODE22, ROOT, require_tools


@contextmanager
def harness_oauth_server(scenario: str = "auth/metadata-default") -> Iterator[str]:
    """Run the scenario's servers; yields the MCP server URL; terminates them on exit."""
    require_tools()
    process = subprocess.Popen(
        [str(NODE22), str(HARNESS), "client", "--scenario", scenario, "--spec-version", "2026-07-28"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        url = ""
        for line in process.stdout:  # "Server URL: ..." comes first; EOF ends the loop if it exits
            found = re.match(r"Server URL: (\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url, "the harness did not start its scenario server"
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stdout.close()
