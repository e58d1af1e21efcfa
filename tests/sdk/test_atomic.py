"""Replacing files atomically: the old content or the new, durable when the call returns."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from homeagent_sdk._atomic import atomic_file, atomic_write


def test_a_write_replaces_the_file_private_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("old")
    os.chmod(path, 0o644)
    atomic_write(path, "新的 content")
    assert path.read_text(encoding="utf-8") == "新的 content"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    atomic_write(path, b"\x00bytes", mode=0o644)
    assert path.read_bytes() == b"\x00bytes" and stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_the_file_and_the_folder_are_synced_before_the_call_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    path = tmp_path / "f.bin"
    atomic_write(path, b"data")
    assert len(synced) == 2
    assert synced[0].startswith(str(tmp_path / ".f.bin.")) and synced[1] == str(tmp_path)


def test_an_error_in_the_block_keeps_the_old_content_and_removes_the_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="half way"), atomic_file(path) as fh:
        fh.write(b"new, but ")
        raise RuntimeError("half way")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.json"]
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "no such folder" / "x", b"")


def test_a_named_temporary_file_is_used_and_truncated(tmp_path: Path) -> None:
    path, tmp = tmp_path / "snap", tmp_path / "snap.tmp"
    tmp.write_bytes(b"a longer partial file left by a crash")
    atomic_write(path, b"short", tmp=tmp)
    assert path.read_bytes() == b"short" and not tmp.exists()


def test_a_writer_killed_mid_write_leaves_the_old_content(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text("old")
    child = textwrap.dedent(
        """
        import sys, time
        from homeagent_sdk._atomic import atomic_file
        with atomic_file(sys.argv[1]) as fh:
            fh.write(b"new, half written")
            fh.flush()
            print("writing", flush=True)
            sys.stdin.read()  # until killed
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "writing\n"
        proc.kill()
        assert proc.wait(timeout=10) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
    assert path.read_text() == "old"
