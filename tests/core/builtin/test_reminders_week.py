"""``bench/reminders_week.py``: the week docs/REMINDERS.md shows, played again and checked.

Runs the script (a real agent, the loopback model in tool mode, a simulated clock) and checks
what the transcript claims: each reminder reaches its own person at its time, the snoozed one
at its new time, the cancelled one never, the one missed while the agent was down at the next
start saying when it was due; the child neither sees nor cancels his mother's reminders.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def week(*args: str) -> str:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "reminders_week.py"), *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_a_week_of_reminders_for_two_people() -> None:
    events = json.loads(week("--json"))
    fired = [(e["at"], e["who"], e["text"]) for e in events if e["kind"] == "fired"]
    wake = [(at, who) for at, who, text in fired if text == "[提醒] 叫孩子起床"]
    assert wake == [(f"2026-12-{day:02d}T07:00+08:00", "mum") for day in (7, 8, 9, 10, 11)]
    assert ("2026-12-07T18:00+08:00", "xiaoming", "[提醒] 练琴") in fired  # snoozed from 17:00
    assert ("2026-12-12T15:00+08:00", "xiaoming", "[提醒] 去游泳") in fired
    assert ("2026-12-09T22:30+08:00", "mum", "[提醒] 交水费（原定 2026-12-09T20:00+08:00）") in fired
    assert not [f for f in fired if "体检" in f[2]]  # cancelled on Wednesday
    said = {e["text"]: e for e in events if e["kind"] == "say"}
    assert {r["person"] for r in json.loads(said["我有哪些提醒？"]["result"])["reminders"]} == {"xiaoming"}
    assert "no pending reminder 'reminder_1'" in said["把 reminder_1 取消掉"]["result"]
    left = json.loads(said["我还有哪些提醒？"]["result"])["reminders"]
    assert [(r["text"], r["due"]) for r in left] == [("叫孩子起床", "2026-12-14T07:00:00+08:00")]


def test_the_transcript_in_the_docs_is_the_one_the_script_prints() -> None:
    docs = (ROOT / "docs" / "REMINDERS.md").read_text(encoding="utf-8")
    section = docs[docs.index("## A week of reminders for two people") :]
    assert week() in section, "run `python bench/reminders_week.py` and paste its output into docs/REMINDERS.md"
