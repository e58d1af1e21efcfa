"""Every page of the web UI on a 390 × 844 phone, in Chinese and in English (headless Chromium).

The owner walks every page through the ☰ menu with real content on it (a long source URL,
people, an installed plugin's row, a reply with a long link) and each page is checked: nothing
scrolls sideways, nothing sticks out of the screen or out of its box, every visible button is a
44 × 44 px tap target, tables are cards with their column names, the chat's Export button is on
screen and the input's placeholder fits. The language switch and the settings search in both
languages are checked as a person uses them.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.node.client import join
from homeagent_sdk.pairing import PAIRING_FILE, PairingStore

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

PHONE = {"width": 390, "height": 844}
PAGES = ("chat", "memory", "plugins", "residents", "pairing", "nodes", "settings", "people", "reminders", "backups",
         "account")
#: The built-ins behind the Nodes, Reminders and Backups pages.
EXTRA = ("homeagent_core.builtin.nodes", "homeagent_core.builtin.reminders", "homeagent_core.builtin.backup")
LONG_URL = "http://model-gateway.household.example.internal:11434/v1/openai-compatible/endpoint/with/a/long/path"

#: What is wrong with the page as shown, as a list of lines (empty: nothing).
PROBLEMS = r"""() => {
    const width = window.innerWidth;
    const problems = [];
    const doc = document.scrollingElement || document.documentElement;
    if (doc.scrollWidth > width) problems.push(`the page is ${doc.scrollWidth} px wide`);
    const visible = (node) => {
        const box = node.getBoundingClientRect();
        const style = getComputedStyle(node);
        return box.width > 0 && box.height > 0 && style.visibility !== "hidden" && node.closest("[hidden]") === null;
    };
    const classes = (node) => typeof node.className === "string" && node.className.trim()
        ? "." + node.className.trim().split(/\s+/).join(".") : "";
    const name = (node) => `${node.tagName.toLowerCase()}${node.id ? "#" + node.id : ""}${classes(node)}` +
        ` “${(node.textContent || node.getAttribute("placeholder") || "").trim().slice(0, 30)}”`;
    // Inside a box that scrolls or clips on purpose (a code block, a long list) is that box's business.
    const scroller = (node) => {
        for (let up = node.parentElement; up && up !== document.body; up = up.parentElement) {
            const o = getComputedStyle(up).overflowX;
            if (o === "auto" || o === "scroll" || o === "hidden") return true;
        }
        return false;
    };
    for (const node of document.body.querySelectorAll("*")) {
        if (!visible(node) || node.closest("svg") || node.tagName === "OPTION") continue;
        const box = node.getBoundingClientRect();
        if (!scroller(node) && (box.right > width + 0.5 || box.left < -0.5)) {
            problems.push(`${name(node)} sticks out of the screen (${Math.round(box.left)}..${Math.round(box.right)})`);
        }
    }
    const targets = "button, .upload, nav a, .topbar select, a.plugin-settings, a.download";
    for (const node of document.querySelectorAll(targets)) {
        if (!visible(node)) continue;
        const box = node.getBoundingClientRect();
        if (box.height < 44 || box.width < 44) {
            problems.push(`${name(node)} is ${Math.round(box.width)}×${Math.round(box.height)} px, less than 44×44`);
        }
    }
    for (const node of document.querySelectorAll("main select, main input:not([type=checkbox]):not([type=file])")) {
        if (!visible(node)) continue;
        const box = node.getBoundingClientRect();
        if (box.height < 44) problems.push(`${name(node)} is ${Math.round(box.height)} px tall, less than 44`);
    }
    // Nothing sticks out of the card, setting or table row it sits in.
    for (const node of document.querySelectorAll("main *")) {
        const box = node.getBoundingClientRect();
        const holder = node.parentElement && node.parentElement.closest(".card, .setting, .table tr, .row, .msg");
        if (!holder || !visible(node) || scroller(node) || node.closest("svg")) continue;
        const outer = holder.getBoundingClientRect();
        if (box.right > outer.right + 0.5 || box.left < outer.left - 0.5) {
            problems.push(`${name(node)} sticks out of ${name(holder)}`);
        }
    }
    const texts = "button, nav a, td, th, h2, h3, label, .setting, .setting .key, .setting .desc, .msg, .msg .body, " +
        "p, .toast, summary, #menu-current";
    for (const node of document.querySelectorAll(texts)) {
        if (!visible(node) || scroller(node)) continue;
        if (node.scrollWidth > node.clientWidth + 1 && getComputedStyle(node).overflowX === "visible") {
            problems.push(`${name(node)}: its text is ${node.scrollWidth} px in a ${node.clientWidth} px box`);
        }
    }
    return problems;
}"""

CARDS = r"""() => [...document.querySelectorAll("main table.table")].filter((t) => t.closest("[hidden]") === null)
    .map((t) => ({id: t.id, head: getComputedStyle(t.querySelector("thead")).display,
                  labelled: [...t.querySelectorAll("tbody td")].filter((td) => td.colSpan === 1)
                      .every((td) => Boolean(td.dataset.label)),
                  cells: t.querySelectorAll("tbody td").length}))"""

PLACEHOLDER_FITS = r"""() => {
    const input = document.querySelector("#input");
    const style = getComputedStyle(input);
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = `${style.fontSize} ${style.fontFamily}`;
    const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    return {text: input.placeholder, need: ctx.measureText(input.placeholder).width, room};
}"""


async def furnish(daemon: Any, tmp_path: Path) -> None:
    """Content that makes the pages wide if anything can: a long URL, people, a reply with a link,
    a paired node, a reminder with a repeat rule, a backup archive."""
    async with daemon.client() as client:
        response = await client.put("/api/v1/llm/sources/gateway", json={
            "base_url": LONG_URL, "model": "qwen2.5-72b-instruct-long-model-name", "adapter": "openai", "api_key": "k",
        })
        assert response.status_code == 200, response.text
        response = await client.post("/api/v1/nodes/pair", json={"name": "living-room-tablet"})
        assert response.status_code == 200, response.text
        await asyncio.to_thread(join, daemon.url, response.json()["code"], tmp_path / "node")
        said = "every weekday at 7 wake the kids up for school"
        response = await client.post("/api/v1/reminders", json={"said": said})
        assert response.status_code == 201, response.text
        response = await client.post("/plugins/backup/create", timeout=60)
        assert response.status_code == 200, response.text
    daemon.app.people.add("mum", "adult")
    daemon.app.people.link("mum", "telegram", "123456789012")
    store = PairingStore(daemon.app.data_dir / "plugin_data" / "onebot" / PAIRING_FILE)
    store.check("qq", "1000123456789", "a sender with a rather long display name")
    store.approve(store.check("qq", "10002", "小李").code, person="mum")
    store.close()
    daemon.model.add(f"好的，看这里：{LONG_URL}?with=a&very=long&query=string")


async def walk(page: Any, daemon: Any, shots: Any, language: str) -> dict[str, list[str]]:
    """Every page through the menu; returns the problems found per page."""
    found: dict[str, list[str]] = {}
    await page.goto(daemon.url + "/#chat")
    await page.wait_for_selector("#chat-form")
    await page.fill("#input", "你好 " + LONG_URL)
    await page.press("#input", "Enter")
    reply = page.locator(".msg.assistant[data-done='1']")
    await reply.wait_for(timeout=10_000)
    assert await reply.locator(f"a[href^='{LONG_URL}']").count() == 1, await reply.inner_text()
    for name in PAGES:
        toggle = page.locator("#menu-toggle")
        assert await toggle.is_visible(), "the ☰ menu button is not shown on a phone"
        await toggle.click()
        link = page.locator(f"nav a[data-page='{name}']")
        assert await link.is_visible(), f"{name} is not reachable from the menu"
        box = await link.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        await link.click()
        await page.locator(f"#page-{name}").wait_for(state="visible")
        assert not await page.locator("nav").is_visible(), "the menu stays open after a choice"
        await page.wait_for_load_state("networkidle")
        if name == "settings":
            await page.locator("#sources tbody tr[data-source='gateway']").wait_for()
            await page.locator("#settings-form details").first.wait_for()
        if name == "people":
            await page.locator("#people tbody tr[data-person='mum']").wait_for()
        if name == "pairing":
            await page.locator("#pairing-pending tbody tr[data-code]").wait_for()
            await page.locator("#pairing-decided tbody tr[data-code]").wait_for()
        if name == "plugins":
            await page.locator("#plugins tbody tr[data-plugin='webui']").wait_for()
        if name == "nodes":
            await page.locator("#nodes tbody tr[data-node='living-room-tablet']").wait_for()
            await page.fill("#node-name", "kitchen")
            await page.click("#node-pair button[type=submit]")
            await page.locator("#node-code").filter(has_text="homeagent node join").wait_for()
        if name == "reminders":
            await page.locator("#reminders tbody tr[data-reminder]").wait_for()
        if name == "backups":
            await page.locator("#backup-archives tbody tr[data-archive]").wait_for()
            await page.locator("#backup-schedule label.setting").first.wait_for()
        if name == "chat":
            assert await page.locator("#export").is_visible(), "the Export button is hidden on a phone"
            fit = await page.evaluate(PLACEHOLDER_FITS)
            assert fit["need"] <= fit["room"], f"the placeholder {fit['text']!r} is clipped: {fit}"
        problems = await page.evaluate(PROBLEMS)
        for table in await page.evaluate(CARDS):
            if table["head"] != "none" or not table["labelled"]:
                problems.append(f"table #{table['id']} is not shown as labelled cards: {table}")
        found[name] = problems
        await page.screenshot(path=str(shots / f"{name}-390-{language}.png"))
    # The menu itself, open.
    await page.locator("#menu-toggle").click()
    found["menu"] = await page.evaluate(PROBLEMS)
    await page.screenshot(path=str(shots / f"menu-390-{language}.png"))
    return found


@pytest.mark.parametrize(("locale", "language", "send_word"), [("zh-CN", "zh", "发送"), ("en-US", "en", "Send")])
async def test_every_page_fits_a_390px_phone(
    tmp_path, start_daemon, browser_page, login, shots, locale, language, send_word
):
    async with (start_daemon(tmp_path / "data", extra=EXTRA) as daemon,
                browser_page(viewport=PHONE, locale=locale) as page):
        await furnish(daemon, tmp_path)
        await login(page, daemon)
        assert await page.locator("#send").inner_text() == send_word
        found = await walk(page, daemon, shots, language)
    assert {name: problems for name, problems in found.items() if problems} == {}


async def test_login_and_invite_pages_fit_a_390px_phone(daemon, page, shots):
    await page.set_viewport_size(PHONE)
    await page.goto(daemon.url + "/login")
    await page.wait_for_selector("#login-button")
    assert await page.evaluate(PROBLEMS) == []
    await page.goto(daemon.url + "/invite#not-a-token")
    await page.wait_for_selector("#invite-who")
    assert await page.evaluate(PROBLEMS) == []


async def test_the_language_switch_speaks_the_whole_page_and_is_kept(daemon, page, login):
    # Playwright's Chromium asks for English: "auto" follows it.
    await login(page, daemon)
    assert await page.locator("nav a[data-page='chat']").inner_text() == "Chat"
    assert await page.locator("#input").get_attribute("placeholder") == "Say something…"
    await page.select_option("#language", "zh")
    await page.locator("html[lang='zh-CN']").wait_for(state="attached")
    await page.wait_for_selector("#chat-form")
    assert await page.locator("nav a[data-page='chat']").inner_text() == "聊天"
    assert await page.locator("#send").inner_text() == "发送"
    assert await page.locator("#export").inner_text() == "导出"
    # The owner's choice is the household's setting.
    assert daemon.app.config.get("plugin.webui.language") == "zh"
    # Status words and settings descriptions too.
    await page.goto(daemon.url + "/#plugins")
    row = page.locator("#plugins tr[data-plugin='webui']")
    await row.wait_for()
    assert "已启动" in await row.inner_text()
    await page.goto(daemon.url + "/#settings")
    desc = page.locator(".setting:has([data-key='plugin.webui.addr']) .desc")
    await page.fill("#settings-filter", "监听地址")
    await desc.wait_for()
    assert await desc.inner_text() == "监听地址 host:port。"
    # A new page load keeps the language.
    await page.reload()
    await page.wait_for_selector("#chat-form", state="attached")
    assert await page.locator("nav a[data-page='settings']").inner_text() == "设置"
    await page.select_option("#language", "auto")
    await page.locator("nav a[data-page='settings']", has_text="Settings").wait_for(state="attached")
    assert await page.evaluate("document.documentElement.lang") == "en"
    assert daemon.app.config.get("plugin.webui.language") == "auto"


@pytest.mark.parametrize("words", ["提醒", "密码", "password", "PASSWORD"])
async def test_settings_search_finds_words_of_either_language(tmp_path, start_daemon, page, login, words):
    async with start_daemon(tmp_path / "data", extra=("homeagent_core.builtin.timer",)) as daemon:
        await login(page, daemon)
        await page.goto(daemon.url + "/#settings")
        await page.locator("#settings-form details").first.wait_for()
        await page.fill("#settings-filter", words)
        await page.locator("#settings-count:not(:empty)").wait_for()
        shown = await page.locator("#settings-form .setting").count()
        assert shown > 0, f"searching settings for {words!r} finds nothing"
