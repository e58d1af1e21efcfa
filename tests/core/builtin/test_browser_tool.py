"""The browser tool in headless Chromium against loopback pages, through the SSRF guard."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from web_servers import Loopback, pages_app

BROWSER = "homeagent_core.builtin.browser"
WEB = "homeagent_core.builtin.web"

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
    reason="chromium is not installed (apt-get install chromium)",
)


async def test_open_read_type_click_screenshot_and_close(harness):
    async with Loopback(pages_app()) as srv:
        h = await harness([WEB, BROWSER], {"plugin.web.allow_private": "127.0.0.1:*"}, memory=True)
        opened = await h.ok("browser", action="open", url=f"{srv.url}/app")
        assert "社区活动预约" in opened and "loading" not in opened  # rendered by JavaScript
        typed = await h.ok("browser", action="type", label="城市", text="杭州")
        assert "城市" in typed
        clicked = await h.ok("browser", action="click", label="提交")
        assert "已预约：杭州" in clicked
        shot = await h.ok("browser", action="screenshot")
        short = shot.split("media_id ")[1][:12]
        data = await h.app.services.media_store.get(short)
        assert data.startswith(b"\x89PNG")
        missing = await h.fails("browser", action="click", label="不存在的按钮")
        assert "no button, link or text labelled '不存在的按钮'" in missing
        assert await h.ok("browser", action="close") == "浏览器已关闭"
        assert not h.plugin("browser").running
        assert "no page is open" in await h.fails("browser", action="read")


async def test_without_the_allowlist_loopback_pages_are_refused(harness):
    async with Loopback(pages_app()) as srv:
        h = await harness([WEB, BROWSER])
        refused = await h.fails("browser", action="open", url=f"{srv.url}/app")
        assert "refused to connect to 127.0.0.1" in refused
        assert "unknown action" in await h.fails("browser", action="dance")


async def test_the_browser_closes_when_idle(harness):
    async with Loopback(pages_app()) as srv:
        h = await harness([WEB, BROWSER], {"plugin.web.allow_private": "127.0.0.1:*",
                                           "plugin.browser.idle_timeout": "1s"})
        await h.ok("browser", action="open", url=f"{srv.url}/article")
        plugin = h.plugin("browser")
        assert plugin.running
        async with asyncio.timeout(20):
            while plugin.running:
                await asyncio.sleep(0.1)
        # closed means closed: Playwright's driver (a child of this process) has exited and been reaped
        assert _children() == []


def _children() -> list[str]:
    """Commands of this process's live children, from /proc."""
    me, found = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(text[text.index("(") + 1:text.rindex(")")])
    return found


async def test_a_screenshot_reaches_a_model_that_sees_as_an_image_block(harness):
    from homeagent_sdk._fake_model import FakeModel, ToolCallReply

    async with Loopback(pages_app()) as srv:
        model = FakeModel([
            ToolCallReply("browser", {"action": "open", "url": f"{srv.url}/app"}),
            ToolCallReply("browser", {"action": "screenshot"}),
            "页面上是社区活动预约表单。",
        ])
        h = await harness([WEB, BROWSER], {"plugin.web.allow_private": "127.0.0.1:*"}, memory=True, model=model)
        reply = await h.kernel.ask("看看这个页面长什么样")
    assert str(reply) == "页面上是社区活动预约表单。"
    last = model.requests[-1]["messages"]
    tool_at = max(i for i, m in enumerate(last) if m["role"] == "tool")
    shown = last[tool_at + 1]
    assert shown["role"] == "user" and shown["content"][0] == {"type": "text", "text": "[工具返回的图片]"}
    assert shown["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert "media_id" in last[tool_at]["content"]
