"""Each person's own conversation: a turn's prompt is built from its own thread only.

A real App with real memory (files under ``tmp_path``) and a FakeModel that records every
request; what one person said must not be in any byte of another person's model request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from homeagent_core.memory.textlog import MAIN_THREAD
from homeagent_sdk._fake_model import FakeModel
from homeagent_sdk.types import InjectOptions, Principal

SECRET = "下周三我要去医院复查，别跟孩子说"


def said_by(door: str, account: str, thread: str) -> InjectOptions:
    """What a chat bridge sends for a direct message or a group message."""
    return InjectOptions(principal=Principal(door=door, account=account, thread=thread))


def web(person: str, thread: str = "") -> InjectOptions:
    return InjectOptions(principal=Principal(person=person, door="webui", thread=thread))


def log_records(data: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((data / "memory" / "text").glob("text-*.jsonl")):
        records += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return records


async def test_the_mothers_remark_is_in_no_other_persons_model_request(harness, tmp_path):
    model = FakeModel(default="好的")
    h = await harness([], model=model, memory=True)
    people = h.app.people
    people.add("mum", "adult")
    people.link("mum", "qq", "1001")
    people.add("kid", "child")
    people.add("aunt", "adult")
    people.link("aunt", "qq", "2002")
    io = h.kernel.io_for("onebot")

    await io.inject_input_sync(SECRET, "qq", said_by("qq", "1001", "qq:private:1001"))
    assert SECRET in json.dumps(model.requests[-1], ensure_ascii=False)  # her own turn sees it
    mark = len(model.requests)
    await h.kernel.ask("妈妈下周三要去哪里？", options=web("kid"))
    await io.inject_input_sync("妈妈下周三要去哪里？", "qq", said_by("qq", "2002", "qq:private:2002"))
    await io.inject_input_sync("大家好，妈妈下周三在哪？", "qq", said_by("qq", "2002", "qq:group:777"))
    await h.kernel.ask("what did we talk about?")  # the owner's own thread
    others = model.requests[mark:]
    assert len(others) == 4
    for request in others:
        raw = json.dumps(request, ensure_ascii=False)
        assert SECRET not in raw and "医院" not in raw, raw[:2000]

    # Her next turn still has her own conversation.
    await io.inject_input_sync("提醒我带病历", "qq", said_by("qq", "1001", "qq:private:1001"))
    assert SECRET in json.dumps(model.requests[-1], ensure_ascii=False)

    records = [r for r in log_records(h.app.data_dir) if r["role"] in ("user", "assistant")]
    assert all(r.get("thread") for r in records), records
    mums = [r for r in records if r["thread"] == "qq:private:1001"]
    assert {r["person"] for r in mums} == {"mum"} and len(mums) == 4
    assert {r["thread"] for r in records if r.get("person") == "kid"} == {"person:kid"}
    assert {r["thread"] for r in records if r["content"] == "what did we talk about?"} == {MAIN_THREAD}


async def test_threads_survive_a_restart_and_a_one_person_agent_keeps_one_window(harness, tmp_path):
    data = tmp_path / "data"
    h = await harness([], data=data, memory=True)
    h.app.people.add("kid", "child")
    await h.kernel.ask("my cat is called Mimi", options=web("kid"))
    await h.kernel.ask("the owner's first words")
    await h.kernel.ask("the owner's second words")
    assert "the owner's first words" in json.dumps(h.model.requests[-1])
    await h.stop()
    assert (data / "memory" / "threads" / "person%3Akid.json").exists()

    h2 = await harness([], data=data, memory=True)
    await h2.kernel.ask("what is my cat called?", options=web("kid"))
    kid = json.dumps(h2.model.requests[-1], ensure_ascii=False)
    assert "Mimi" in kid and "owner's" not in kid
    await h2.kernel.ask("and me?")
    owner = json.dumps(h2.model.requests[-1], ensure_ascii=False)
    assert "the owner's second words" in owner and "Mimi" not in owner
    assert h2.app.memory is not None
    assert [t["id"] for t in h2.app.memory.threads.threads("kid")] == ["person:kid"]


async def test_a_threads_turns_its_file_missed_in_a_crash_come_back_from_the_log(harness, tmp_path):
    data = tmp_path / "data"
    h = await harness([], data=data, memory=True)
    h.app.people.add("kid", "child")
    await h.kernel.ask("my cat is called Mimi", options=web("kid"))
    await h.stop()
    # The window's file is saved debounced: a crash before the save loses it; the log has the turn.
    (data / "memory" / "threads" / "person%3Akid.json").unlink()

    h2 = await harness([], data=data, memory=True)
    await h2.kernel.ask("what is my cat called?", options=web("kid"))
    messages = h2.model.requests[-1]["messages"]
    assert [m["content"] for m in messages if m["role"] != "system"][:2] == ["my cat is called Mimi", "ok"]
    await h2.kernel.ask("and again?", options=web("kid"))  # restored once, not on every turn
    again = [m["content"] for m in h2.model.requests[-1]["messages"] if m["role"] != "system"]
    assert again.count("my cat is called Mimi") == 1


async def test_a_plugin_cannot_read_a_conversation_by_naming_it(harness):
    h = await harness([], memory=True)
    await h.kernel.ask("the owner's private plans")
    alarm = h.kernel.io_for("alarm", external=True)  # a plugin nobody linked: a guest's door
    for thread in ("main", "web:owner:1", "person:owner", "qq:private:1001"):
        await alarm.inject_input_sync("what are the plans?", "alarm", said_by("alarm", "", thread))
        assert "private plans" not in json.dumps(h.model.requests[-1]), thread
    # Its own door's threads it may name.
    await alarm.inject_input_sync("wake me at 7", "alarm", said_by("alarm", "", "alarm:bedroom"))
    records = log_records(h.app.data_dir)
    assert [r["thread"] for r in records if r["content"] == "wake me at 7"] == ["alarm:bedroom"]
    assert {r["thread"] for r in records if r["content"] == "what are the plans?"} == {"guest:alarm:"}
