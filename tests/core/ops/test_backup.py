"""Backup and restore of a data directory: a live agent under traffic, the CLI as a real process,
damaged and encrypted archives, interrupted backups and the restore guards."""

from __future__ import annotations

import asyncio
import io
import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from backup_data import answers, fill, make_agent

from homeagent_core.memory.documents.store import Document
from homeagent_core.ops.backup import BackupError, create_backup, list_backups, prune_backups
from homeagent_core.ops.errors import WrongPassphrase
from homeagent_core.ops.restore import restore_backup, verify_backup
from homeagent_sdk.types import Triple

#: Bound on every wait for a child process (not a speed assertion).
WAIT_S = 120.0


def cli(*args: str, env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "homeagent_core.cli", "backup", *args],
        env={**os.environ, "HOMEAGENT_LOAD_PLUGINS": "", "NO_COLOR": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        **kwargs,
    )


async def test_a_backup_taken_while_the_agent_writes_restores_to_the_same_answers(tmp_path: Path):
    data, restored = tmp_path / "data", tmp_path / "restored"
    agent = make_agent(data)
    await agent.start()
    try:
        await fill(agent)
        # Enough rows that copying the documents takes a while: a backup that copied the stores
        # one after the other, each as of its own moment, would let the counters run ahead.
        bulk = [Document(content=f"archived line {i} about the garden and the lake") for i in range(8000)]
        await agent.app.memory.documents.add_many(bulk, batch_size=4000)
        stop = asyncio.Event()
        written: list[int] = []

        async def traffic() -> None:
            i = 0
            while not stop.is_set():
                await agent.documents.commit(f"note {i}", f"traffic note number {i}")
                await agent.memory.commit([Triple("counter", "reached", f"n{i}")])
                written.append(i)
                i += 1

        writer = asyncio.create_task(traffic())
        while len(written) < 3:
            await asyncio.sleep(0.01)
        busy = await asyncio.to_thread(cli, "create", "--data", str(data), "--out", str(tmp_path / "busy.tar"))
        stop.set()
        await writer
        assert busy.returncode == 0, busy.stdout + busy.stderr
        quiet = await asyncio.to_thread(cli, "create", "--data", str(data), "--out", str(tmp_path / "quiet.tar"))
        assert quiet.returncode == 0, quiet.stdout + quiet.stderr
        before = await answers(agent)
    finally:
        await agent.aclose()

    done = cli("restore", str(tmp_path / "quiet.tar"), "--data", str(restored))
    assert done.returncode == 0, done.stdout + done.stderr
    async with make_agent(restored) as again:
        after = await answers(again)
    assert after == before
    assert before["documents"][0][0] == "tea" and before["people"] and before["account"] == "小王"
    assert before["settings"]["core.llm.sources.home.api_key"] == "sk-family-0123"
    assert [(p[1], p[3], p[4]) for p in before["pairing"]] == [("77", "approved", "奶奶"), ("78", "pending", "")]
    assert before["plugins"] == ["plugins/weather/main.lua", "plugins/weather/plugin.json"]
    assert ("奶奶", "guest", (("telegram", "77"),)) in before["registry"]

    # The archive taken under traffic holds each store at one moment: the notes and counters
    # it has are gap-free prefixes of what was written, at most a step or two apart (the stores are
    # pinned one after the other within a few milliseconds; copied one by one they drift by many).
    mid = tmp_path / "mid"
    restore_backup(tmp_path / "busy.tar", mid)
    with closing(sqlite3.connect(mid / "memory" / "documents.db")) as db:
        notes = sorted(int(t.split()[1]) for (t,) in db.execute("SELECT title FROM documents") if t.startswith("note "))
    with closing(sqlite3.connect(mid / "memory" / "graph.db")) as db:
        counters = sorted(int(n[1:]) for (n,) in db.execute("SELECT name FROM entities") if n[1:].isdigit())
    assert notes == list(range(len(notes))) and counters == list(range(len(counters)))
    assert len(notes) >= 3 and abs(len(notes) - len(counters)) <= 2, (len(notes), len(counters), len(written))
    for line in (mid / "memory" / "text").glob("*.jsonl"):
        for record in line.read_text(encoding="utf-8").splitlines():
            json.loads(record)


