"""The web UI's chat history after ``kill -9``: every acknowledged message, exactly once.

A real ``homeagent serve`` answers messages posted over HTTP (loopback model), is killed with
SIGKILL right after the last acknowledgement, and restarted; ``/api/v1/chat/history`` must then
hold each acknowledged message and its reply once, in order, as the conversation log does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from served import configure, fake_model, served

from homeagent_core.memory.textlog import TextLog

MESSAGES = 60
PARALLEL = 6


async def test_every_acknowledged_message_is_in_the_history_once_after_kill_9_and_restart(tmp_path: Path):
    async with fake_model() as (_, model_url):
        data = configure(tmp_path / "data", model_url)
        acknowledged: list[str] = []
        async with served(data) as daemon:
            async with daemon.client(timeout=120) as client:
                queue: asyncio.Queue[int] = asyncio.Queue()
                for i in range(MESSAGES):
                    queue.put_nowait(i)

                async def sender() -> None:
                    while not queue.empty():
                        text = f"message number {queue.get_nowait()}"
                        answer = await client.post("/api/v1/chat", json={"message": text})
                        assert answer.status_code == 200, answer.text
                        assert answer.json()["response"] == f"echo: {text}"
                        acknowledged.append(text)

                await asyncio.gather(*(sender() for _ in range(PARALLEL)))
                live = (await client.get("/api/v1/chat/history")).json()
            await daemon.kill9()  # at once: no shutdown code, no pending save gets its chance
        assert len(acknowledged) == MESSAGES
        assert [m["content"] for m in live["messages"] if m["role"] == "user"].count(acknowledged[-1]) == 1

        async with served(data) as daemon:
            async with daemon.client(timeout=30) as client:
                history = (await client.get("/api/v1/chat/history")).json()
                page = (await client.get("/api/v1/chat/history", params={"limit": 10})).json()
            await daemon.kill9()

    users = [m["content"] for m in history["messages"] if m["role"] == "user"]
    replies = [m["content"] for m in history["messages"] if m["role"] == "assistant"]
    missing = sorted(set(acknowledged) - set(users))
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged messages missing: {missing[:5]}"
    assert sorted(users) == sorted(acknowledged)  # each exactly once
    assert sorted(replies) == sorted(f"echo: {t}" for t in acknowledged)
    assert history["total"] == 2 * MESSAGES and not history["has_more"]
    assert page["messages"] == history["messages"][-10:] and page["has_more"]

    log = TextLog(data / "memory" / "text")
    records = [r for r in log.iter_records() if r["role"] in ("user", "assistant")]
    log.close()
    assert [m["id"] for m in history["messages"]] == [r["id"] for r in records]  # one source of truth


async def test_history_reads_are_served_from_memory_and_follow_purges(tmp_path: Path):
    from homeagent_core.builtin.webui.history import ChatHistory

    log = TextLog(tmp_path / "text", max_bytes=2048)
    for i in range(300):
        log.append("user", f"question {i}", channel="webui")
        log.append("assistant", f"answer {i}", channel="webui", reasoning=f"thinking {i}",
                   tools=[{"name": "clock", "success": True, "result": "12:00"}])
        log.append("user", "ide traffic", channel="http")
    assert len(log.files()) > 10  # the tail read crosses rotated files
    history = ChatHistory(log, limit=200)
    messages = history.messages
    assert len(messages) == 200 and messages[-1]["content"] == "answer 299" and messages[0]["content"] == "question 200"
    assert messages[-1]["reasoning"] == "thinking 299" and messages[-1]["tools"][0]["name"] == "clock"
    assert all(m["channel"] == "webui" for m in messages)

    log.append("user", "one more", channel="cli")
    assert history.messages[-1]["content"] == "one more"  # delivered by the log once durable
    assert log.purge(contains="thinking 299") == 1  # purge looks through the reasoning too
    assert "answer 299" not in [m["content"] for m in history.messages]
    await history.aclose()
    log.append("user", "after close", channel="webui")
    assert history.messages[-1]["content"] == "one more"
    log.close()
    empty = ChatHistory(None)
    assert empty.page() == {"messages": [], "total": 0, "offset": 0, "has_more": False}
