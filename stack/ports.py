"""The loopback ports a stack binds: :class:`Ports` for its services, ``maka up --metrics`` ports, free ports."""

from __future__ import annotations

import socket
from dataclasses import dataclass


@dataclass(frozen=True)
class Ports:
    """Loopback ports; 0 means ephemeral (the child writes the bound port to its port file)."""

    interaction: int = 50051
    broker: int = 50052
    provider: int = 50053
    """The MCP provider's gRPC health port."""
    web: int = 8765
    mcp: int = 8766
    """The MCP front door (``http://127.0.0.1:PORT/mcp``)."""

    @classmethod
    def ephemeral(cls) -> Ports:
        """Every port chosen by the OS."""
        return cls(0, 0, 0, 0, 0)

    @classmethod
    def parse(cls, text: str) -> Ports:
        """``"ephemeral"``, ``"default"`` or ``name=port,...`` (names: interaction, broker, provider, web, mcp).

        Raises ``ValueError`` naming the bad part.
        """
        if text in ("ephemeral", "0"):
            return cls.ephemeral()
        if text in ("default", ""):
            return cls()
        values: dict[str, int] = {}
        for part in text.split(","):
            name, sep, number = part.partition("=")
            name = name.strip()
            if not sep or name not in {"interaction", "broker", "provider", "web", "mcp"}:
                raise ValueError(
                    f"bad port spec {part!r}: use ephemeral or name=port (interaction, broker, provider, web, mcp)"
                )
            if not number.strip().isdigit() or not 0 <= int(number) <= 65535:
                raise ValueError(f"bad port number in {part!r}")
            values[name] = int(number)
        return cls(**values)


METRICS_ENV = "MAKA_METRICS_LISTEN"
METRICS_SERVICES = ("interaction", "broker", "provider")
"""The children that serve Prometheus ``/metrics`` when ``maka up --metrics`` asks for it."""


def parse_metrics_ports(text: str) -> dict[str, int]:
    """``maka up --metrics`` spec: ``"ephemeral"`` (every service an OS-chosen port) or
    ``name=port,...`` (names: interaction, broker, provider; a missing or 0 port is ephemeral).

    Returns ``{service: port}`` (0 = ephemeral). Raises ``ValueError`` naming the bad part.
    """
    ports = dict.fromkeys(METRICS_SERVICES, 0)
    if text in ("ephemeral", "0", ""):
        return ports
    for part in text.split(","):
        name, sep, number = part.partition("=")
        name = name.strip()
        if not sep or name not in METRICS_SERVICES:
            raise ValueError(
                f"bad metrics port spec {part!r}: use ephemeral or name=port (interaction, broker, provider)"
            )
        if not number.strip().isdigit() or not 0 <= int(number) <= 65535:
            raise ValueError(f"bad metrics port number in {part!r}")
        ports[name] = int(number)
    return ports


def free_port() -> int:
    """A loopback TCP port the OS just handed out (closed again for the child to bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
