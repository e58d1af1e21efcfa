"""The Reminders and Backups routes of the web UI over real HTTP: per-person reminders over the
same store as the tools, and the owner-only backup routes (create, list, download, damaged).

Each test runs a real daemon (App + web UI on a loopback port, SQLite files in a temp data dir)
with the ``reminders`` and ``backup`` built-ins; persons log in with their own passwords.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import aclosing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx

REMINDERS = "homeagent_core.builtin.reminders"
BACKUP = "homeagent_core.builtin.backup"
SHANGHAI = ZoneInfo("Asia/Shanghai")


def give_login(daemon: Any, name: str, role: str, password: str) -> None:
    daemon.app.people.add(name, role)
    person = daemon.app.people.get(name)
    daemon.plugin.state.logins.set_password(name, person.created_at, password)


async def login(daemon: Any, username: str, password: str) -> httpx.AsyncClient:
    """A client holding a session cookie of ``username`` and sending its CSRF token."""
    client = httpx.AsyncClient(base_url=daemon.url, timeout=20)
    answer = await client.post("/api/v1/login", json={"username": username, "password": password})
    assert answer.status_code == 200, answer.text
    client.headers["X-CSRF-Token"] = answer.json()["csrf_token"]
    return client


def tomorrow_at(hour: int) -> str:
    day = datetime.now(SHANGHAI).date() + timedelta(days=1)
    return datetime(day.year, day.month, day.day, hour, tzinfo=SHANGHAI).isoformat()


async def test_each_person_sees_and_changes_only_their_own_reminders(start_daemon: Any, tmp_path: Path) -> None:
    async with start_daemon(tmp_path / "data", extra=(REMINDERS,)) as daemon:
        daemon.app.config.set("plugin.reminders.timezone", "Asia/Shanghai")
        give_login(daemon, "mum", "adult", "mums-own-password-1")
        give_login(daemon, "kid", "child", "kids-own-password-1")
        mum = await login(daemon, "mum", "mums-own-password-1")
        kid = await login(daemon, "kid", "kids-own-password-1")
        async with aclosing(mum), aclosing(kid), daemon.client() as owner:
            added = await mum.post("/api/v1/reminders", json={"said": "明天早上7点 吃药"})
            assert added.status_code == 201, added.text
            pill = added.json()["reminder"]
            assert (pill["text"], pill["due"], pill["person"], pill["repeat"]) == ("吃药", tomorrow_at(7), "mum", "")
            swim = (await kid.post("/api/v1/reminders", json={"said": "每周六下午3点提醒我去游泳"})).json()["reminder"]
            assert swim["text"] == "去游泳" and swim["repeat"] == "FREQ=WEEKLY;BYDAY=SA;BYHOUR=15;BYMINUTE=0;BYSECOND=0"
            assert swim["repeat_words"] == "每周六 15:00 · every Saturday at 15:00"
            assert datetime.fromisoformat(swim["due"]).strftime("%a %H:%M") == "Sat 15:00"

            mine = (await mum.get("/api/v1/reminders")).json()
            assert (mine["person"], mine["owner"], mine["zone"]) == ("mum", False, "Asia/Shanghai")
            assert [r["id"] for r in mine["reminders"]] == [pill["id"]]
            assert [r["id"] for r in (await kid.get("/api/v1/reminders")).json()["reminders"]] == [swim["id"]]
            everyone = (await owner.get("/api/v1/reminders")).json()
            assert everyone["owner"] is True
            assert {(r["id"], r["person"]) for r in everyone["reminders"]} == {(pill["id"], "mum"), (swim["id"], "kid")}

            # Another's reminder does not exist for the child: 404, and it stays.
            for answer in (
                await kid.delete(f"/api/v1/reminders/{pill['id']}"),
                await kid.post(f"/api/v1/reminders/{pill['id']}/snooze", json={"by": "10m"}),
            ):
                assert answer.status_code == 404, answer.text
                assert "not yours" in answer.json()["error"]
            plugin = daemon.app.host.pm.get_plugin("reminders")
            assert {r.id for r in plugin.store.pending()} == {pill["id"], swim["id"]}

            before = time.time()
            snoozed = await mum.post(f"/api/v1/reminders/{pill['id']}/snooze", json={"by": "10m"})
            assert snoozed.status_code == 200, snoozed.text
            assert 590 <= datetime.fromisoformat(snoozed.json()["reminder"]["due"]).timestamp() - before <= 610
            bad = await mum.post(f"/api/v1/reminders/{pill['id']}/snooze", json={"by": "a while"})
            assert bad.status_code == 400 and "what time do you mean?" in bad.json()["error"]

            cancelled = await mum.delete(f"/api/v1/reminders/{pill['id']}")
            assert cancelled.json() == {"cancelled": pill["id"]}
            assert (await mum.delete(f"/api/v1/reminders/{pill['id']}")).status_code == 404
            assert (await mum.get("/api/v1/reminders")).json()["reminders"] == []

            # What it cannot read is asked back, never guessed; nothing is stored.
            unread = await mum.post("/api/v1/reminders", json={"said": "下下下周八 吃药"})
            assert unread.status_code == 400 and "what time do you mean?" in unread.json()["error"]
            no_what = await mum.post("/api/v1/reminders", json={"said": "明天早上7点"})
            assert no_what.status_code == 400 and "what should the reminder say?" in no_what.json()["error"]
            typed = await mum.post("/api/v1/reminders", json={"said": 7})
            assert typed.status_code == 400 and "'said' must be str" in typed.json()["error"]
            assert [r.id for r in plugin.store.pending()] == [swim["id"]]

            # The tool's own fields work too.
            fields = await kid.post("/api/v1/reminders", json={"when": "7点", "text": "起床", "repeat": "每个工作日"})
            assert fields.status_code == 201, fields.text
            assert fields.json()["reminder"]["repeat_words"] == "每个工作日 07:00 · every weekday at 07:00"

            # Sessions must send their CSRF token; nobody without a login gets anything.
            async with httpx.AsyncClient(base_url=daemon.url, timeout=10, cookies=mum.cookies) as forged:
                refused = await forged.post("/api/v1/reminders", json={"said": "明天早上7点 吃药"})
                assert refused.status_code == 403 and "CSRF" in refused.json()["error"]
            async with daemon.client(key=False) as anonymous:
                assert (await anonymous.get("/api/v1/reminders")).status_code == 401


async def test_the_reminder_a_child_adds_fires_as_the_child(start_daemon: Any, tmp_path: Path) -> None:
    async with start_daemon(tmp_path / "data", extra=(REMINDERS,)) as daemon:
        give_login(daemon, "kid", "child", "kids-own-password-1")
        seen: list[Any] = []
        daemon.app.bus.subscribe(lambda e: seen.append(e), "raw_input", label="test")
        kid = await login(daemon, "kid", "kids-own-password-1")
        async with aclosing(kid):
            soon = await kid.post("/api/v1/reminders", json={"said": "in 1 second drink water"})
            assert soon.status_code == 201, soon.text
        async with asyncio.timeout(15):
            while not [e for e in seen if e.data.get("channel") == "reminder"]:
                await asyncio.sleep(0.05)
        (fired,) = [e for e in seen if e.data.get("channel") == "reminder"]
        assert (fired.data["text"], fired.data["person"]) == ("reminder: drink water", "kid")
        store = daemon.app.host.pm.get_plugin("reminders").store
        async with asyncio.timeout(15):  # its turn ends, then the one-off is gone
            while store.pending():
                await asyncio.sleep(0.05)


async def test_backups_are_the_owners_and_a_damaged_archive_says_so(start_daemon: Any, tmp_path: Path) -> None:
    async with start_daemon(tmp_path / "data", extra=(BACKUP,)) as daemon:
        give_login(daemon, "kid", "child", "kids-own-password-1")
        kid = await login(daemon, "kid", "kids-own-password-1")
        admin = await login(daemon, "admin", daemon.password)
        async with aclosing(kid), aclosing(admin):
            for answer in (
                await kid.get("/plugins/backup/status"),
                await kid.post("/plugins/backup/create"),
                await kid.get("/plugins/backup/download/homeagent-20260101T000000Z.tar"),
            ):
                assert answer.status_code == 403, answer.text
            assert (await admin.get("/plugins/backup/status")).json()["archives"] == []
            made = await admin.post("/plugins/backup/create")
            assert made.status_code == 200 and made.json()["ok"] is True, made.text
            archive = Path(made.json()["path"])
            status = (await admin.get("/plugins/backup/status")).json()
            (listed,) = status["archives"]
            assert (listed["name"], listed["status"], listed["encrypted"]) == (archive.name, "complete", False)
            assert status["last"]["ok"] is True and status["running"] is False
            downloaded = await admin.get(f"/plugins/backup/download/{archive.name}")
            assert downloaded.status_code == 200 and downloaded.content == archive.read_bytes()

            broken = archive.with_name("homeagent-20250101T000000Z.tar")
            broken.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
            rows = {a["name"]: a for a in (await admin.get("/plugins/backup/status")).json()["archives"]}
            assert rows[broken.name]["status"].startswith("damaged:"), rows[broken.name]
