"""FakeModel: scripted replies in the unified provider shapes."""

from __future__ import annotations

import asyncio
import json

import pytest

from homeagent_sdk._fake_model import FakeModel, FakeReply, ToolCallReply
from homeagent_sdk.api import ChatProvider
from homeagent_sdk.errors import ProviderError


async def test_chat_answers_in_the_unified_response_shape_and_records_requests() -> None:
    model = FakeModel(["hello", ToolCallReply("lookup", {"key": "a"}, text="checking")])
    assert isinstance(model, ChatProvider)
    request = {"model": "", "messages": [{"role": "user", "content": "hi"}]}
    first = await model.chat(request)
    assert (first["content"], first["finish_reason"], first["tool_calls"]) == ("hello", "stop", [])
    request["messages"].append({"role": "assistant", "content": "later"})
    assert model.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    second = await model.chat(request)
    (call,) = second["tool_calls"]
    assert (call["type"], call["name"], call["arguments"], second["finish_reason"]) == (
        "function",
        "lookup",
        {"key": "a"},
        "tool_calls",
    )
    assert set(second["token_usage"]) == {"prompt", "completion", "total"}


async def test_stream_splits_text_and_tool_arguments_into_unified_chunks() -> None:
    model = FakeModel(
        [ToolCallReply("lookup", {"key": "长的参数"}, text="abcdefghij", reasoning="thought")], chunk_size=4
    )
    chunks = [c async for c in model.chat_stream({"messages": []})]
    assert [c["reasoning_content"] for c in chunks if c.get("reasoning_content")] == ["thou", "ght"]
    assert [c["content"] for c in chunks if c["content"]] == ["abcd", "efgh", "ij"]
    fragments = [f for c in chunks for f in c.get("tool_calls", [])]
    assert fragments[0]["name"] == "lookup" and "name" not in fragments[1]
    assert {f["stream_index"] for f in fragments} == {0}
    assert json.loads("".join(f["raw_arguments"] for f in fragments)) == {"key": "长的参数"}
    assert chunks[-1]["done"] and chunks[-1]["finish_reason"] == "tool_calls"


async def test_hang_waits_until_cancelled_and_counts_it() -> None:
    model = FakeModel([FakeReply(hang=True)])
    task = asyncio.ensure_future(model.chat({"messages": []}))
    await model.wait_started(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.cancelled == 1


async def test_an_exhausted_script_says_so_and_errors_are_raised() -> None:
    model = FakeModel([ProviderError("upstream 500")])
    with pytest.raises(ProviderError, match="upstream 500"):
        await model.chat({"messages": []})
    with pytest.raises(ProviderError, match="script exhausted after 1 replies"):
        await model.chat({"messages": []})
    assert await FakeModel(default="fallback").chat({"messages": []}) == {
        "content": "fallback",
        "reasoning_content": "",
        "finish_reason": "stop",
        "token_usage": {"prompt": 0, "completion": 2, "total": 2},
        "tool_calls": [],
    }


async def test_a_responder_sees_each_request() -> None:
    model = FakeModel(responder=lambda req: f"{len(req['messages'])} messages")
    messages = [{"role": "user", "content": str(n)} for n in range(3)]
    assert (await model.chat({"messages": messages}))["content"] == "3 messages"
    with pytest.raises(ValueError, match="needs a tool name"):
        ToolCallReply()
