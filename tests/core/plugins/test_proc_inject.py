"""``io.inject*`` from an out-of-process plugin on the real kernel: the plugin's message id reaches it."""

from __future__ import annotations

import json

from test_proc import install_raw

from homeagent_sdk.testing import AgentHarness


async def test_a_message_id_sent_twice_by_a_plugin_is_answered_once(agent: AgentHarness) -> None:
    install_raw(agent.data_dir, caps=["io"])
    agent.model.add("first answer", "second answer")
    await agent.start()

    async def inject(text: str, message_id: str) -> dict[str, object]:
        params = {"source": "raw", "channel": "raw", "text": text, "message_id": message_id}
        answer = await agent.call_tool("raw_call", method="io.injectText", params=params)
        return json.loads(answer.result)  # type: ignore[no-any-return]

    assert (await inject("在吗", "m1"))["error"] == ""
    await agent.model.wait_started(1)
    assert (await inject("在吗", "m1"))["error"] == ""  # the same message delivered again
    assert (await inject("还在吗", "m2"))["error"] == ""  # the next message
    await agent.model.wait_started(2)  # the second model call is for m2: the re-sent m1 was not run again
    assert [r["messages"][-1]["content"] for r in agent.model.requests] == ["在吗", "还在吗"]
