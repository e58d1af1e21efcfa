"""The library Agent: sync twins for scripts, a clear refusal inside an event loop, llm= validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from homeagent_core.library import Agent
from homeagent_sdk.errors import SyncInAsyncError, UsageError
from homeagent_sdk.testing import FakeModel


def test_ask_sync_works_from_plain_code_and_keeps_the_agent_running(tmp_path: Path):
    model = FakeModel(["first", "second"])
    agent = Agent(tmp_path, provider=model, load_entrypoints=False, builtins=())
    try:
        assert agent.ask_sync("one") == "first"
        assert agent.ask_sync("two") == "second"
        assert "one" in str(model.requests[-1]["messages"])  # same running agent remembers
    finally:
        agent.close_sync()


async def test_ask_sync_inside_an_event_loop_says_to_await_instead(tmp_path: Path):
    agent = Agent(tmp_path, provider=FakeModel(default="x"), load_entrypoints=False, builtins=())
    refusal = r"ask_sync\(\) cannot run inside a running event loop.*await agent\.ask"
    with pytest.raises(SyncInAsyncError, match=refusal):
        agent.ask_sync("hi")
    await agent.aclose()


def test_an_incomplete_llm_source_is_refused_with_an_example(tmp_path: Path):
    with pytest.raises(UsageError, match="base_url, model required"):
        Agent(tmp_path, llm={"adapter": "openai"}, load_entrypoints=False, builtins=())
    with pytest.raises(UsageError, match="unknown keys"):
        Agent(tmp_path, llm={"base_url": "http://127.0.0.1:1/v1", "model": "m", "colour": "red"},
              load_entrypoints=False, builtins=())
