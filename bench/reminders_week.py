"""A week of reminders for two people, played through a real agent on a simulated clock.

A library :class:`~homeagent_core.library.Agent` (the ``reminders`` built-in, memory off) talks
to the loopback OpenAI-compatible model of ``tests/openai_loopback.py`` in tool mode: each thing
a person says is sent as that person (妈妈 ``mum``, an adult; 小明 ``xiaoming``, a child), and the
model answers it with the tool call a model would make (``reminder_set``, ``reminder_snooze``,
``reminder_cancel``, ``reminder_list``), then with the tool's real result. Reminders fire
through the agent as they would in the daemon; the plugin's clock is a simulated one the script
moves forward from one due time to the next, so the week takes seconds. Midweek the agent is
stopped for an evening (a reminder falls due meanwhile) and started again over the same data
directory: the missed reminder fires at start and says when it was due.

Prints the transcript as Markdown (docs/REMINDERS.md keeps one: "A week of reminders for two
people"); ``--json`` prints the events instead.

    python bench/reminders_week.py [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]
os.environ.setdefault("HOMEAGENT_DISABLE_PLUGINS", "memory")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openai_loopback import openai_loopback  # noqa: E402

from homeagent_core.builtin.reminders import RemindersPlugin  # noqa: E402
from homeagent_core.library import Agent  # noqa: E402
from homeagent_sdk import InjectOptions, Principal  # noqa: E402

ZONE = ZoneInfo("Asia/Shanghai")
PEOPLE = {"mum": ("妈妈", "adult"), "xiaoming": ("小明", "child")}
WEEKDAYS = ("周一 Mon", "周二 Tue", "周三 Wed", "周四 Thu", "周五 Fri", "周六 Sat", "周日 Sun")


class SimClock:
    """A clock that stands still until :meth:`set` moves it; ``sleep`` waits for simulated time."""

    def __init__(self, start: datetime) -> None:
        self._now = start.timestamp()
        self._moved = asyncio.Condition()

    def time(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        until = self._now + seconds
        async with self._moved:
            await self._moved.wait_for(lambda: self._now >= until)

    async def set(self, when: datetime) -> None:
        self._now = max(self._now, when.timestamp())
        async with self._moved:
            self._moved.notify_all()

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._now, ZONE)


@dataclass
class Week:
    """The agent under test and what happened, in order."""

    data: Path
    model: Any
    clock: SimClock
    agent: Agent | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    owners: dict[str, str] = field(default_factory=dict)
    seen: int = 0  # fired reminders already in the transcript (this start)

    @property
    def plugin(self) -> RemindersPlugin:
        assert self.agent is not None
        plugin = self.agent.app.host.pm.get_plugin("reminders")
        assert isinstance(plugin, RemindersPlugin)
        return plugin

    async def start(self) -> None:
        llm = {"base_url": self.model.base_url, "model": "loopback", "adapter": "openai", "api_key": "sk-loopback"}
        self.agent = Agent(self.data, llm=llm, load_entrypoints=False,
                           builtins=("homeagent_core.builtin.cfgmgr", "homeagent_core.builtin.reminders"))
        self.plugin.clock = self.clock  # before startup: reminders due while it was down fire by this clock
        self.agent.app.bus.subscribe(self._heard, "agent_output", label="week")
        await self.agent.start()
        self.agent.app.config.set("plugin.reminders.timezone", ZONE.key)
        people = self.agent.app.people
        assert people is not None
        for name, (_, role) in PEOPLE.items():
            if people.get(name) is None:
                people.add(name, role)
        self.note("start", "")

    async def stop(self) -> None:
        assert self.agent is not None
        await self.agent.aclose()
        self.agent, self.seen = None, 0
        self.outputs.clear()
        self.note("stop", "")

    def _heard(self, event: Any) -> None:
        if event.data.get("channel") == "reminder":
            self.outputs.append(dict(event.data))

    def note(self, kind: str, text: str, **extra: Any) -> None:
        self.events.append({"at": self.clock.now().isoformat(timespec="minutes"), "kind": kind, "text": text, **extra})

    async def say(self, who: str, said: str, tool: str, **arguments: Any) -> None:
        """``who`` says ``said``; the model answers it with ``tool(**arguments)``."""
        assert self.agent is not None
        self.model.call(tool, **arguments)
        seen = len(self.model.requests)
        options = InjectOptions(principal=Principal(person=who, door="library"))
        reply = await self.agent.kernel.ask(said, "library", options=options, timeout=60)
        results = [m for body in self.model.requests[seen:] for m in body["messages"][-1:] if m.get("role") == "tool"]
        result = str(results[-1]["content"]) if results else ""
        self.note("say", said, who=who, tool=tool, arguments=arguments, result=result, reply=str(reply))
        await self.learn_owners()

    async def until(self, when: datetime) -> None:
        """Move the clock to ``when``, firing every reminder that falls due on the way, in order."""
        while True:
            pending = [r for r in await asyncio.to_thread(self.plugin.store.pending) if r.due <= when.timestamp()]
            if not pending:
                break
            due = min(r.due for r in pending)
            now_due = [r for r in pending if r.due == due]
            await self.clock.set(datetime.fromtimestamp(due, ZONE))
            await self.wait_fired(len(self.plugin.fired) + len(now_due))
        await self.clock.set(when)

    async def wait_fired(self, count: int) -> None:
        """Wait until ``count`` reminders have fired in all and each one's turn has answered."""
        plugin = self.plugin
        async with asyncio.timeout(60):
            while len(plugin.fired) < count or len(self.outputs) < count:
                await asyncio.sleep(0.01)
        for reminder_id, text in plugin.fired[self.seen :]:
            self.note("fired", text, id=reminder_id, who=self.owners.get(reminder_id, ""))
        self.seen = len(plugin.fired)

    async def learn_owners(self) -> None:
        for r in await asyncio.to_thread(self.plugin.store.pending):
            self.owners[r.id] = r.person


