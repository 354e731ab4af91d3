"""Answers sealed with a key ring (docs/security.md "Answer values at rest"): the current key's id travels in
the blob, every key of the ring opens, today's blobs without an id still open, an unknown id does not."""

from __future__ import annotations

import secrets

import pytest

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.core.key_file import KeyRing
from services.interaction.errors import AnswerUnsealable
from services.interaction.sealing import KEY_ID_MAGIC, AnswerSealer


def _answered(interaction_id: str = "ix_ring") -> interaction_pb2.Interaction:
    return interaction_pb2.Interaction(
        interaction_id=interaction_id,
        state=interaction_pb2.INTERACTION_STATE_ANSWERED,
        answer=form_pb2.Answer(action=form_pb2.ACTION_ACCEPT, values={"v": form_pb2.Value(string_value="ring")}),
    )


def _reread(stored: interaction_pb2.Interaction) -> interaction_pb2.Interaction:
    return interaction_pb2.Interaction.FromString(stored.SerializeToString())


def test_a_ring_seals_with_its_current_key_id_in_front_of_the_blob() -> None:
    k1, k2 = secrets.token_bytes(32), secrets.token_bytes(32)
    sealer = AnswerSealer(KeyRing({"k1": k1, "k2": k2}, "k2"))
    stored = sealer.seal(_answered())
    assert stored.sealed_answer.startswith(KEY_ID_MAGIC + bytes([2]) + b"k2")
    assert sealer.unseal(_reread(stored)) == _answered()


def test_after_a_rotation_records_sealed_with_the_old_key_and_todays_blobs_without_an_id_still_open() -> None:
    old, new = secrets.token_bytes(32), secrets.token_bytes(32)
    legacy_blob = AnswerSealer(old).seal(_answered("ix_before"))  # today's single-key file: no key id
    assert not legacy_blob.sealed_answer.startswith(KEY_ID_MAGIC)
    k0_blob = AnswerSealer(KeyRing({"k0": old}, "k0")).seal(_answered("ix_k0"))

    rotated = AnswerSealer(KeyRing({"k0": old, "k1": new}, "k1"))
    assert rotated.unseal(_reread(legacy_blob)) == _answered("ix_before")
    assert rotated.unseal(_reread(k0_blob)) == _answered("ix_k0")
    fresh = rotated.seal(_answered("ix_after"))
    assert fresh.sealed_answer.startswith(KEY_ID_MAGIC + bytes([2]) + b"k1")


def test_a_blob_sealed_with_a_key_id_the_ring_does_not_hold_fails_answer_unsealable() -> None:
    blob = AnswerSealer(KeyRing({"k9": secrets.token_bytes(32)}, "k9")).seal(_answered())
    other = AnswerSealer(KeyRing({"k1": secrets.token_bytes(32)}, "k1"))
    with pytest.raises(AnswerUnsealable):
        other.unseal(_reread(blob))


def test_a_key_id_moved_onto_another_keys_blob_does_not_open() -> None:
    k1, k2 = secrets.token_bytes(32), secrets.token_bytes(32)
    ring = AnswerSealer(KeyRing({"k1": k1, "k2": k2}, "k2"))
    stored = ring.seal(_answered())
    stored.sealed_answer = stored.sealed_answer.replace(b"k2", b"k1", 1)  # the id is bound to the ciphertext
    with pytest.raises(AnswerUnsealable):
        ring.unseal(_reread(stored))
