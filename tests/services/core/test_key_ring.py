"""Answer key rings (docs/security.md "Answer values at rest"): key ids, rotation, staging, and today's
single-key file read as a ring of one key without an id."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest

from services.core.key_file import (
    KeyFileError,
    generate_key_file,
    promote_staged_key,
    read_key_file,
    read_key_ring,
    rotate_key_ring,
)


def test_a_single_key_file_of_todays_format_is_a_ring_of_one_key_without_an_id(tmp_path: Path) -> None:
    path = tmp_path / "answer.key"
    generate_key_file(path)
    ring = read_key_ring(path)
    assert ring.legacy
    assert ring.current == ""
    assert ring.keys == {"": read_key_file(path)}


def test_rotating_a_single_key_file_keeps_the_old_key_as_k0_and_seals_with_a_new_k1(tmp_path: Path) -> None:
    path = tmp_path / "answer.key"
    generate_key_file(path)
    old = read_key_file(path)

    assert rotate_key_ring(path) == "k1"
    ring = read_key_ring(path)
    assert list(ring.keys) == ["k0", "k1"]
    assert ring.keys["k0"] == old
    assert ring.current == "k1"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert rotate_key_ring(path) == "k2"
    assert read_key_ring(path).current == "k2"
    assert list(read_key_ring(path).keys) == ["k0", "k1", "k2"]


def test_a_staged_key_opens_but_does_not_seal_until_it_is_promoted(tmp_path: Path) -> None:
    path = tmp_path / "answer.key"
    generate_key_file(path)
    rotate_key_ring(path)

    assert rotate_key_ring(path, staged=True, key_id="spring") == "spring"
    ring = read_key_ring(path)
    assert ring.current == "k1"
    assert ring.staged == {"spring"}
    assert "spring" in ring.keys
    assert promote_staged_key(path) == "spring"
    ring = read_key_ring(path)
    assert ring.current == "spring"
    assert not ring.staged
    assert set(ring.keys) == {"k0", "k1", "spring"}


def test_promote_without_a_staged_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "answer.key"
    generate_key_file(path)
    with pytest.raises(KeyFileError, match="0 staged keys"):
        promote_staged_key(path)


@pytest.mark.parametrize(
    "content",
    [
        "k1 {key}\nk1 {key}\n",  # duplicate id
        "k 1 {key}\n",  # too many words
        "bad/id {key}\n",  # id charset
        "k1 {key} staged\n",  # nothing seals
        "k1 c2hvcnQ=\n",  # short key
    ],
    ids=["duplicate", "words", "charset", "all-staged", "short"],
)
def test_a_malformed_ring_is_refused_naming_the_file_never_the_key(tmp_path: Path, content: str) -> None:
    key = base64.b64encode(b"x" * 32).decode()
    path = tmp_path / "answer.key"
    path.write_text(content.format(key=key))
    with pytest.raises(KeyFileError) as caught:
        read_key_ring(path)
    assert str(path) in str(caught.value)
    assert key not in str(caught.value)
