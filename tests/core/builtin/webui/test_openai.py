"""The OpenAI-compatible endpoint, driven by the official ``openai`` package over real HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest

from homeagent_sdk.testing import FakeReply

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)


def client_for(daemon: WebDaemon, key: str | None = None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=daemon.url + "/v1", api_key=key or daemon.api_key, max_retries=0, timeout=10)


async def collect(client: openai.AsyncOpenAI, text: str) -> dict[str, Any]:
    """Stream one completion; returns the joined content, reasoning, chunks and final usage."""
    stream = await client.chat.completions.create(
        model="homeagent", messages=[{"role": "user", "content": text}], stream=True
    )
    content, reasoning, chunks, usage, finish = [], [], [], None, None
    async for chunk in stream:
        chunks.append(chunk)
        delta = chunk.choices[0].delta
        if delta.content:
            content.append(delta.content)
        extra = (delta.model_extra or {}).get("reasoning_content")
        if extra:
            assert delta.content == ""
            reasoning.append(extra)
        if chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
            usage = chunk.usage
    return {"content": "".join(content), "reasoning": "".join(reasoning), "chunks": chunks, "usage": usage,
            "finish": finish, "parts": content}


async def test_a_non_streaming_completion_returns_the_reply_reasoning_and_usage(daemon: WebDaemon):
    daemon.model.add(FakeReply("你好，我是 HomeAgent。", reasoning="先打个招呼。",
                               usage={"prompt": 11, "completion": 7, "total": 18}))
    async with client_for(daemon) as client:
        response = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "system", "content": "ide template"},
                                      {"role": "user", "content": "你是谁？"}]
        )
    assert response.object == "chat.completion" and response.id.startswith("chatcmpl-")
    assert response.model == "gpt-4o"  # echoed, not interpreted
    message = response.choices[0].message
    assert message.role == "assistant" and message.content == "你好，我是 HomeAgent。"
    assert message.model_extra["reasoning_content"] == "先打个招呼。"
    assert response.choices[0].finish_reason == "stop"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.total_tokens) == (11, 7, 18)
    # Only the last message is the input: the IDE's system template never reaches the model.
    sent = daemon.model.requests[-1]["messages"]
    assert sent[-1] == {"role": "user", "content": "你是谁？"}
    assert not any(m.get("content") == "ide template" for m in sent)


async def test_a_streaming_completion_forwards_reasoning_then_content_deltas_and_ends_with_usage(daemon: WebDaemon):
    daemon.model.chunk_size = 4
    answer = "这是一段会被分成很多块的流式回答，每块四个字。"
    thought = "用户想看流式输出，我慢慢想。"
    daemon.model.add(FakeReply(answer, reasoning=thought, usage={"prompt": 30, "completion": 20, "total": 50}))
    async with client_for(daemon) as client:
        got = await collect(client, "流式回答我")
    assert got["content"] == answer and got["reasoning"] == thought
    assert len(got["parts"]) == len(answer) // 4 + 1  # forwarded delta by delta, not as one block
    first = got["chunks"][0]
    assert first.object == "chat.completion.chunk" and first.choices[0].delta.role == "assistant"
    kinds = ["r" if (c.choices[0].delta.model_extra or {}).get("reasoning_content") else
             "c" if c.choices[0].delta.content else "-" for c in got["chunks"]]
    assert "".join(kinds).strip("-") == "r" * (len(thought) // 4 + 1) + "c" * len(got["parts"])
    assert got["finish"] == "stop"
    assert (got["usage"].prompt_tokens, got["usage"].total_tokens) == (30, 50)
    assert len({c.id for c in got["chunks"]}) == 1


async def test_concurrent_streams_on_the_http_channel_only_get_their_own_deltas(daemon: WebDaemon):
    daemon.model.chunk_size = 3
    first = "第一位客户端收到的完整回答，只属于它自己。"
    second = "第二位客户端的回答，和第一位的完全不同，也更长一些。"
    daemon.model.add(FakeReply(first, reasoning="甲的思考", delay=0.2), FakeReply(second, reasoning="乙的思考"))
    async with client_for(daemon) as client:
        task_a = asyncio.create_task(collect(client, "问题甲"))
        await daemon.model.wait_started(daemon.model.calls + 1)
        task_b = asyncio.create_task(collect(client, "问题乙"))
        a, b = await asyncio.gather(task_a, task_b)
    assert (a["content"], a["reasoning"]) == (first, "甲的思考")
    assert (b["content"], b["reasoning"]) == (second, "乙的思考")


async def test_a_stream_delivers_a_reply_that_arrives_without_deltas(daemon: WebDaemon):
    daemon.app.kernel.settings.stream = False  # the provider answers in one piece
    daemon.model.add(FakeReply("一次性的回答", reasoning="没有流式"))
    try:
        async with client_for(daemon) as client:
            got = await collect(client, "不流式也行")
    finally:
        daemon.app.kernel.settings.stream = True
    assert (got["content"], got["reasoning"]) == ("一次性的回答", "没有流式")


async def test_models_lists_homeagent(daemon: WebDaemon):
    async with client_for(daemon) as client:
        models = await client.models.list()
    assert [(m.id, m.object, m.owned_by) for m in models.data] == [("homeagent", "model", "homeagent")]


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([], "messages must be a non-empty array"),
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
         "last message must be from user"),
        ([{"role": "user", "content": "   "}], "no text content"),
    ],
)
async def test_bad_requests_are_refused_with_a_400_the_client_can_read(daemon: WebDaemon, messages, message):
    calls = daemon.model.calls
    async with client_for(daemon) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="homeagent", messages=messages)
    assert caught.value.status_code == 400 and message in str(caught.value)
    assert caught.value.type == "invalid_request_error"
    assert daemon.model.calls == calls


async def test_content_parts_are_reduced_to_their_text(daemon: WebDaemon):
    daemon.model.add("收到")
    async with client_for(daemon) as client:
        response = await client.chat.completions.create(
            model="homeagent",
            messages=[{"role": "user", "content": [{"type": "text", "text": "第一段"},
                                                   {"type": "text", "text": "第二段"}]}],
        )
    assert response.choices[0].message.content == "收到"
    assert daemon.model.requests[-1]["messages"][-1]["content"] == "第一段第二段"


async def test_a_wrong_key_is_refused(daemon: WebDaemon):
    async with client_for(daemon, key="not-the-key") as client:
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()


async def test_http_turns_are_not_remembered_but_web_chat_turns_are(daemon: WebDaemon):
    memory = daemon.app.memory
    assert memory is not None
    daemon.model.add("不会被记住的回答", "流式也不会被记住", "会被记住的回答")
    async with client_for(daemon) as client:
        await client.chat.completions.create(model="homeagent", messages=[{"role": "user", "content": "秘密问题一"}])
        await collect(client, "秘密问题二")
    async with daemon.client() as web:
        assert (await web.post("/api/v1/chat", json={"message": "请记住这句话"})).status_code == 200

    def texts() -> str:
        log = " ".join(str(r.get("content")) for r in memory.textlog.iter_records())
        context = " ".join(e.text for e in memory.context.events)
        return log + " | " + context

    remembered = await asyncio.to_thread(texts)
    assert "请记住这句话" in remembered and "会被记住的回答" in remembered  # the check can see memory
    for secret in ("秘密问题一", "秘密问题二", "不会被记住的回答", "流式也不会被记住"):
        assert secret not in remembered
    # Nor does the web UI's chat history show IDE traffic.
    async with daemon.client() as web:
        history = (await web.get("/api/v1/chat/history")).json()["messages"]
    assert not any("秘密问题" in m["content"] for m in history)


async def test_an_error_after_the_headers_travels_in_stream(daemon: WebDaemon):
    from homeagent_sdk.errors import ProviderError

    daemon.model.add(ProviderError("upstream exploded"))
    async with (
        httpx.AsyncClient(base_url=daemon.url, headers={"X-API-Key": daemon.api_key}, timeout=10) as client,
        client.stream("POST", "/v1/chat/completions",
                      json={"messages": [{"role": "user", "content": "boom"}], "stream": True}) as response,
    ):
        assert response.status_code == 200 and response.headers["x-accel-buffering"] == "no"
        lines = [line async for line in response.aiter_lines() if line.startswith("data: ")]
    assert '"role":"assistant"' in lines[0]
    assert "upstream exploded" in lines[-1] and '"error"' in lines[-1]


async def test_a_restarted_provider_stream_is_not_repeated_to_the_client(daemon: WebDaemon):
    daemon.model.chunk_size = 5
    answer = "重新开始的流不应该让客户端看到重复的文字。"
    daemon.model.add(FakeReply(answer, reset_after=6))
    async with client_for(daemon) as client:
        got = await collect(client, "重置一下")
    assert got["content"] == answer


async def test_streamed_inputs_are_recorded_as_coming_from_the_http_source(daemon: WebDaemon):
    seen: list[dict[str, Any]] = []
    unsubscribe = daemon.app.bus.subscribe(lambda event: seen.append(event.data), "raw_input")
    try:
        async with client_for(daemon) as client:
            await collect(client, "我从哪里来")
        await daemon.app.bus.drain()
    finally:
        unsubscribe()
    assert [(e["text"], e["channel"], e["source"]) for e in seen] == [("我从哪里来", "http", "http")]
