"""Conversations on the chat page in headless Chromium: "new chat" starts an empty one whose
prompt holds nothing of the others, and switching back shows the earlier one, on a phone too."""

from __future__ import annotations

import json
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


async def send(page, text: str, reply: str) -> None:
    await page.fill("#input", text)
    await page.press("#input", "Enter")
    await page.locator(f".msg.assistant[data-done='1']:has-text('{reply}')").wait_for(timeout=10_000)


async def test_new_chat_and_switching_between_conversations(daemon, page, login):
    daemon.model.add("answer one", "answer two")
    await page.set_viewport_size({"width": 390, "height": 844})
    await login(page, daemon)
    await send(page, "the first conversation", "answer one")

    await page.click("#new-chat")
    await page.locator("#thread option").nth(1).wait_for(state="attached", timeout=10_000)
    assert await page.locator("#thread option").count() == 2
    # the list is redrawn before the new (empty) conversation's history: wait for it
    await page.locator("#messages .msg").first.wait_for(state="detached", timeout=10_000)
    await send(page, "a second conversation", "answer two")
    request = json.dumps(daemon.model.requests[-1], ensure_ascii=False)
    assert "the first conversation" not in request and "answer one" not in request
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390

    second = await page.input_value("#thread")
    assert second.startswith("web:")
    await page.select_option("#thread", "main")
    await page.locator(".msg.user:has-text('the first conversation')").wait_for(timeout=10_000)
    assert await page.locator(".msg:has-text('a second conversation')").count() == 0
    await page.select_option("#thread", second)
    await page.locator(".msg.user:has-text('a second conversation')").wait_for(timeout=10_000)
    assert await page.locator(".msg:has-text('the first conversation')").count() == 0

    # A reload keeps both conversations in the list.
    await page.reload()
    await page.locator("#thread option").nth(1).wait_for(state="attached", timeout=10_000)
    assert await page.locator("#thread option").count() == 2