def _short(result: str) -> str:
    """A reminder_list result as one line per reminder: id, text, next due, repeat rule."""
    try:
        listed = json.loads(result)
    except ValueError:
        return result
    if not isinstance(listed, dict):
        return result
    rows = [f"{r['id']} {r['text']} {r['due']}{' ' + r['repeat'] if r['repeat'] else ''} ({r['person']})"
            for r in listed.get("reminders", [])]
    return "; ".join(rows) or "(none)"


def local(iso: str) -> str:
    when = datetime.fromisoformat(iso)
    return f"{WEEKDAYS[when.weekday()]} {when.strftime('%m-%d %H:%M')}"


def markdown(events: list[dict[str, Any]]) -> str:
    lines = [
        "| when (Asia/Shanghai) | who | said / happened | tool call | tool result |",
        "|---|---|---|---|---|",
    ]
    for e in events:
        who = PEOPLE.get(e.get("who", ""), ("", ""))[0]
        if e["kind"] == "say":
            args = ", ".join(f'{k}="{v}"' for k, v in e["arguments"].items())
            result = _short(e["result"]).replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {local(e['at'])} | {who} | {e['text']} | `{e['tool']}({args})` | {result} |")
        elif e["kind"] == "fired":
            lines.append(f"| {local(e['at'])} | → {who} | **{e['text']}** | (reminder `{e['id']}` fires) | |")
        elif e["kind"] == "stop":
            lines.append(f"| {local(e['at'])} | | *the daemon stops* | | |")
        elif e["kind"] == "start":
            lines.append(f"| {local(e['at'])} | | *the daemon starts* | | |")
    return "\n".join(lines) + "\n"


def at(day: int, hour: int, minute: int = 0) -> datetime:
    """Day ``day`` of the week played (0 = Sunday 2026-12-06) at hour:minute, household time."""
    return datetime(2026, 12, 6 + day, hour, minute, tzinfo=ZONE)


async def play(week: Week) -> None:
    await week.start()
    await week.say("mum", "每个工作日早上7点提醒我叫孩子起床", "reminder_set",
                   when="每个工作日早上7点", text="叫孩子起床")
    await week.say("xiaoming", "周六下午3点提醒我去游泳", "reminder_set", when="周六下午3点", text="去游泳")
    await week.say("xiaoming", "明天下午5点提醒我练琴", "reminder_set", when="明天下午5点", text="练琴")
    await week.say("mum", "周三晚上8点提醒我交水费", "reminder_set", when="周三晚上8点", text="交水费")
    await week.say("mum", "周四上午9点提醒我去体检", "reminder_set", when="周四上午9点", text="去体检")
    await week.say("xiaoming", "我有哪些提醒？", "reminder_list")
    await week.say("xiaoming", "把 reminder_1 取消掉", "reminder_cancel", reminder_id="reminder_1")

    await week.until(at(1, 16, 30))  # Monday: the weekday reminder fires at 7
    await week.say("xiaoming", "练琴改到晚上6点再提醒我", "reminder_snooze", reminder_id="reminder_3", by="晚上6点")
    await week.until(at(3, 10))  # Tuesday and Wednesday mornings
    await week.say("mum", "体检改期了，取消那个提醒", "reminder_cancel", reminder_id="reminder_5")
    await week.until(at(3, 19))
    await week.stop()  # Wednesday evening: the daemon is down while 交水费 falls due at 20:00
    await week.clock.set(at(3, 22, 30))
    await week.start()
    await week.wait_fired(1)
    await week.until(at(6, 17))  # Thursday to Saturday
    await week.say("mum", "我还有哪些提醒？", "reminder_list")
    await week.until(at(7, 12))  # Sunday: nothing on weekends
    await week.stop()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the events as JSON instead of Markdown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reminders-week-") as tmp, openai_loopback(tools=True) as model:
        week = Week(Path(tmp) / "data", model, SimClock(at(0, 20)))
        await play(week)
    print(json.dumps(week.events, ensure_ascii=False, indent=1) if args.json else markdown(week.events), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
