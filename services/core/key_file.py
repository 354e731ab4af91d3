"""Key files: one base64-encoded AES-256 key per file, a Kubernetes Secret or written by ``maka up``
(docs/security.md). Used by the OAuth token vault and by the sealing of answer values in Redis."""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path

KEY_BYTES = 32
"""AES-256-GCM key size; the key file holds it base64-encoded (``maka up`` writes one, mode 0600)."""


class KeyFileError(ValueError):
    """The key file is missing, unreadable or not a base64 32-byte key (the service refuses to start)."""


def generate_key_file(path: Path) -> None:
    """Write a fresh random key to ``path`` (mode 0600) unless it exists."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode() + "\n")


def read_key_file(path: Path, what: str = "a") -> bytes:
    """The 32-byte key in ``path`` (base64); ``what`` names the key in errors (``"an OAuth"``).
    Raises :class:`KeyFileError`."""
    try:
        key = base64.b64decode(path.read_text(encoding="ascii").strip(), validate=True)
    except (OSError, UnicodeDecodeError, binascii.Error):
        raise KeyFileError(f"cannot read {what} key from {path}") from None
    if len(key) != KEY_BYTES:
        raise KeyFileError(f"the key in {path} is not {KEY_BYTES} bytes")
    return key
