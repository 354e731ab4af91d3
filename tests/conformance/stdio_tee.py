"""A stdio tee for MCP servers: ``python stdio_tee.py LOG -- COMMAND [ARGS...]``.

Runs COMMAND, copies this process's stdin to its stdin and its stdout to this process's stdout,
line by line (stdio MCP is newline-delimited JSON-RPC), and appends every line to LOG as
``C->S <json>`` or ``S->C <json>``. stderr passes through. Exits with COMMAND's exit code.
Used by the legacy-peer test to prove what the MCP provider sent in ``initialize``.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import TextIO


async def _pump(reader: asyncio.StreamReader, write: TextIO | asyncio.StreamWriter, log: TextIO, tag: str) -> None:
    while line := await reader.readline():
        log.write(f"{tag} {line.decode(errors='replace').rstrip()}\n")
        log.flush()
        if isinstance(write, asyncio.StreamWriter):
            write.write(line)
            await write.drain()
        else:
            write.write(line.decode(errors="replace"))
            write.flush()
    if isinstance(write, asyncio.StreamWriter):
        write.close()


async def tee(command: list[str], log: TextIO) -> int:
    """Run ``command`` with its stdin/stdout teed to ``log``; returns its exit code."""
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    child = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert child.stdin is not None
    assert child.stdout is not None
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, child.terminate)  # never orphan the server
    to_child = asyncio.create_task(_pump(stdin, child.stdin, log, "C->S"))
    await _pump(child.stdout, sys.stdout, log, "S->C")
    to_child.cancel()
    return await child.wait()


def main(argv: list[str]) -> int:
    """``LOG -- COMMAND [ARGS...]`` → COMMAND's exit code (2 on a usage error)."""
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: stdio_tee.py LOG -- COMMAND [ARGS...]\n")
        return 2
    with open(argv[0], "a", encoding="utf-8") as log:
        return asyncio.run(tee(argv[2:], log))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
