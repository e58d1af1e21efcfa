"""A person's own API key on the OpenAI-compatible /v1, over real HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)


def offered(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or ()}


async def test_a_persons_key_speaks_as_that_person_and_dies_with_them(daemon: WebDaemon):
    people = daemon.app.people
    people.add("kid", "child")
    key = people.new_key("kid")
    client = openai.AsyncOpenAI(base_url=daemon.url + "/v1", api_key=key, max_retries=0, timeout=10)
    async with client:
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi from kid"}])
        kid_tools = offered(daemon.model.requests[-1])
        assert not kid_tools & {"config_set", "persona_set", "plugin_install", "cmd_run"}, kid_tools
        async with httpx.AsyncClient() as http:
            admin_api = await http.get(daemon.url + "/api/v1/kernel", headers={"Authorization": f"Bearer {key}"})
        assert admin_api.status_code == 401  # a person's key opens only the chat endpoints
        people.remove("kid")
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    owner = openai.AsyncOpenAI(base_url=daemon.url + "/v1", api_key=daemon.api_key, max_retries=0, timeout=10)
    async with owner:
        await owner.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi from the owner"}])
    assert "persona_set" in offered(daemon.model.requests[-1])
