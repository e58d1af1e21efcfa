"""The chat page in headless Chromium, as a person uses it: each message drawn once, the reply
in view above the input bar, a thinking indicator and a stop button, one error bubble with a
retry, images shown at once and kept, Markdown with highlighted, copyable code, export, and a
login that survives a daemon restart. Screenshots go to the ``shots`` folder (see conftest).
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest

from homeagent_sdk.errors import ProviderError
from homeagent_sdk.testing import FakeReply, ToolCallReply

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAFElEQVR4nGP8z8DAwMDAxMDAwMAAAB0ABx1n4WkAAAAASUVORK5CYII="
)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


async def send(page, text: str) -> None:
    await page.fill("#input", text)
    await page.press("#input", "Enter")


async def last_reply(page, count: int):
    """The ``count``-th finished assistant bubble (1-based), once it is there."""
    reply = page.locator(".msg.assistant[data-done='1']").nth(count - 1)
    await reply.wait_for(timeout=10_000)
    return reply


async def above_input_bar(page, selector: str) -> bool:
    """Whether the element is inside the viewport and not covered by the sticky input bar."""
    return await page.evaluate(
        """(sel) => {
            const nodes = document.querySelectorAll(sel);
            const box = nodes[nodes.length - 1].getBoundingClientRect();
            const bar = document.querySelector('#chat-form').getBoundingClientRect();
            return box.top >= 0 && box.bottom <= bar.top + 1;
        }""",
        selector,
    )


async def test_reload_draws_each_message_once(daemon, page, login):
    daemon.model.add("第一条回答", "第二条回答", "来自脚本的回答")
    await login(page, daemon)
    await send(page, "第一条")
    await last_reply(page, 1)
    await send(page, "第二条")
    await last_reply(page, 2)
    await page.reload()
    await page.wait_for_selector(".msg.assistant:has-text('第二条回答')")
    # A message from elsewhere arrives over the live stream after any replay would have.
    async with daemon.client() as client:
        response = await client.post("/api/v1/chat", json={"message": "脚本消息"})
        assert response.status_code == 200, response.text
    await page.wait_for_selector(".msg.assistant[data-done='1']:has-text('来自脚本的回答')")
    bodies = await page.locator(".msg .body").all_inner_texts()
    assert bodies == ["第一条", "第一条回答", "第二条", "第二条回答", "脚本消息", "来自脚本的回答"]


async def test_thinking_indicator_stop_button_and_reply_in_view(daemon, page, login, shots):
    async with daemon.client() as client:
        for n in range(12):  # enough history that the page scrolls
            daemon.model.add(f"历史回答 {n}\n\n" + "很长的一段话。" * 30)
            assert (await client.post("/api/v1/chat", json={"message": f"历史 {n}"})).status_code == 200
    await login(page, daemon)
    daemon.model.add(FakeReply(hang=True))
    await send(page, "想一想")
    await page.wait_for_selector(".msg.assistant.thinking .typing")
    assert await above_input_bar(page, ".msg.assistant.thinking")
    assert await page.is_visible("#stop") and not await page.is_visible("#send")
    await page.screenshot(path=str(shots / "chat-thinking.png"))
    await page.click("#stop")
    stopped = page.locator(".msg.assistant[data-done='1']").last
    await page.wait_for_selector("#send", state="visible")
    assert await stopped.inner_text() in ("(stopped)", "")
    daemon.model.add("流式回答开始。" + "这是一段会分成好几块流式输出的回答。" * 20)
    await send(page, "再说一次")
    await page.wait_for_selector(".msg.assistant[data-done='1']:has-text('流式回答开始')")
    assert await above_input_bar(page, ".msg.assistant")
    await page.screenshot(path=str(shots / "chat-streamed.png"))


async def test_a_failed_model_call_shows_one_error_bubble_with_retry(daemon, page, login, shots):
    daemon.model.add(ProviderError("deepseek: HTTP 401 invalid api key"), "重试成功")
    await login(page, daemon)
    await send(page, "你好")
    error = page.locator(".msg.error")
    await error.wait_for()
    await page.wait_for_selector("#send", state="visible")
    assert await error.count() == 1
    assert "invalid api key" in await error.inner_text()
    assert "Internal Server Error" not in await page.inner_text("#messages")
    await page.screenshot(path=str(shots / "chat-error.png"))
    await error.locator("button.retry").click()
    await page.wait_for_selector(".msg.assistant[data-done='1']:has-text('重试成功')")
    assert await page.locator(".msg.error").count() == 0
    assert await page.locator(".msg.user").all_inner_texts() == ["你好"]


async def test_the_chat_api_answers_a_failed_turn_with_a_json_error_not_500(daemon):
    daemon.model.add(ProviderError("upstream refused"))
    async with daemon.client() as client:
        response = await client.post("/api/v1/chat", json={"message": "hi"})
    assert response.status_code == 502
    assert "upstream refused" in response.json()["error"]


async def test_an_uploaded_image_shows_at_once_and_stays_after_reload(daemon, page, login, tmp_path):
    picture = tmp_path / "cat.png"
    picture.write_bytes(PNG)
    daemon.model.add(FakeReply(hang=True))
    await login(page, daemon)
    await page.set_input_files("#file", str(picture))
    await page.fill("#input", "看这张图")
    await page.click("#send")
    # Shown while the model is still working, from the chosen file itself.
    await page.wait_for_selector(".msg.user img[alt='cat.png']")
    await page.wait_for_selector(".msg.assistant.thinking")
    await page.click("#stop")
    await page.wait_for_selector("#send", state="visible")
    await page.reload()
    image = page.locator(".msg.user img")
    await image.wait_for()
    assert (await image.get_attribute("src")).startswith("/uploads/")
    await page.wait_for_function("document.querySelector('.msg.user img').naturalWidth === 8")
    assert "看这张图" in await page.locator(".msg.user").inner_text()


async def test_markdown_code_highlighting_copy_and_export(daemon, page, login, shots):
    reply = (
        "# 标题\n\n**粗体** 和 `行内代码`，还有 [链接](https://example.com)\n\n"
        "```python\nprint('hi')  # 打招呼\n```\n\n- 一\n- 二\n\n<img src=x onerror=\"window.pwned=1\">"
    )
    daemon.model.add(reply)
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await login(page, daemon)
    await send(page, "写点 Markdown")
    answer = await last_reply(page, 1)
    assert await answer.locator("strong").inner_text() == "粗体"
    assert await answer.locator("a[href='https://example.com']").count() == 1
    assert await answer.locator("li").count() == 2
    assert await answer.locator(".code .tok-string").inner_text() == "'hi'"
    assert await answer.locator(".code .tok-comment").inner_text() == "# 打招呼"
    # Raw HTML in a reply is text, never markup.
    assert await answer.locator("img").count() == 0
    assert "<img src=x" in await answer.inner_text()
    assert await page.evaluate("window.pwned") is None
    await answer.locator("button.copy").click()
    await page.wait_for_selector("button.copy:has-text('Copied')")
    assert await page.evaluate("navigator.clipboard.readText()") == "print('hi')  # 打招呼"
    await page.screenshot(path=str(shots / "chat-markdown.png"))
    async with page.expect_download() as info:
        await page.click("#export")
    exported = Path(await (await info.value).path()).read_text(encoding="utf-8")
    assert "写点 Markdown" in exported and "print('hi')" in exported


async def test_a_person_saying_the_same_words_again_is_answered_again(daemon, page, login):
    daemon.model.add("第一次的回答", "第二次的回答")
    await login(page, daemon)
    await send(page, "继续")
    await last_reply(page, 1)
    await send(page, "继续")
    second = await last_reply(page, 2)
    assert "第二次的回答" in await second.inner_text()
    assert len(daemon.model.requests) == 2


async def test_a_login_survives_a_daemon_restart(tmp_path, page, login, start_daemon):
    data = tmp_path / "data"
    async with start_daemon(data) as first:
        await login(page, first)
    async with start_daemon(data) as second:
        await page.goto(second.url + "/")
        await page.wait_for_selector("#chat-form")
        assert page.url.rstrip("/") == second.url
        # and the new daemon takes the browser's changes (its CSRF token is still known)
        second.model.add("重启后还在")
        await send(page, "重启了吗")
        await page.wait_for_selector(".msg.assistant[data-done='1']:has-text('重启后还在')")


async def test_navigation_fits_one_line_on_a_390px_phone(daemon, page, login, shots):
    await page.set_viewport_size({"width": 390, "height": 844})
    await login(page, daemon)
    # One line: the ☰ menu, the language switch and Log out; the pages are in the menu.
    assert await page.is_visible("#menu-toggle") and not await page.is_visible("nav")
    rows = await page.evaluate("""[...document.querySelectorAll('.topbar > *')].map((n) => n.getBoundingClientRect())
        .filter((box) => box.width > 0).map((box) => [box.top, box.bottom])""")
    assert max(top for top, _ in rows) < min(bottom for _, bottom in rows), f"the top bar wraps: {rows}"
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await page.screenshot(path=str(shots / "chat-phone-390.png"))


async def test_favicon_is_served_without_login(daemon):
    async with daemon.client(key=False) as client:
        response = await client.get("/favicon.ico")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("image/")


RECORD_NOTIFICATIONS = """() => {
    // Headless Chromium shows no notifications: record what the page asks to show instead.
    window.notes = [];
    const Real = window.Notification;
    window.Notification = class extends Real {
        constructor(title, options) { super(title, options); window.notes.push(options.body); }
    };
    Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
}"""


async def test_a_timer_set_in_the_browser_pops_up_in_the_browser(tmp_path, page, login, start_daemon, shots):
    async with start_daemon(tmp_path / "data", extra=("homeagent_core.builtin.timer",)) as daemon:
        daemon.model.add(
            ToolCallReply("timer_set", {"duration": "200ms", "message": "喝水"}),
            "好的，一会儿提醒你喝水。",
            "该喝水了！",
        )
        await page.context.grant_permissions(["notifications"], origin=daemon.url)
        await login(page, daemon)
        await page.evaluate(RECORD_NOTIFICATIONS)
        await send(page, "一会儿提醒我喝水")
        await page.wait_for_selector(".msg.assistant[data-done='1']:has-text('一会儿提醒你喝水')")
        pushed = page.locator(".msg.push:has-text('该喝水了')")
        await pushed.wait_for(timeout=10_000)
        await page.wait_for_function("window.notes.length > 0")
        assert await page.evaluate("window.notes") == ["该喝水了！"]
        await page.screenshot(path=str(shots / "chat-timer-push.png"))
        await page.reload()
        await page.wait_for_selector(".msg.assistant:has-text('该喝水了')")
        assert await page.locator(".msg.assistant:has-text('该喝水了')").count() == 1


async def test_the_agent_sends_an_image_and_a_file_to_the_browser(daemon, page, login, tmp_path):
    picture = tmp_path / "chart.png"
    picture.write_bytes(PNG)
    page_file = tmp_path / "report.html"
    page_file.write_text("<script>alert(1)</script>", encoding="utf-8")
    daemon.model.add(
        ToolCallReply(calls=[
            ("output_send__webui", {"payload": str(picture), "type": "image", "meta": '{"caption": "本周图表"}'}),
            ("output_send__webui", {"payload": str(page_file), "type": "file"}),
        ]),
        "发过去了",
    )
    await login(page, daemon)
    await send(page, "把图表发给我")
    await page.wait_for_selector(".msg.assistant[data-done='1']:has-text('发过去了')")
    image = page.locator(".msg.push img")
    await image.wait_for()
    src = await image.get_attribute("src")
    assert src.startswith("/files/") and src.endswith(".png")
    await page.wait_for_function("document.querySelector('.msg.push img').naturalWidth === 8")
    assert "本周图表" in await page.locator(".msg.push").first.inner_text()
    link = page.locator(".msg.push a.file")
    assert await link.inner_text() == "📎 report.html"
    href = await link.get_attribute("href")
    assert href.startswith("/files/") and href.endswith(".bin")  # never served back as a page
    async with daemon.client(key=False) as anonymous:
        assert (await anonymous.get(src)).status_code in (302, 401)
    async with daemon.client() as client:
        served = await client.get(src)
        assert served.status_code == 200 and served.content == PNG
    await page.reload()
    await page.locator(".msg.push img, .msg img[src^='/files/']").first.wait_for()


async def test_a_source_added_on_the_settings_page_answers(tmp_path, page, login, start_daemon, shots):
    from served import fake_model

    async with fake_model() as (server, url), start_daemon(tmp_path / "data", sources=True) as daemon:
        await login(page, daemon)
        await page.wait_for_selector("#first-run", state="visible")
        await page.click("nav a[data-page='settings']")
        await page.wait_for_selector("#sources tr[data-source='deepseek']")
        await page.fill("#source-name", "local")
        await page.fill("#source-url", f"{url}/v1")
        await page.fill("#source-model", "echo")
        await page.fill("#source-key", "sk-local-secret")
        await page.check("#source-default")
        await page.click("#source-form button[type='submit']")
        await page.wait_for_selector("#source-result:has-text('local answers')")
        assert await page.is_hidden("#first-run")
        row = page.locator("#sources tr[data-source='local']")
        assert "sk-local-secret" not in await page.content()
        assert "••••••" in await row.inner_text()
        await page.screenshot(path=str(shots / "settings-sources.png"), full_page=True)
        # the key is kept when the source is edited without typing a new one
        await row.locator("button:has-text('Edit')").click()
        await page.fill("#source-model", "echo-2")
        await page.click("#source-form button[type='submit']")
        await page.wait_for_selector("#source-result:has-text('local answers')")
        assert daemon.app.config.get("core.llm.sources.local.api_key") == "sk-local-secret"
        assert daemon.app.config.get("core.llm.sources.local.model") == "echo-2"
        await page.click("nav a[data-page='chat']")
        await send(page, "你好模型")
        await page.wait_for_selector(".msg.assistant[data-done='1']:has-text('echo: 你好模型')")
        assert server.received >= 3
        await page.click("nav a[data-page='settings']")
        page.once("dialog", lambda dialog: dialog.accept())
        await row.locator("button.remove").click()
        await page.wait_for_selector("#sources tr[data-source='local']", state="detached")
        assert daemon.app.config.get("core.llm.sources.local.base_url") in (None, "")


async def test_memory_and_plugins_pages_say_when_there_is_nothing(daemon, page, login):
    await login(page, daemon)
    await page.click("nav a[data-page='memory']")
    await page.wait_for_selector("#entities li.empty:has-text('Nothing learned yet')")
    await page.fill("#memory-query", "火星")
    await page.click("#memory-form button")
    await page.wait_for_selector("#entities li.empty:has-text('No results')")
    await page.wait_for_selector("#documents li.empty:has-text('No results')")
    await page.click("nav a[data-page='plugins']")
    await page.wait_for_selector("#plugins tr[data-plugin='webui']")
    await page.click("#install-form button[type='submit']")
    await page.wait_for_selector("#install-result.error:has-text('Choose a .hmap package file first')")
    await page.locator("#plugins tr[data-plugin='webui'] a.plugin-settings").click()
    await page.wait_for_selector("#settings-form details[data-scope='plugin.webui'][open] "
                                 "[data-key='plugin.webui.session_ttl_hours']")


async def test_the_graph_shows_plain_facts_right_after_the_turn(daemon, page, login):
    daemon.model.add("你好小王！")
    await login(page, daemon)
    await send(page, "我叫小王，住在杭州")
    await last_reply(page, 1)
    await page.click("nav a[data-page='memory']")
    await page.wait_for_selector("#entities li.entity:has-text('小王')")
    await page.wait_for_selector("#entities li.entity:has-text('杭州')")
    await page.wait_for_selector("#graph circle")


async def test_the_graph_pans_zooms_and_shows_an_entitys_relations(daemon, page, login, shots):
    daemon.model.add("记住了")
    await login(page, daemon)
    await send(page, "我叫小王，住在杭州")
    await last_reply(page, 1)
    await page.click("nav a[data-page='memory']")
    label = page.locator("#graph text:not(.edge-label)", has_text="杭州")
    await label.wait_for()
    before = await page.get_attribute("#graph-layer", "transform")
    await page.click("#zoom-in")
    assert await page.get_attribute("#graph-layer", "transform") != before
    box = await page.locator("#graph").bounding_box()
    await page.mouse.move(box["x"] + 20, box["y"] + 20)
    await page.mouse.down()
    await page.mouse.move(box["x"] + 120, box["y"] + 80)
    await page.mouse.up()
    assert "translate(0 0)" not in await page.get_attribute("#graph-layer", "transform")
    await page.click("#zoom-reset")
    await label.click()
    await page.wait_for_selector("#entity-detail li:has-text('住在→ 杭州')")
    await page.screenshot(path=str(shots / "memory-graph.png"), full_page=True)


async def test_a_plugin_that_failed_to_start_shows_why(tmp_path, page, login, start_daemon, build_hmap, shots):
    from homeagent_core.plugins.packages import install_package

    data = tmp_path / "data"
    data.mkdir()
    install_package(data, build_hmap(tmp_path))
    (data / "plugins" / "greeter" / "plugin.pyz").write_bytes(b"this is not a zip archive")
    async with start_daemon(data) as daemon:
        await login(page, daemon)
        await page.click("nav a[data-page='plugins']")
        row = page.locator("#plugins tr[data-plugin='greeter']")
        await row.wait_for()
        error = row.locator(".plugin-error")
        await error.wait_for()
        assert (await error.inner_text()).strip()
        await page.screenshot(path=str(shots / "plugins-failed.png"), full_page=True)
