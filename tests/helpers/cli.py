"""The ``maka`` CLI as tests run it: a real process through its entry point, bounded, its exit code and output."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKA = [sys.executable, "-m", "surfaces.cli.main"]


@dataclass
class Ran:
    """One finished ``maka`` run."""

    code: int
    out: str
    err: str

    @property
    def reason(self) -> str:
        """The stderr line with the stable code (after ``maka call``'s ``session …`` progress line)."""
        return next((line for line in self.err.splitlines() if re.match(r"^[A-Z_]+: ", line)), "")


async def maka(*argv: str, state_dir: Path | None, timeout: float = 60.0, env: dict[str, str] | None = None) -> Ran:
    """Run ``maka ARGV [--state-dir STATE]`` through its entry point (in ``env``, default this process's); bounded."""
    process = await asyncio.create_subprocess_exec(
        *MAKA,
        *argv,
        *(["--state-dir", str(state_dir)] if state_dir is not None else []),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    async with asyncio.timeout(timeout):
        out, err = await process.communicate()
    assert process.returncode is not None
    return Ran(process.returncode, out.decode(), err.decode())


async def maka_on_tier(interaction: str, token: str, *argv: str) -> tuple[int, str, str]:
    """``maka ARGV --interaction TARGET`` as a surface with ``token``, Host choice left to ARGV (no
    ``MAKA_HOST_ID`` / ``MAKA_HOST_IDS`` from this environment): exit code, stdout, stderr."""
    env = {**os.environ, "MAKA_SURFACE_TOKEN": token}
    env.pop("MAKA_HOST_ID", None)
    env.pop("MAKA_HOST_IDS", None)
    ran = await maka(*argv, "--interaction", interaction, state_dir=None, env=env)
    return ran.code, ran.out, ran.err
