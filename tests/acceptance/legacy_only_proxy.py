"""A stdio proxy that makes a dual-era SDK MCP server legacy-only, logging every JSON-RPC line.

Usage::

    python -m tests.acceptance.legacy_only_proxy LOG -- COMMAND [ARGS...]

A ``server/discover`` request never reaches the server: the proxy answers it with JSON-RPC
``-32601 Method not found`` itself, exactly as a server of the ``initialize``-only era
(<= 2025-11-25) does, so a dual-era client (``era: auto``) falls back to ``initialize``
(MCP 2026-07-28 ``transports/stdio`` "dual-era clients"). Every other line is relayed unchanged.
Each line is appended to ``LOG`` as ``C->S <json>`` or ``S->C <json>`` (the probe and its local
answer too), so tests can assert that no frame claims elicitation.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

_LIMIT = 64 * 1024 * 1024


def _log(log: Path, direction: str, line: bytes) -> None:
    with log.open("ab") as out:
        out.write(direction.encode() + b" " + line.rstrip(b"\n") + b"\n")


async def main() -> int:
    argv = sys.argv[1:]
    split = argv.index("--")
    log, command = Path(argv[0]), argv[split + 1 :]
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=_LIMIT
    )
    assert process.stdin is not None
    assert process.stdout is not None
    out_lock = asyncio.Lock()

    async def to_client(line: bytes) -> None:
        async with out_lock:
            _log(log, "S->C", line)
            sys.stdout.buffer.write(line if line.endswith(b"\n") else line + b"\n")
            sys.stdout.buffer.flush()

    async def client_to_server() -> None:
        assert process.stdin is not None
        while line := await stdin.readline():
            _log(log, "C->S", line)
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("method") == "server/discover" and "id" in message:
                error = {"code": -32601, "message": "Method not found"}
                await to_client(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}).encode())
                continue
            process.stdin.write(line)
            await process.stdin.drain()
        process.stdin.close()

    async def server_to_client() -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            await to_client(line)

    upstream = asyncio.create_task(client_to_server())
    downstream = asyncio.create_task(server_to_client())
    await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
    if downstream.done():
        upstream.cancel()
    else:
        await downstream
    return await process.wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
