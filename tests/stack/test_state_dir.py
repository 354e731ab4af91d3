"""The state dir: one stack per dir (``maka.lock``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stack.state_dir import StackRunning, StateDirLock, read_endpoints


def test_the_state_dir_lock_refuses_a_second_holder_naming_the_first_pid(tmp_path: Path) -> None:
    first = StateDirLock(tmp_path / "state")
    first.acquire()
    try:
        with pytest.raises(StackRunning) as refused:
            StateDirLock(tmp_path / "state").acquire()
        assert refused.value.pid == os.getpid()
    finally:
        first.release()

    with StateDirLock(tmp_path / "state"):  # free again once released
        assert (tmp_path / "state" / "maka.lock").read_text() == f"{os.getpid()}\n"


def test_a_missing_endpoints_file_is_named_by_its_absolute_path_with_the_state_dir_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    with pytest.raises(FileNotFoundError) as missing:
        read_endpoints(Path(".state"))

    message = str(missing.value)
    assert str(tmp_path / ".state" / "endpoints.json") in message
    assert "--state-dir DIR" in message
    assert "MAKA_STATE_DIR" in message
