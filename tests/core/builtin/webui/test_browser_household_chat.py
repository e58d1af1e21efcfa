"""Two persons' own chat pages on a real ``homeagent serve``, in headless Chromium.

The mother and the child log in with their own passwords in two browser contexts (the mother
in two tabs). Each chats, in streaming, as themselves; each sees only their own conversations
and live messages: the child's page and event stream never show the mother's turn (live or
replayed), the mother's other tab shows hers live. The owner's pages are hidden from them and
their APIs answer 403. The export labels each message with who said it.

Everything is real but the model: the daemon is a child process reached over loopback HTTP,
the model a loopback OpenAI-compatible server answering ``echo: <the last user message>``.
Screenshots of each person's page go to the ``shots`` folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import LAUNCH_ARGS
from menu import menu_settles_on
from served import Served, configure, fake_model, served

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"),
    pytest.mark.timeout(300),
]

MUM_PASSWORD = "mums-own-password-1"
KID_PASSWORD = "kids-own-password-1"
SECRET = "下周三我要去医院复查，别跟孩子说"
KID_SAYS = "今天会下雨吗 will it rain"
WAIT_MS = 30_000
OWNER_PAGES = ("memory", "plugins", "residents", "pairing", "settings", "people")


def png(width: int = 4, height: int = 3) -> bytes:
    """A real (tiny, grey) PNG image."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


async def add_person(daemon: Served, owner: httpx.AsyncClient, name: str, role: str, password: str) -> None:
    """The owner adds ``name`` and sends an invite; the person sets their own password with it."""
    assert (await owner.post("/api/v1/people", json={"name": name, "role": role})).status_code == 201
    made = await owner.post(f"/api/v1/people/{name}/invite")
    assert made.status_code == 201, made.text
    token = made.json()["path"].split("#", 1)[1]
    async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as anon:
        accepted = await anon.post("/api/v1/invite", json={"token": token, "password": password})
        assert accepted.status_code == 200, accepted.text


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


async def log_in(page: Any, url: str, name: str, password: str) -> None:
    """Log ``name`` in and wait for their chat page with its live event stream open."""
    await page.goto(url + "/login")
    await page.fill("#username", name)
    await page.fill("#password", password)
    async with page.expect_response(lambda r: "/api/v1/events" in r.url, timeout=WAIT_MS) as stream:
        await page.click("#login-button")
    assert (await stream.value).status == 200
    await page.locator("#chat-form").wait_for(timeout=WAIT_MS)


async def send(page: Any, text: str) -> None:
    await page.fill("#input", text)
    await page.press("#input", "Enter")
    try:
        await page.locator(f".msg.assistant[data-done='1']:has-text('echo: {text}')").wait_for(timeout=WAIT_MS)
    except Exception:
        raise AssertionError(await page.locator("#messages").inner_text()) from None


async def replayed(daemon: Served, cookies: dict[str, str], until: str) -> str:
    """The event stream a fresh tab of the person with ``cookies`` gets (the replay), up to ``until``."""
    seen = ""
    async with (
        httpx.AsyncClient(base_url=daemon.url, cookies=cookies, timeout=10) as client,
        client.stream("GET", "/api/v1/events") as events,
    ):
        assert events.status_code == 200
        async with asyncio.timeout(30):
            async for chunk in events.aiter_text():
                seen += chunk
                if until in seen:
                    return seen
    return seen


async def session_cookies(context: Any) -> dict[str, str]:
    return {c["name"]: c["value"] for c in await context.cookies()}


