"""Answer values sealed at rest (docs/security.md "Answer values at rest").

Every Interaction the store writes to Redis (the record's ``pb``, the Interaction inside an event Stream
entry, a settled Stream entry) carries its ``answer`` as ``sealed_answer``: nonce ‖ AES-256-GCM ciphertext
of ``answer.SerializeToString()``, the ``interaction_id`` as associated data, so a blob copied into another
record does not open. Every Interaction read back is unsealed before anything else sees it. Without a key
(``MAKA_ANSWER_KEY_FILE`` unset: unit tests, in-process test services) answers are stored as they are.
"""

from __future__ import annotations

import logging
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.interaction.errors import AnswerUnsealable

log = logging.getLogger("maka.interaction.sealing")

NONCE_BYTES = 12
_AAD_PREFIX = b"maka-answer/v1|"


class AnswerSealer:
    """Seals and unseals the ``answer`` of Interactions at the store boundary; ``key=None`` = plaintext."""

    def __init__(self, key: bytes | None) -> None:
        self._aead = AESGCM(key) if key is not None else None

    @property
    def sealing(self) -> bool:
        """Whether answers are sealed (a key is configured)."""
        return self._aead is not None

    @staticmethod
    def _aad(interaction_id: str) -> bytes:
        return _AAD_PREFIX + interaction_id.encode()

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
        stored.sealed_answer = nonce + self._aead.encrypt(nonce, plain, self._aad(interaction.interaction_id))
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
            if self._aead is None:
                raise InvalidTag()
            plain = self._aead.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], self._aad(stored.interaction_id))
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
