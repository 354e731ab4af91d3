"""Credential files a test hands to a service: the tokens file every gRPC service reads
(``MAKA_AUTH_TOKENS_FILE``, docs/design.md#tokens) and the web surface's shared secret files
(``MAKA_WEB_SECRET_FILE``, an OpenID client secret file)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path


def write_tokens_file(path: Path, entries: Sequence[Mapping[str, object]]) -> Path:
    """Write ``{"tokens": entries}`` (each entry ``token``, ``roles`` and optionally ``name``, ``sessions``,
    ``acts_for``) to ``path``; returns ``path``."""
    path.write_text(json.dumps({"tokens": list(entries)}))
    return path


def write_secret_file(path: Path) -> Path:
    """Write a fresh random secret (64 hex characters and a newline) to ``path``; returns ``path``."""
    path.write_text(secrets.token_hex(32) + "\n")
    return path
