"""Render every page of the web UI on a 390 × 844 phone, in Chinese and in English.

    python tools/phone_screenshots.py [--out docs/screenshots] [--chromium PATH]

Starts a real daemon on a temporary data directory (a FakeModel answers: no LLM is called),
gives it something to show (an LLM source with a long URL, a second person, a conversation with
a long link), logs in as the owner with headless Chromium and writes
``phone-<page>-<zh|en>.png`` for the login page, every page of the menu, a settings search and
the open menu.
With Pillow installed the PNGs are reduced to a 256-colour palette (a fraction of the size).
The tests never write here; ``make screenshots-phone`` runs this.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from homeagent_core.app import App  # noqa: E402
from homeagent_sdk.pairing import PAIRING_FILE, PairingStore  # noqa: E402
from homeagent_sdk.testing import FakeModel  # noqa: E402

PHONE: Any = {"width": 390, "height": 844}
PAGES = ("chat", "memory", "plugins", "residents", "pairing", "nodes", "settings", "people", "reminders", "backups",
         "account")
LANGUAGES = {"zh": "zh-CN", "en": "en-US"}
PASSWORD = "screenshots-only-password"
LONG_URL = "http://model-gateway.household.example.internal:11434/v1/openai-compatible/endpoint"


async def furnish(app: App, url: str, api_key: str) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": api_key}, timeout=10) as client:
        response = await client.put("/api/v1/llm/sources/gateway", json={
            "base_url": LONG_URL, "model": "qwen2.5-72b-instruct", "adapter": "openai", "api_key": "sk-example",
        })
        response.raise_for_status()
    people = app.people
    assert people is not None
    people.add("妈妈", "adult")
    people.link("妈妈", "telegram", "123456789")
    # A QQ sender waiting for approval and one approved earlier (as a chat bridge records them).
    store = PairingStore(app.data_dir / "plugin_data" / "onebot" / PAIRING_FILE)
    store.check("qq", "10001", "小王")
    store.approve(store.check("qq", "10002", "小李").code, person="妈妈")
    store.close()


async def shoot(url: str, out: Path, chromium: str, model: FakeModel) -> list[Path]:
    from playwright.async_api import async_playwright

    written: list[Path] = []
    async with async_playwright() as pw:
        args = ["--headless", "--no-sandbox", "--disable-gpu"]
        browser = await pw.chromium.launch(executable_path=chromium, args=args)
        try:
            for language, locale in LANGUAGES.items():
                context = await browser.new_context(viewport=PHONE, locale=locale, device_scale_factor=1)
                page = await context.new_page()

                async def snap(name: str, page: Any = page, language: str = language) -> None:
                    path = out / f"phone-{name}-{language}.png"
                    await page.screenshot(path=str(path))
                    written.append(path)

                await page.goto(url + "/login")
                await page.wait_for_selector("#login-button")
                await snap("login")
                await page.fill("#password", PASSWORD)
                await page.click("#login-button")
                await page.wait_for_selector("#chat-form")
                if language == "zh":
                    model.add("好的，明天早上 7 点提醒你。", f"链接在这里：{LONG_URL}/docs")
                else:
                    model.add("Sure, I'll remind you at 7 tomorrow morning.", f"Here is the link: {LONG_URL}/docs")
                said = (("明天早上7点提醒我开会", "那个网关的文档在哪") if language == "zh"
                        else ("remind me about the meeting at 7 tomorrow", "where are the gateway docs?"))
                for count, text in enumerate(said, start=1):
                    await page.fill("#input", text)
                    await page.press("#input", "Enter")
                    await page.locator(".msg.assistant[data-done='1']").nth(count - 1).wait_for()
                    await page.wait_for_selector("#send", state="visible")
                for name in PAGES:
                    await page.click("#menu-toggle")
                    await page.click(f"nav a[data-page='{name}']")
                    await page.locator(f"#page-{name}").wait_for(state="visible")
                    await page.wait_for_load_state("networkidle")
                    await page.wait_for_timeout(300)  # polled tables (residents, pairing) draw once more
                    await snap(name)
                    if name == "settings":  # one search over both languages' descriptions
                        await page.fill("#settings-filter", "密码" if language == "zh" else "password")
                        await page.locator("#settings-form .setting").first.scroll_into_view_if_needed()
                        await snap("settings-search")
                await page.click("#menu-toggle")
                await snap("menu")
                await context.close()
        finally:
            await browser.close()
    return written


def shrink(paths: list[Path]) -> None:
    try:
        from PIL import Image
    except ImportError:
        return
    for path in paths:
        with Image.open(path) as image:
            small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        small.save(path, optimize=True)


async def main(out: Path, chromium: str) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="homeagent-shots-") as tmp:
        os.environ["HOMEAGENT_WEBUI_API_KEY"] = api_key = "screenshots-api-key-0123456789"
        model = FakeModel(default="好的")
        app = App(Path(tmp) / "data", load_entrypoints=False,
                  builtins=("homeagent_core.builtin.cfgmgr", "homeagent_core.builtin.webui",
                            "homeagent_core.builtin.nodes", "homeagent_core.builtin.reminders",
                            "homeagent_core.builtin.backup"), provider=model)
        app.services.listen_port = 0
        await app.start()
        try:
            plugin: Any = app.host.pm.get_plugin("webui")
            assert plugin is not None, app.status()
            plugin.state.credentials.set_password(PASSWORD, plugin.state.credentials_path)
            await furnish(app, plugin.url, api_key)
            written = await shoot(plugin.url, out, chromium, model)
        finally:
            await app.stop()
    shrink(written)
    for path in written:
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}  {path.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser") or "")
    args = parser.parse_args()
    if not args.chromium:
        parser.error("Chromium is not installed (apt-get install chromium) and --chromium names none")
    raise SystemExit(asyncio.run(main(args.out.resolve(), args.chromium)))
