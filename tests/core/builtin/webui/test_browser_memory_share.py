"""The owner marks a person's private document household from the web UI's memory page, in
headless Chromium; the child's next turn is then given it.

Needs Debian's ``chromium`` (``.ci/run`` installs it); skipped with the reason when absent.
"""

from __future__ import annotations

import json
import shutil

import httpx
import pytest
from test_browser import login

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


async def test_the_owner_shares_a_private_document_from_the_memory_page(daemon, page):
    people = daemon.app.people
    people.add("mum", "adult")
    people.add("kid", "child")
    kid_key = people.new_key("kid")
    doc = await daemon.app.memory.documents.add("the plumber comes on monday at nine", person="mum")

    async def kid_asks() -> str:
        before = len(daemon.model.requests)
        async with httpx.AsyncClient(base_url=daemon.url, headers={"Authorization": f"Bearer {kid_key}"},
                                     timeout=20) as kid:
            answered = await kid.post("/api/v1/chat", json={"message": "when does the plumber come on monday?"})
            assert answered.status_code == 200, answered.text
        return json.dumps(daemon.model.requests[before:], ensure_ascii=False)

    assert "comes on monday at nine" not in await kid_asks()
    await login(page, daemon)
    await page.click("nav a[data-page='memory']")
    item = page.locator("#documents li", has_text="the plumber comes on monday")
    await item.locator("small.visibility:has-text('private to mum')").wait_for()
    await item.locator("button.share").click()
    await page.locator("#documents li", has_text="the plumber comes on monday").locator(
        "small.visibility:has-text('household')"
    ).wait_for()
    assert daemon.app.memory.documents.get(doc.id).visibility == "household"
    assert "comes on monday at nine" in await kid_asks()
