"""The note a running daemon leaves so that commands without ``--data`` find it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from homeagent_core import datadir


def test_a_note_that_cannot_be_written_is_logged_not_swallowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the runtime folder should be", encoding="utf-8")
    monkeypatch.setenv("HOMEAGENT_RUNTIME_DIR", str(blocker / "runtime"))
    caplog.set_level(logging.WARNING, logger="homeagent.datadir")

    datadir.note_running(tmp_path / "data")

    assert datadir.running_data_dir() is None
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "could not note the running daemon" in warning and "--data" in warning


def test_the_note_names_this_process_data_directory_and_is_removed_on_forget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOMEAGENT_RUNTIME_DIR", str(tmp_path / "runtime"))
    data = tmp_path / "data"
    data.mkdir()

    datadir.note_running(data)
    assert datadir.running_data_dir() == data

    datadir.forget_running(data)
    assert datadir.running_data_dir() is None
