"""Answer values sealed at rest (docs/security.md "Answer values at rest").

Every Interaction the store writes to Redis (the record's ``pb``, the Interaction inside an event Stream
entry, a settled Stream entry) carries its ``answer`` as ``sealed_answer``: nonce ‖ AES-256-GCM ciphertext
of ``answer.SerializeToString()``, the ``interaction_id`` as associated data, so a blob copied into another
record does not open. Every Interaction read back is unsealed before anything else sees it. Without a key
(``MAKA_ANSWER_KEY_FILE`` unset: unit tests, in-process test services) answers are stored as they are.

With a key ring (:class:`services.core.key_file.KeyRing`) a blob sealed by a key with an id starts with
``KEY_ID_MAGIC`` ‖ one byte of id length ‖ the id, and the id is in the associated data too; the ring's
current key seals, any key of the ring opens. A blob without a key id (sealed by a single-key file, before
rings) opens with whichever key of the ring sealed it. A blob whose key id the ring does not hold fails
``ANSWER_UNSEALABLE`` as before.
"""

from __future__ import annotations

import contextlib
import logging
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core.key_file import KeyRing
from services.interaction.errors import AnswerUnsealable

log = logging.getLogger("maka.interaction.sealing")

NONCE_BYTES = 12
KEY_ID_MAGIC = b"\x00mk"
"""The first bytes of a blob sealed with a ring key that has an id (followed by the id's length and id)."""
_AAD_PREFIX = b"maka-answer/v1|"
_AAD_PREFIX_V2 = b"maka-answer/v2|"


class AnswerSealer:
    """Seals and unseals the ``answer`` of Interactions at the store boundary; ``key=None`` = plaintext,
    ``bytes`` = one key without an id (today's single-key file), a :class:`KeyRing` = rotating keys."""

    def __init__(self, key: bytes | KeyRing | None) -> None:
        ring = KeyRing({"": key}, "") if isinstance(key, bytes) else key
        self._ring: dict[str, AESGCM] = {} if ring is None else {k: AESGCM(v) for k, v in ring.keys.items()}
        self._current = "" if ring is None else ring.current
        self._aead = self._ring.get(self._current)

    @property
    def key_id(self) -> str:
        """The id of the key that seals (``""``: no id, today's single-key file or no key)."""
        return self._current

    @staticmethod
    def _aad(interaction_id: str, key_id: str = "") -> bytes:
        if key_id:
            return _AAD_PREFIX_V2 + key_id.encode() + b"|" + interaction_id.encode()
        return _AAD_PREFIX + interaction_id.encode()

    def _open(self, blob: bytes, interaction_id: str) -> bytes:
        """The plaintext of ``blob``; raises InvalidTag or ValueError when no key of the ring opens it."""
        if blob.startswith(KEY_ID_MAGIC) and len(blob) > len(KEY_ID_MAGIC):
            size = blob[len(KEY_ID_MAGIC)]
            start = len(KEY_ID_MAGIC) + 1
            key_id = blob[start : start + size].decode("ascii", "replace")
            aead = self._ring.get(key_id)
            if aead is not None and key_id:
                body = blob[start + size :]
                with contextlib.suppress(InvalidTag):
                    return aead.decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], self._aad(interaction_id, key_id))
        for aead in self._ring.values():  # a blob without a key id: the key that sealed it is one of the ring
            with contextlib.suppress(InvalidTag):
                return aead.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], self._aad(interaction_id))
        raise InvalidTag()

    def seal(self, interaction: interaction_pb2.Interaction) -> interaction_pb2.Interaction:
        """A copy of ``interaction`` as stored: ``answer`` replaced by ``sealed_answer`` (no answer, or no key:
        an unchanged copy)."""
        stored = interaction_pb2.Interaction()
        stored.CopyFrom(interaction)
        stored.ClearField("sealed_answer")
        if self._aead is None or not interaction.HasField("answer"):
            return stored
        nonce = secrets.token_bytes(NONCE_BYTES)
        plain = interaction.answer.SerializeToString()
        key_id = self._current
        sealed = nonce + self._aead.encrypt(nonce, plain, self._aad(interaction.interaction_id, key_id))
        if key_id:
            sealed = KEY_ID_MAGIC + bytes([len(key_id)]) + key_id.encode("ascii") + sealed
        stored.sealed_answer = sealed
        stored.ClearField("answer")
        return stored

    def unseal(self, stored: interaction_pb2.Interaction) -> interaction_pb2.Interaction:
        """``stored`` with its answer opened (in place; returned for chaining). Raises
        :class:`~services.interaction.errors.AnswerUnsealable` after logging ``answer_unsealable`` with the
        id, never the bytes."""
        if not stored.sealed_answer:
            return stored
        blob = stored.sealed_answer
        try:
            plain = self._open(blob, stored.interaction_id)
            answer = form_pb2.Answer.FromString(plain)
        except (InvalidTag, ValueError):
            log.error("answer_unsealable", extra={"interaction_id": stored.interaction_id})
            raise AnswerUnsealable(stored.interaction_id) from None
        stored.ClearField("sealed_answer")
        stored.answer.CopyFrom(answer)
        return stored

    def seal_event(self, event: interaction_pb2.InteractionEvent) -> interaction_pb2.InteractionEvent:
        """A copy of ``event`` whose Interaction is sealed."""
        return interaction_pb2.InteractionEvent(kind=event.kind, interaction=self.seal(event.interaction))

    def unseal_event(self, event: interaction_pb2.InteractionEvent) -> interaction_pb2.InteractionEvent:
        """``event`` with its Interaction unsealed (in place). Raises :class:`AnswerUnsealable`."""
        self.unseal(event.interaction)
        return event
