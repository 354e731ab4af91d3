"""Settings of the web surface (``maka web`` / ``python -m surfaces.web.main``), from ``MAKA_*`` variables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class WebSettings(BaseSettings):
    """How the web surface listens, which Interaction service it reads, and who may use it."""

    model_config = SettingsConfigDict(env_prefix="MAKA_", use_attribute_docstrings=True, extra="ignore")

    interaction_target: str = "127.0.0.1:50051"
    """``host:port`` of the Interaction service (``maka web`` reads it from ``endpoints.json`` when unset)."""
    broker_target: str = ""
    """``host:port`` of the Capability broker, for the server status and the activity list (``GetStatus``);
    empty hides both (``maka web`` reads it from ``endpoints.json`` when unset)."""
    host_id: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]*$")
    """The Runtime Host whose forms the page shows and answers (``host_id`` of every request). Empty = the
    Interaction tier's only Host, or else the only one the surface token names (docs/design.md, "Many Hosts")."""
    web_listen: str = "127.0.0.1:8765"
    """``host:port`` the web page binds; loopback by default. Port 0 picks a free one (see ``web_port_file``)."""
    web_port_file: Path | None = None
    """Where to write the bound port once serving (for port 0)."""
    surface_token: SecretStr = SecretStr("")
    """Surface bearer token. When set, the page needs a login (HttpOnly SameSite=Strict cookie) or
    ``Authorization: Bearer``, and the token is sent to the Interaction service as the surface role."""
    sessions: Annotated[list[str], NoDecode] = []
    """Session ids whose forms are shown (comma-separated or a JSON list); empty = every visible session."""
    log_level: str = "INFO"
    """Python logging level."""

    @field_validator("sessions", mode="before")
    @classmethod
    def _split_sessions(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                parsed: object = json.loads(text)
                return parsed
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    def listen_host_port(self) -> tuple[str, int]:
        """``web_listen`` split into ``(host, port)``; ``[::1]:8765`` style IPv6 is accepted.

        Raises ``ValueError`` for a value without a numeric port.
        """
        host, sep, port = self.web_listen.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"MAKA_WEB_LISTEN must be host:port, got {self.web_listen!r}")
        return host.strip("[]") or "127.0.0.1", int(port)