async def filled(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    async with make_agent(data) as agent:
        await fill(agent)
    return data


async def test_an_encrypted_backup_round_trips_and_a_wrong_passphrase_is_refused(tmp_path: Path):
    data = await filled(tmp_path)
    archive, manifest = create_backup(data, tmp_path, passphrase="correct horse")
    assert archive.name.endswith(".tar.enc")
    raw = archive.read_bytes()
    assert b"hello123" not in raw and b"SQLite format 3" not in raw
    assert verify_backup(archive, passphrase="correct horse")["members"] == manifest["members"]
    with pytest.raises(WrongPassphrase, match="passphrase does not open"):
        verify_backup(archive, passphrase="wrong horse")
    with pytest.raises(BackupError, match="is encrypted; give its passphrase"):
        restore_backup(archive, tmp_path / "no-pass")
    with pytest.raises(WrongPassphrase):
        restore_backup(archive, tmp_path / "wrong", passphrase="wrong horse")
    assert not (tmp_path / "no-pass").exists() and not (tmp_path / "wrong").exists()

    bad = cli(
        "restore",
        str(archive),
        "--data",
        str(tmp_path / "cli"),
        "--passphrase-env",
        "HA_PASS",
        env={"HA_PASS": "wrong horse"},
    )
    assert bad.returncode == 1 and "passphrase does not open" in bad.stderr
    good = cli(
        "restore",
        str(archive),
        "--data",
        str(tmp_path / "cli"),
        "--passphrase-env",
        "HA_PASS",
        env={"HA_PASS": "correct horse"},
    )
    assert good.returncode == 0, good.stderr
    assert (tmp_path / "cli" / "knowledge" / "home" / "wifi" / "content.md").read_text(encoding="utf-8") == (
        data / "knowledge" / "home" / "wifi" / "content.md"
    ).read_text(encoding="utf-8")

    truncated = tmp_path / "cut.tar.enc"
    truncated.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(BackupError, match="truncated"):
        verify_backup(truncated, passphrase="correct horse")
    flipped = bytearray(raw)
    flipped[len(raw) // 2] ^= 0x01
    altered = tmp_path / "altered.tar.enc"
    altered.write_bytes(bytes(flipped))
    with pytest.raises(BackupError, match="damaged or was altered"):
        restore_backup(altered, tmp_path / "from-altered", passphrase="correct horse")
    assert not (tmp_path / "from-altered").exists()


def _member_offset(archive: Path, name: str) -> int:
    with tarfile.open(archive) as tar:
        return tar.getmember(name).offset_data


async def test_a_tampered_truncated_or_newer_archive_is_refused_and_nothing_is_restored(tmp_path: Path):
    data = await filled(tmp_path)
    archive, _ = create_backup(data, tmp_path / "good.tar")
    raw = archive.read_bytes()

    at = _member_offset(archive, "data/knowledge/home/wifi/content.md")
    tampered = bytearray(raw)
    tampered[at + 25] = ord("X")
    (tmp_path / "tampered.tar").write_bytes(bytes(tampered))
    with pytest.raises(BackupError, match=r"knowledge/home/wifi/content\.md does not match its SHA-256"):
        verify_backup(tmp_path / "tampered.tar")
    checked = cli("verify", str(tmp_path / "tampered.tar"))
    assert checked.returncode == 1 and "does not match its SHA-256" in checked.stderr

    (tmp_path / "cut.tar").write_bytes(raw[: len(raw) // 3])
    with pytest.raises(BackupError, match=r"truncated|incomplete"):
        restore_backup(tmp_path / "cut.tar", tmp_path / "from-cut")
    assert not (tmp_path / "from-cut").exists()
    assert not [p for p in tmp_path.iterdir() if "restoring" in p.name]

    with tarfile.open(archive) as src, tarfile.open(tmp_path / "newer.tar", "w") as dst:
        for member in src:
            blob = src.extractfile(member)
            assert blob is not None
            payload = blob.read()
            if member.name == "HOMEAGENT-BACKUP.json":
                payload = json.dumps({**json.loads(payload), "format": 99, "homeagent": "9.0.0"}).encode()
                member.size = len(payload)
            dst.addfile(member, io.BytesIO(payload))
    with pytest.raises(BackupError, match=r"backup format 99.*upgrade HomeAgent"):
        restore_backup(tmp_path / "newer.tar", tmp_path / "from-newer")
    assert not (tmp_path / "from-newer").exists()


async def test_restore_refuses_a_non_empty_directory_unless_forced_and_keeps_the_old_one(tmp_path: Path):
    data = await filled(tmp_path)
    archive, _ = create_backup(data, tmp_path / "a.tar")
    target = tmp_path / "home"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    refused = cli("restore", str(archive), "--data", str(target))
    assert refused.returncode == 1 and "is not empty" in refused.stderr and "--force" in refused.stderr
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]

    forced = cli("restore", str(archive), "--data", str(target), "--force")
    assert forced.returncode == 0, forced.stderr
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("home.before-restore-")]
    assert len(aside) == 1 and (aside[0] / "keep.txt").read_text() == "mine"
    assert (target / "config.db").is_file() and not (target / "keep.txt").exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    assert restore_backup(archive, empty).aside is None
    assert (empty / "memory" / "graph.db").is_file()


def _slow_data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    (data / "memory" / "media" / "blobs").mkdir(parents=True)
    with closing(sqlite3.connect(data / "config.db")) as db:
        db.execute("CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    big = data / "memory" / "media" / "blobs" / "video.bin"
    with big.open("wb") as f:
        f.truncate(1536 << 20)  # sparse: costs no disk to hold, seconds to hash and copy
    return data


def test_a_backup_killed_mid_way_leaves_nothing_that_list_shows_and_the_next_one_cleans_up(tmp_path: Path):
    data = _slow_data(tmp_path)
    (data / "memory" / "media" / "blobs" / "video.bin").rename(tmp_path / "video.bin")
    first = cli("create", "--data", str(data))
    assert first.returncode == 0, first.stderr
    (tmp_path / "video.bin").rename(data / "memory" / "media" / "blobs" / "video.bin")
    folder = data / "backups"
    good = [i.path.name for i in list_backups(folder)]
    assert len(good) == 1

    child = subprocess.Popen(
        [sys.executable, "-m", "homeagent_core.cli", "backup", "create", "--data", str(data)],
        env={**os.environ, "HOMEAGENT_LOAD_PLUGINS": ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + WAIT_S
    partial: list[Path] = []
    while time.monotonic() < deadline and child.poll() is None:
        partial = [p for p in folder.glob(".homeagent-*.partial-*") if p.stat().st_size > (1 << 20)]
        if partial:
            break
        time.sleep(0.005)
    assert partial, "the backup never started writing its archive"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=WAIT_S)
    assert child.returncode == -signal.SIGKILL

    assert [i.path.name for i in list_backups(folder)] == good
    shown = cli("list", "--data", str(data))
    assert shown.returncode == 0 and shown.stdout.count("homeagent-") == 1 and "partial" not in shown.stdout
    assert list(folder.glob(".homeagent-*.partial-*"))
    (data / "memory" / "media" / "blobs" / "video.bin").unlink()
    again = cli("create", "--data", str(data))
    assert again.returncode == 0, again.stderr
    assert not list(folder.glob(".homeagent-*.partial-*")) and not list(folder.glob(".backup-stage-*"))
    assert len(list_backups(folder)) == 2


def test_a_restore_killed_mid_way_leaves_the_target_untouched_and_the_next_one_cleans_up(tmp_path: Path):
    data = _slow_data(tmp_path)
    blob = data / "memory" / "media" / "blobs" / "video.bin"
    blob.unlink()
    with blob.open("wb") as f:
        f.truncate(256 << 20)
    archive, _ = create_backup(data, tmp_path / "big.tar")
    blob.unlink()
    target = tmp_path / "home"
    child = subprocess.Popen(
        [sys.executable, "-m", "homeagent_core.cli", "backup", "restore", str(archive), "--data", str(target)],
        env={**os.environ, "HOMEAGENT_LOAD_PLUGINS": ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + WAIT_S
    staging: list[Path] = []
    while time.monotonic() < deadline and child.poll() is None and not staging:
        staging = [p for p in tmp_path.glob(".home.restoring-*") if (p / "memory" / "media" / "blobs").is_dir()]
        time.sleep(0.005)
    assert staging, "the restore never started unpacking"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=WAIT_S)
    assert not target.exists()
    assert cli("restore", str(archive), "--data", str(target)).returncode == 0
    assert not list(tmp_path.glob(".home.restoring-*"))
    assert (target / "memory" / "media" / "blobs" / "video.bin").stat().st_size == 256 << 20


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20))


def test_a_backup_that_cannot_be_written_says_so_and_leaves_no_archive(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    with closing(sqlite3.connect(data / "config.db")) as db:
        db.execute("CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    (data / "personal").mkdir()
    (data / "personal" / "photos.bin").write_bytes(os.urandom(16 << 20))
    out = tmp_path / "out"
    out.mkdir()
    run = cli("create", "--data", str(data), "--out", str(out), preexec_fn=_limit_file_size)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "no room to write the backup" in run.stderr and "no archive was left behind" in run.stderr
    assert list(out.iterdir()) == []


def test_an_unreachable_postgresql_memory_fails_the_backup_clearly_and_leaves_no_archive(tmp_path: Path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path / "data"
    data.mkdir()
    with closing(sqlite3.connect(data / "config.db")) as db:
        db.execute("CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute(f"INSERT INTO config VALUES ('core.memory.store', 'postgresql://ha:topsecret@127.0.0.1:{port}/ha')")
        db.commit()
    with pytest.raises(BackupError, match=r"postgresql://ha:\*\*\*@127\.0\.0\.1.* cannot be reached") as info:
        create_backup(data, tmp_path)
    assert "topsecret" not in str(info.value)
    assert list(tmp_path.glob("*.tar")) == [] and list(tmp_path.glob(".*partial*")) == []


def test_retention_keeps_the_newest_of_seven_days_and_four_weeks_before_them(tmp_path: Path):
    from datetime import UTC, datetime, timedelta

    start = datetime(2026, 12, 31, 3, 0, tzinfo=UTC)
    names = []
    for day in range(60):
        for hour in (0, 1):
            stamp = (start - timedelta(days=day, hours=hour)).strftime("%Y%m%dT%H%M%SZ")
            names.append(f"homeagent-{stamp}.tar")
            (tmp_path / names[-1]).write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("not a backup")
    removed = prune_backups(tmp_path, keep_daily=7, keep_weekly=4)
    kept = sorted((p.name for p in tmp_path.glob("homeagent-*")), reverse=True)
    assert len(kept) == 11 and len(removed) == 120 - 11
    assert kept[:7] == [f"homeagent-{(start - timedelta(days=d)).strftime('%Y%m%dT%H%M%SZ')}.tar" for d in range(7)]
    weeks = {datetime.strptime(n[10:26], "%Y%m%dT%H%M%SZ").isocalendar()[:2] for n in kept[7:]}
    assert len(weeks) == 4
    assert (tmp_path / "notes.txt").exists()


async def test_list_marks_a_cut_archive_damaged_and_create_never_overwrites_one(tmp_path: Path):
    data = await filled(tmp_path)
    folder = tmp_path / "archives"
    folder.mkdir()
    archive, _ = create_backup(data, folder)
    raw = archive.read_bytes()
    cut = folder / "homeagent-20200101T000000Z.tar"
    cut.write_bytes(raw[: len(raw) // 2])
    listed = {i.path.name: i.status for i in list_backups(folder)}
    assert listed[archive.name] == "complete"
    assert listed[cut.name].startswith("damaged: ") and "truncated?" in listed[cut.name]
    with pytest.raises(BackupError, match="already exists"):
        create_backup(data, archive)
    assert archive.read_bytes() == raw
