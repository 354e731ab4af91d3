"""Another local user for the local-only stack's tests (docs/security.md "Other local users"): made with ``useradd``
when the tests run as root (``.ci/run`` does; ``scripts/setup.sh --test`` installs ``useradd``, ``runuser`` and
``curl``), and commands run as it through ``runuser``. Its probes use ``curl`` only: the test interpreter lives
where that user may not read (``/root/.pyenv``), curl speaks HTTP, HTTP/2 gRPC and unix sockets."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

OTHER_USER = "maka-probe"
"""A system account with no home and no login shell, only ever used to probe a stack."""

USERADD_NAME_IN_USE = 9
"""``useradd``'s exit status when the user exists already (useradd(8), "EXIT VALUES")."""

EMPTY_GRPC_MESSAGE = b"\x00\x00\x00\x00\x00"
"""One length-prefixed gRPC message of zero bytes: an empty ``HealthCheckRequest`` / ``ListToolsRequest``."""


def other_user() -> str:
    """The name of a local user other than this process's, created when missing. Raises ``RuntimeError`` when it
    is missing and this process may not create it (not root): run the tests as root, or create it once with
    ``sudo useradd --system --no-create-home --shell /usr/sbin/nologin maka-probe``."""
    try:
        entry = pwd.getpwnam(OTHER_USER)
    except KeyError:
        if os.geteuid() != 0:
            raise RuntimeError(
                f"user {OTHER_USER!r} is missing and only root can create it: run the tests as root or"
                f" `sudo useradd --system --no-create-home --shell /usr/sbin/nologin {OTHER_USER}`"
            ) from None
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        made = subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
            capture_output=True,
            check=False,
        )
        if made.returncode != USERADD_NAME_IN_USE:  # in use: another test process made it meanwhile
            made.check_returncode()
        entry = pwd.getpwnam(OTHER_USER)
    assert entry.pw_uid != os.geteuid(), "the probing user must not be the stack's owner"
    return OTHER_USER


@dataclass
class Probe:
    """One finished command: exit code and output."""

    code: int
    out: str
    err: str


async def run(argv: list[str], *, user: str | None = None, stdin: bytes = b"", timeout: float = 30.0) -> Probe:
    """Run ``argv`` (as ``user`` through ``runuser`` when given, else as this process's user); bounded."""
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    full = [runuser, "-u", user, "--", *argv] if user is not None else argv
    process = await asyncio.create_subprocess_exec(
        *full,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd="/",
    )
    async with asyncio.timeout(timeout):
        out, err = await process.communicate(stdin)
    assert process.returncode is not None
    return Probe(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def grpc_curl(target: str, method: str, *, token: str = "") -> list[str]:
    """A ``curl`` that sends one empty gRPC request (from stdin: :data:`EMPTY_GRPC_MESSAGE`) to ``method``
    (``/pkg.Service/Method``) at ``target`` (``unix:///abs/x.sock`` or ``host:port``) over HTTP/2 and prints the
    response headers and trailers (``grpc-status: N``)."""
    if target.startswith("unix://"):
        where = ["--unix-socket", target.removeprefix("unix://"), f"http://localhost{method}"]
    else:
        where = [f"http://{target}{method}"]
    auth = ["-H", f"authorization: Bearer {token}"] if token else []
    return [
        "curl", "-sS", "--max-time", "10", "--http2-prior-knowledge", "-X", "POST",
        "-H", "content-type: application/grpc", "-H", "te: trailers", *auth,
        "--data-binary", "@-", "-D", "-", "-o", "/dev/null", *where,
    ]  # fmt: skip


def http_curl(url: str, *, method: str = "GET", headers: dict[str, str] | None = None, body: str = "") -> list[str]:
    """A ``curl`` that prints only the HTTP status code of ``METHOD url`` (no redirects followed)."""
    extra = [arg for name, value in (headers or {}).items() for arg in ("-H", f"{name}: {value}")]
    data = ["--data-binary", body] if body else []
    return [
        "curl",
        "-sS",
        "--max-time",
        "10",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-X",
        method,
        *extra,
        *data,
        url,
    ]


def world_traversable_dir(prefix: str) -> Path:
    """A fresh folder under ``/tmp`` that every local user may enter (``0755``), so what keeps another user out
    of a state dir inside it is that state dir's own mode (a pytest ``tmp_path`` sits in a ``0700`` folder)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    folder.chmod(0o755)
    return folder
