"""Key files: one base64-encoded AES-256 key per file, a Kubernetes Secret or written by ``maka up``
(docs/security.md). Used by the OAuth token vault and by the sealing of answer values in Redis.

The answer key may also be a key ring (:func:`read_key_ring`): several keys with ids, the last one sealing
new records and every one opening them, so the key rotates (:func:`rotate_key_ring`, ``maka answer-key``)
without losing the answers still in retention."""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from dataclasses import dataclass
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


KEY_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
"""What a key id of a key ring may be (it is stored in front of every blob sealed with the key)."""
STAGED = "staged"
"""The mark after a ring line whose key opens but does not seal yet (``maka answer-key rotate --staged``)."""
_RING_HEADER = (
    "# Maka answer key ring: one '<id> <base64 AES-256 key>' per line, the last unmarked one seals new\n"
    "# records, every one opens them; a line ending 'staged' opens only (docs/security.md).\n"
)


@dataclass(frozen=True, slots=True)
class KeyRing:
    """Keys by id, in file order, and the id of the one that seals (``current``).

    A key file of today's format (one bare base64 line) is a ring of one key with id ``""``: blobs are then
    sealed without a key id, exactly as before rings existed."""

    keys: dict[str, bytes]
    current: str
    staged: frozenset[str] = frozenset()

    @property
    def legacy(self) -> bool:
        """Whether this is a single-key file of the format before key rings (no ids)."""
        return list(self.keys) == [""]


def _key(text: str, path: Path, what: str) -> bytes:
    try:
        key = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise KeyFileError(f"cannot read {what} key from {path}") from None
    if len(key) != KEY_BYTES:
        raise KeyFileError(f"the key in {path} is not {KEY_BYTES} bytes")
    return key


def read_key_ring(path: Path, what: str = "a") -> KeyRing:
    """The key ring in ``path``: ``<id> <base64>`` lines (``#`` comments and blank lines skipped; a trailing
    ``staged`` mark opens only), or today's single bare base64 key (id ``""``). Raises :class:`KeyFileError`
    naming the line, never the key."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        raise KeyFileError(f"cannot read {what} key from {path}") from None
    lines = [
        (n, line.split())
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if len(lines) == 1 and len(lines[0][1]) == 1:
        return KeyRing({"": _key(lines[0][1][0], path, what)}, "")
    keys: dict[str, bytes] = {}
    staged: set[str] = set()
    current = ""
    for number, words in lines:
        if len(words) not in (2, 3) or (len(words) == 3 and words[2] != STAGED):
            raise KeyFileError(f"{path} line {number}: expected '<id> <base64 key>' (optionally 'staged')")
        key_id = words[0]
        if not KEY_ID_PATTERN.match(key_id) or key_id in keys:
            raise KeyFileError(f"{path} line {number}: key id must be unique and match {KEY_ID_PATTERN.pattern}")
        keys[key_id] = _key(words[1], path, what)
        if len(words) == 3:
            staged.add(key_id)
        else:
            current = key_id
    if not current:
        raise KeyFileError(f"{path} holds no key that seals (every key is staged, or none is there)")
    return KeyRing(keys, current, frozenset(staged))


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _next_id(ring: KeyRing) -> str:
    numbers = [int(k[1:]) for k in ring.keys if re.fullmatch(r"k[0-9]+", k)]
    return f"k{max(numbers, default=0) + 1}"


def format_key_ring(ring: KeyRing) -> str:
    """``ring`` as a key ring file (the current key last)."""
    lines = [_RING_HEADER]
    for key_id, key in ring.keys.items():
        if key_id != ring.current:
            mark = f" {STAGED}" if key_id in ring.staged else ""
            lines.append(f"{key_id} {base64.b64encode(key).decode()}{mark}\n")
    lines.append(f"{ring.current} {base64.b64encode(ring.keys[ring.current]).decode()}\n")
    return "".join(lines)


def rotate_key_ring(path: Path, *, staged: bool = False, key_id: str = "") -> str:
    """Add a fresh random key to the ring in ``path`` and return its id: the key that seals from now on, or
    with ``staged`` one that only opens until :func:`promote_staged_key`. A single-key file of today's format
    becomes a ring whose first key is the old one (id ``k0``; blobs it sealed without an id still open). The
    file is replaced atomically, mode 0600. Raises :class:`KeyFileError`."""
    ring = read_key_ring(path)
    keys = {("k0" if k == "" else k): v for k, v in ring.keys.items()}
    current = "k0" if ring.current == "" else ring.current
    ring = KeyRing(keys, current, ring.staged)
    new_id = key_id or _next_id(ring)
    if not KEY_ID_PATTERN.match(new_id) or new_id in keys:
        raise KeyFileError(f"key id {new_id!r} is taken or does not match {KEY_ID_PATTERN.pattern}")
    keys = {**keys, new_id: secrets.token_bytes(KEY_BYTES)}
    ring = KeyRing(keys, current, ring.staged | {new_id}) if staged else KeyRing(keys, new_id, ring.staged)
    _write_atomically(path, format_key_ring(ring))
    return new_id


def promote_staged_key(path: Path) -> str:
    """Make the staged key of the ring in ``path`` the one that seals (the previous one keeps opening);
    returns its id. Raises :class:`KeyFileError` when no key, or more than one, is staged."""
    ring = read_key_ring(path)
    if len(ring.staged) != 1:
        raise KeyFileError(f"{path} has {len(ring.staged)} staged keys; promote needs exactly one")
    (new_id,) = ring.staged
    _write_atomically(path, format_key_ring(KeyRing(dict(ring.keys), new_id, frozenset())))
    return new_id
