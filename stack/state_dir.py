"""Where a running stack is: ``<state dir>/endpoints.json``, written by ``maka up``.

Every other command finds the stack through ``--state-dir`` or ``MAKA_STATE_DIR`` (default
``./.state``). Shape::

    {"interaction": "127.0.0.1:50051", "broker": "127.0.0.1:50052",
     "web": "http://127.0.0.1:8765", "redis_url": "unix:///.../redis.sock",
     "host_id": "local", "pids": {"interaction": 123, ...},
     "provider": "127.0.0.1:50053", "config": "/abs/mcp.json",
     "metrics": {"interaction": "http://127.0.0.1:P/metrics", ...}}   # only with `maka up --metrics`
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_STATE_DIR = Path(".state")
ENDPOINTS_FILE = "endpoints.json"


@dataclass
class Endpoints:
    """Addresses of one running stack."""

    interaction: str
    """``host:port`` of the Interaction service."""
    broker: str
    """``host:port`` of the Capability broker."""
    web: str = ""
    """Base URL of the web surface (empty when not running)."""
    redis_url: str = ""
    host_id: str = "local"
    pids: dict[str, int] = field(default_factory=lambda: dict[str, int]())
    metrics: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    """Prometheus ``/metrics`` URL of each service (``maka up --metrics``; empty otherwise)."""
    provider: str = ""
    """``host:port`` of the MCP provider's health endpoint (empty when unknown)."""
    config: str = ""
    """Absolute path of the ``mcpServers`` file the provider reads (``maka reload`` checks it first)."""


def add_state_dir_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--state-dir`` (default: ``$MAKA_STATE_DIR`` or ``./.state``)."""
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("MAKA_STATE_DIR", str(DEFAULT_STATE_DIR))),
        help="folder of the running stack's endpoints.json (default: $MAKA_STATE_DIR or ./.state)",
    )


BROKER_ENV = "MAKA_BROKER_TARGET"


def add_broker_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--broker HOST:PORT`` (default: ``$MAKA_BROKER_TARGET``, else the stack's ``endpoints.json``)."""
    parser.add_argument(
        "--broker",
        default=None,
        metavar="HOST:PORT",
        help="broker address, e.g. through a proxy or in a cluster (default: $MAKA_BROKER_TARGET, else endpoints.json)",
    )


def broker_endpoints(args: argparse.Namespace) -> tuple[Endpoints, str]:
    """The stack's endpoints (only a broker address when none runs locally) and the broker to dial:
    ``--broker``, else ``$MAKA_BROKER_TARGET``, else ``endpoints.json``. Raises ``FileNotFoundError``
    (with a hint) when none of them names a broker."""
    explicit: str | None = args.broker or os.environ.get(BROKER_ENV) or None
    try:
        endpoints = read_endpoints(args.state_dir)
    except FileNotFoundError:
        if explicit is None:
            raise
        endpoints = Endpoints(interaction="", broker=explicit)
    return endpoints, explicit or endpoints.broker


def write_endpoints(state_dir: Path, endpoints: Endpoints) -> Path:
    """Write ``endpoints.json`` atomically; returns its path."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / ENDPOINTS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(endpoints), indent=2))
    tmp.replace(path)
    return path


def read_endpoints(state_dir: Path) -> Endpoints:
    """Read ``endpoints.json``. Raises ``FileNotFoundError`` with a hint when no stack runs there."""
    path = state_dir / ENDPOINTS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no running stack: {path} not found (start one with `maka up` or `make run`)")
    data = json.loads(path.read_text())
    known = {f for f in Endpoints.__dataclass_fields__}
    return Endpoints(**{k: v for k, v in data.items() if k in known})
