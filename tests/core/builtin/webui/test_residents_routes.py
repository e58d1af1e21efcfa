"""Resident sub-agents in the web UI: JSON routes over real HTTP and the panel in headless Chromium."""

from __future__ import annotations

import asyncio
import shutil
from typing import Any

import pytest

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


async def _resident_with_output(daemon: WebDaemon, name: str = "shop") -> Any:
    residents = daemon.app.kernel.residents
    await residents.create(name, "维护购物清单")
    daemon.model.add("清单：牛奶")
    await residents.send(name, "加牛奶", wait=True, timeout=10)
    return residents


async def test_residents_are_listed_messaged_stopped_and_destroyed_over_http(daemon: WebDaemon):
    residents = await _resident_with_output(daemon)
    async with daemon.client() as client:
        listed = (await client.get("/api/v1/residents")).json()["residents"]
        assert [(r["name"], r["status"], r["last_output"]) for r in listed] == [("shop", "idle", "清单：牛奶")]
        assert (await client.post("/api/v1/residents/ghost/stop")).json()["error"] == (
            "no resident named 'ghost' (residents: shop)"
        )
        empty = await client.post("/api/v1/residents/shop/send", json={"text": "  "})
        assert empty.status_code == 400 and "text must say what the resident should do" in empty.json()["error"]
        sent = await client.post("/api/v1/residents/shop/send", json={"text": "加鸡蛋"})
        assert sent.status_code == 200 and sent.json()["status"] == "queued"
        async with asyncio.timeout(10):
            while residents.get("shop").done < 2:
                await asyncio.sleep(0.01)
        stopped = await client.post("/api/v1/residents/shop/stop")
        assert stopped.json() == {"status": "stopped", "name": "shop", "dropped": 0}
        bad = await client.delete("/api/v1/residents/shop", params={"residual": "later"})
        assert bad.status_code == 400 and "residual must be 'keep' or 'drop'" in bad.json()["error"]
        gone = await client.delete("/api/v1/residents/shop", params={"residual": "drop"})
        assert gone.json()["status"] == "destroyed" and gone.json()["residual"] == "drop"
        assert (await client.get("/api/v1/residents")).json() == {"residents": []}
        assert (await client.get("/api/v1/residents", headers={"X-API-Key": "wrong"})).status_code == 401


async def test_a_full_resident_queue_answers_503_with_retry_after(daemon: WebDaemon):
    residents = await _resident_with_output(daemon)
    residents.get("shop").scheduler.capacity = 0  # full: nothing more is accepted
    async with daemon.client() as client:
        full = await client.post("/api/v1/residents/shop/send", json={"text": "加鸡蛋"})
    assert full.status_code == 503, full.text
    assert int(full.headers["Retry-After"]) >= 1
    assert "input queue is full" in full.json()["error"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
async def test_the_residents_panel_shows_them_and_its_buttons_stop_and_destroy(daemon: WebDaemon):
    from playwright.async_api import async_playwright

    await _resident_with_output(daemon, "shop")
    await _resident_with_output(daemon, "remind")
    async with async_playwright() as pw:
        args = ["--headless", "--no-sandbox", "--disable-gpu"]
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=args)
        page = await browser.new_page()
        try:
            await page.goto(daemon.url + "/login")
            await page.fill("#password", daemon.password)
            await page.click("#login-button")
            await page.wait_for_selector("#chat-form")
            await page.click("nav a[data-page='residents']")
            row = page.locator("#residents tr[data-name='shop']")
            await row.wait_for(timeout=10_000)
            assert await page.locator("#page-chat").is_hidden()
            assert await row.locator(".last").inner_text() == "清单：牛奶"
            assert await row.locator(".status").inner_text() == "idle"
            await row.locator("button.stop").click()
            await page.wait_for_selector("#residents-result:has-text('stopped shop')")
            page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
            await row.locator("button.destroy").click()
            await page.wait_for_selector("#residents-result:has-text('destroyed shop')")
            await row.wait_for(state="detached", timeout=10_000)
            assert list(daemon.app.kernel.residents.agents) == ["remind"]
            await page.click("nav a[data-page='chat']")
            await page.wait_for_selector("#page-residents", state="hidden")
            assert await page.locator("#page-chat").is_visible()
        finally:
            await browser.close()