async def test_two_persons_chat_each_in_their_own_threads_and_live_view(tmp_path: Path, shots: Path):
    async with fake_model() as (_model, model_url), served(configure(tmp_path / "data", model_url)) as daemon:
        async with daemon.client(timeout=10) as owner:
            await add_person(daemon, owner, "mum", "adult", MUM_PASSWORD)
            await add_person(daemon, owner, "kid", "child", KID_PASSWORD)
        async with chromium() as browser:
            mum_context = await browser.new_context(viewport={"width": 1100, "height": 800}, accept_downloads=True)
            kid_context = await browser.new_context(viewport={"width": 1100, "height": 800}, accept_downloads=True)
            mum, kid = await mum_context.new_page(), await kid_context.new_page()
            await log_in(mum, daemon.url, "mum", MUM_PASSWORD)
            await log_in(kid, daemon.url, "kid", KID_PASSWORD)
            mum_tab = await mum_context.new_page()  # the mother's second tab, on the same conversation
            async with mum_tab.expect_response(lambda r: "/api/v1/events" in r.url, timeout=WAIT_MS):
                await mum_tab.goto(daemon.url + "/")
            await mum_tab.locator("#chat-form").wait_for(timeout=WAIT_MS)

            # Their own menu: the chat, their reminders and their account, nothing of the owner's.
            for page in (mum, kid):
                await menu_settles_on(page, ["chat", "reminders", "account"])
                assert await page.locator("#thread").input_value() in ("person:mum", "person:kid")

            # Each chats as themselves; the mother's other tab shows her turn live, the child's
            # page never does.
            await send(mum, SECRET)
            await mum_tab.locator(f".msg.user:has-text('{SECRET}')").wait_for(timeout=WAIT_MS)
            await mum_tab.locator(f".msg.assistant:has-text('echo: {SECRET}')").wait_for(timeout=WAIT_MS)
            await send(kid, KID_SAYS)
            assert SECRET not in await kid.locator("body").inner_text()
            assert KID_SAYS not in await mum.locator("body").inner_text()
            assert KID_SAYS not in await mum_tab.locator("body").inner_text()
            await mum.screenshot(path=str(shots / "person-chat-mum.png"))
            await kid.screenshot(path=str(shots / "person-chat-kid.png"))

            # The same from the event streams themselves: a fresh tab's replay of everything
            # recent has the person's own turns and never the other's.
            kid_cookies, mum_cookies = await session_cookies(kid_context), await session_cookies(mum_context)
            kids_stream = await replayed(daemon, kid_cookies, f"echo: {KID_SAYS}")
            assert f"echo: {KID_SAYS}" in kids_stream and SECRET not in kids_stream
            mums_stream = await replayed(daemon, mum_cookies, f"echo: {SECRET}")
            assert f"echo: {SECRET}" in mums_stream and KID_SAYS not in mums_stream
            async with daemon.client(timeout=10) as owner:
                # The owner's stream shows neither (their turns are their own too).
                await owner.post("/api/v1/chat", json={"message": "owner here"})
            owners = ""
            async with (
                daemon.client(timeout=10) as owner,
                owner.stream("GET", "/api/v1/events") as events,
            ):
                async with asyncio.timeout(30):
                    async for chunk in events.aiter_text():
                        owners += chunk
                        if "echo: owner here" in owners:
                            break
            assert SECRET not in owners and KID_SAYS not in owners

            # A new chat of the child's: the list holds only the child's conversations.
            await kid.click("#new-chat")
            await kid.locator("#thread option").nth(1).wait_for(state="attached", timeout=WAIT_MS)
            # the new conversation starts empty
            await kid.locator("#messages .msg").first.wait_for(state="detached", timeout=WAIT_MS)
            await send(kid, "homework question")
            threads = [await o.get_attribute("value") for o in await kid.locator("#thread option").all()]
            assert len(threads) == 2 and "person:kid" in threads, threads
            assert all(t == "person:kid" or t.startswith("web:kid:") for t in threads), threads
            mums_threads = [await o.get_attribute("value") for o in await mum.locator("#thread option").all()]
            assert mums_threads == ["person:mum"], mums_threads
            # Asking for the mother's conversation by its id is answered 404, sending into it too.
            refused = await kid.request.get(daemon.url + "/api/v1/threads/person:mum/history")
            assert refused.status == 404 and "no conversation" in (await refused.json())["error"]
            assert SECRET not in await refused.text()

            # The child sends a picture: it is shown, and again from the history after a reload;
            # the owner's own uploads stay the owner's.
            drawing = {"name": "drawing.png", "mimeType": "image/png", "buffer": png()}
            await kid.set_input_files("#file", files=[drawing])
            await send(kid, "my drawing")
            homework = await kid.locator("#thread").input_value()
            await kid.reload()
            await kid.locator("#thread option").nth(1).wait_for(state="attached", timeout=WAIT_MS)
            await kid.select_option("#thread", homework)
            picture = kid.locator(".msg.user img").last
            await picture.wait_for(timeout=WAIT_MS)
            await kid.wait_for_function("() => [...document.querySelectorAll('.msg.user img')].every((i) => "
                                        "i.complete && i.naturalWidth === 4)", timeout=WAIT_MS)
            source = await picture.get_attribute("src")
            assert source is not None and source.startswith("/uploads/") and source.endswith("-drawing.png"), source
            async with daemon.client(timeout=10) as owner:
                note = {"file": ("owner-note.txt", b"the owner's", "text/plain")}
                sent = await owner.post("/api/v1/chat/file", files=note)
                assert sent.status_code == 200, sent.text
                assert (await owner.get(source)).status_code == 200
            assert (await kid.request.get(daemon.url + "/uploads/owner-note.txt")).status == 404

            # The owner's pages: hidden from the child, and their APIs answer 403.
            await kid.goto(daemon.url + "/#settings")
            await kid.locator("#owner-only").wait_for(timeout=WAIT_MS)
            assert "owner only" in await kid.locator("#owner-only").inner_text()
            await kid.screenshot(path=str(shots / "person-owner-page-refused.png"))
            assert await kid.locator("#page-chat").is_visible()
            for name in OWNER_PAGES:
                assert not await kid.locator(f"#page-{name}").is_visible(), name
                assert not await kid.locator(f'nav a[data-page="{name}"]').is_visible(), name
            for path in ("/api/v1/settings", "/api/v1/plugins", "/api/v1/pairing", "/api/v1/people",
                         "/api/v1/memory/graph", "/api/v1/residents"):
                answer = await kid.request.get(daemon.url + path)
                assert answer.status == 403, (path, answer.status)
                assert "for the owner only" in (await answer.json())["error"], path
            await kid.goto(daemon.url + "/#account")
            await kid.locator("#account-form").wait_for(timeout=WAIT_MS)
            assert not await kid.locator("#page-chat").is_visible()
            assert "kid (child)" in await kid.locator("#account-who").inner_text()

            # The export of the mother's conversation labels her messages with her name.
            async with mum.expect_download(timeout=WAIT_MS) as download:
                await mum.click("#export")
            exported = Path(await (await download.value).path()).read_text(encoding="utf-8")
            assert "## mum" in exported and "## HomeAgent" in exported and "## You" not in exported
            assert SECRET in exported and KID_SAYS not in exported
            await mum_context.close()
            await kid_context.close()
