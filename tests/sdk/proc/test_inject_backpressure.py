"""An out-of-process plugin sees a full input queue as ``InputQueueFull``, exactly as in process."""

from __future__ import annotations

from typing import Any

from homeagent_core.agent.scheduler import InputItem, Scheduler
from homeagent_sdk import hookimpl
from homeagent_sdk.errors import InputQueueFull, PluginError
from homeagent_sdk.types import ToolDef


class Announcer:
    name = "announcer"

    def __init__(self) -> None:
        self.sdk: Any = None

    @hookimpl
    def startup(self, sdk: Any) -> None:
        self.sdk = sdk

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        async def announce(text: str) -> str:
            try:
                await self.sdk.io.inject_text(text, "announcer")
            except InputQueueFull as exc:
                return f"busy, retry after {exc.retry_after:g} s: {exc}"
            except PluginError as exc:
                return f"other error: {exc}"
            return "accepted"

        registry.add(ToolDef(name="announce", description="inject a text", handler=announce,
                             parameters={"type": "object", "properties": {"text": {"type": "string"}}}))


async def test_a_full_queue_reaches_the_plugin_as_input_queue_full_with_its_retry_hint(proc_harness):
    harness = await proc_harness(Announcer(), name="announcer")
    scheduler = Scheduler(capacity=0)  # the real scheduler, full from the start

    async def inject(params: Any) -> None:
        scheduler.submit(InputItem(text=params["text"], channel=params["channel"], source=params["source"]))

    harness.host_peer.handlers["io.injectText"] = inject
    answer = await harness.call_tool("announce", text="hello")
    assert answer.startswith("busy, retry after 5 s: the agent is busy: its input queue is full"), answer
    assert "'announcer'" in answer


def test_the_error_survives_its_message_round_trip_and_gives_an_http_retry_header():
    busy = InputQueueFull(f"{InputQueueFull.PREFIX} (3 waiting); retry in about 12 s", retry_after=11.2)
    again = InputQueueFull.from_message("io.injectText: " + str(busy))
    assert again is not None and again.retry_after == 12 and str(again).startswith(InputQueueFull.PREFIX)
    assert busy.retry_after_header == "12" and InputQueueFull("x", retry_after=0.2).retry_after_header == "1"
    assert InputQueueFull.from_message("memory.recall: not available") is None
