"""``homeagent reminders`` lists and cancels reminders offline, and a running daemon honours a cancel."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HOMEAGENT = [sys.executable, "-m", "homeagent_core.cli"]
REMINDERS = "homeagent_core.builtin.reminders"
SHANGHAI = {"plugin.reminders.timezone": "Asia/Shanghai"}


def _reminders(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HOMEAGENT, "reminders", *args, "--data", str(data)], capture_output=True, text=True, timeout=60
    )


async def test_list_and_cancel_work_on_the_data_dir_of_a_stopped_daemon(harness: Any, tmp_path: Path) -> None:
    data = tmp_path / "ha"
    h = await harness([REMINDERS], SHANGHAI, data=data)
    await h.ok("reminder_set", when="每个月1号早上9点", text="交房租")
    await h.ok("reminder_set", when="in 3 hours", text="call mum")
    await h.stop()

    listed = await asyncio.to_thread(_reminders, data, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["id"], r["text"]) for r in rows] == [("reminder_2", "call mum"), ("reminder_1", "交房租")]
    assert rows[1]["repeat"] == "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0;BYSECOND=0"
    assert rows[1]["due"].endswith("+08:00")
    table = await asyncio.to_thread(_reminders, data, "list")
    assert "reminder_1" in table.stdout and "交房租  (FREQ=MONTHLY" in table.stdout

    cancelled = await asyncio.to_thread(_reminders, data, "cancel", "reminder_1")
    assert (cancelled.returncode, cancelled.stdout.strip()) == (0, "reminder_1 cancelled")
    again = await asyncio.to_thread(_reminders, data, "cancel", "reminder_1")
    assert again.returncode == 1 and "no pending reminder 'reminder_1'" in again.stderr
    bad = await asyncio.to_thread(_reminders, data, "cancel", "banana")
    assert bad.returncode == 1 and "invalid reminder id 'banana'" in bad.stderr

    restarted = await harness([REMINDERS], SHANGHAI, data=data)
    assert [r["id"] for r in json.loads(await restarted.ok("reminder_list"))["reminders"]] == ["reminder_2"]


async def test_a_reminder_cancelled_from_the_command_line_does_not_fire_in_the_running_daemon(
    harness: Any, tmp_path: Path
) -> None:
    data = tmp_path / "ha"
    h = await harness([REMINDERS], SHANGHAI, data=data)
    await h.ok("reminder_set", when="in 3 seconds", text="should not come")
    cancelled = await asyncio.to_thread(_reminders, data, "cancel", "reminder_1")
    assert cancelled.returncode == 0, cancelled.stderr
    plugin = h.plugin("reminders")
    async with asyncio.timeout(15):
        while plugin._tasks:  # its wait ran out and it looked the row up
            await asyncio.sleep(0.05)
    assert plugin.fired == []
    assert not [e for e in h.events if e.name == "raw_input"]
