"""Answer values sealed at rest (docs/security.md "Answer values at rest"): the pure sealing logic."""

from __future__ import annotations

import logging
import secrets

import pytest

from maka.form.v1 import form_pb2
from maka.interaction.v1 import interaction_pb2
from services.interaction.errors import AnswerUnsealable
from services.interaction.sealing import AnswerSealer

CANARY = "sealing-canary-5d1e"


def _answered(interaction_id: str = "ix_one") -> interaction_pb2.Interaction:
    return interaction_pb2.Interaction(
        interaction_id=interaction_id,
        state=interaction_pb2.INTERACTION_STATE_ANSWERED,
        answer=form_pb2.Answer(action=form_pb2.ACTION_ACCEPT, values={"version": form_pb2.Value(string_value=CANARY)}),
    )


def _sealer() -> AnswerSealer:
    return AnswerSealer(secrets.token_bytes(32))


def test_a_sealed_answer_round_trips_and_the_stored_copy_has_no_answer() -> None:
    sealer = _sealer()
    original = _answered()
    stored = sealer.seal(original)

    assert original.HasField("answer"), "seal returns a copy"
    assert not original.sealed_answer
    assert not stored.HasField("answer")
    assert stored.sealed_answer
    read = sealer.unseal(interaction_pb2.Interaction.FromString(stored.SerializeToString()))
    assert read == original
    assert not read.sealed_answer


def test_the_sealed_bytes_carry_no_plaintext_value_and_each_seal_differs() -> None:
    sealer = _sealer()
    first = sealer.seal(_answered()).SerializeToString()
    second = sealer.seal(_answered()).SerializeToString()

    assert CANARY.encode() not in first
    assert b"version" not in first
    assert first != second, "a fresh nonce per seal"


def test_a_blob_moved_to_another_record_does_not_unseal(caplog: pytest.LogCaptureFixture) -> None:
    sealer = _sealer()
    stored = sealer.seal(_answered("ix_one"))
    moved = interaction_pb2.Interaction(interaction_id="ix_two", sealed_answer=stored.sealed_answer)

    with caplog.at_level(logging.ERROR), pytest.raises(AnswerUnsealable) as caught:
        sealer.unseal(moved)
    assert caught.value.interaction_id == "ix_two"
    assert [r.getMessage() for r in caplog.records] == ["answer_unsealable"]
    assert caplog.records[0].__dict__["interaction_id"] == "ix_two"
    assert stored.sealed_answer.hex() not in caplog.text


def test_another_key_or_no_key_cannot_unseal_and_a_damaged_blob_fails() -> None:
    stored = _sealer().seal(_answered())
    with pytest.raises(AnswerUnsealable):
        _sealer().unseal(interaction_pb2.Interaction.FromString(stored.SerializeToString()))
    with pytest.raises(AnswerUnsealable):
        AnswerSealer(None).unseal(interaction_pb2.Interaction.FromString(stored.SerializeToString()))
    sealer = _sealer()
    damaged = sealer.seal(_answered())
    damaged.sealed_answer = damaged.sealed_answer[:-1] + bytes([damaged.sealed_answer[-1] ^ 1])
    with pytest.raises(AnswerUnsealable):
        sealer.unseal(damaged)
    with pytest.raises(AnswerUnsealable):
        sealer.unseal(interaction_pb2.Interaction(interaction_id="ix_one", sealed_answer=b"short"))


def test_without_a_key_or_an_answer_the_interaction_is_stored_as_it_is() -> None:
    plain = AnswerSealer(None)
    assert plain.seal(_answered()) == _answered()
    pending = interaction_pb2.Interaction(interaction_id="ix_p", state=interaction_pb2.INTERACTION_STATE_PENDING)
    assert _sealer().seal(pending) == pending
    assert plain.unseal(_answered()) == _answered()


def test_a_sealed_answer_a_client_supplied_is_dropped_before_storing() -> None:
    forged = _answered()
    forged.sealed_answer = b"\x00" * 40
    assert (
        not _sealer()
        .seal(interaction_pb2.Interaction(interaction_id="ix_one", sealed_answer=b"\x00" * 40))
        .sealed_answer
    )
    assert AnswerSealer(None).seal(forged).sealed_answer == b""


def test_an_event_is_sealed_as_a_copy_and_unsealed_in_place() -> None:
    sealer = _sealer()
    event = interaction_pb2.InteractionEvent(kind=interaction_pb2.EVENT_KIND_ANSWERED, interaction=_answered())
    stored = sealer.seal_event(event)

    assert CANARY.encode() not in stored.SerializeToString()
    assert event.interaction.HasField("answer")
    assert sealer.unseal_event(interaction_pb2.InteractionEvent.FromString(stored.SerializeToString())) == event
