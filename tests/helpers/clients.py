"""What the client libraries' tests share: the real Interaction service in-process (over the test's Redis, with the
settings under test: a unix socket and a tokens file, TLS, ...) and one ``pending()`` of the TypeScript client
(``clients/typescript``, built by ``make setup-node``) run by Node 22 with a given environment."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from services.core.serving import RunningServer, start_server
from services.interaction.main import build
from services.interaction.settings import Settings as InteractionSettings

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".tools" / "bin" / "node22"
TS_ENTRY = ROOT / "clients" / "typescript" / "dist" / "src" / "index.js"
TS_PENDING = (
    f"import {{ SurfaceClient }} from {json.dumps(str(TS_ENTRY))};"
    "const client = SurfaceClient.fromEnv(process.argv[1] || undefined);"
    "try { console.log(JSON.stringify(await client.pending())); }"
    "catch (error) { console.log(JSON.stringify({ code: error.code })); } finally { client.close(); }"
)
"""``SurfaceClient.fromEnv(target)`` (no target: the one the environment names) and one ``pending()``; prints the
pending list, or ``{"code": ...}`` of the error, as JSON."""


@asynccontextmanager
async def serving_interaction(settings: InteractionSettings) -> AsyncIterator[RunningServer]:
    """The Interaction service built from ``settings`` and serving in this process until the block ends."""
    running = await start_server(await build(settings), settings)
    try:
        yield running
    finally:
        await running.stop()


async def ts_pending(target: str, env: Mapping[str, str]) -> object:
    """:data:`TS_PENDING` against ``target`` (``""``: the environment's) with exactly ``env`` as the environment;
    returns what it printed, decoded. Fails the test when Node exits non-zero; bounded (60 s)."""
    process = await asyncio.create_subprocess_exec(
        str(NODE),
        "--input-type=module",
        "-e",
        TS_PENDING,
        target,
        env=dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return json.loads(out.decode().strip().splitlines()[-1])
