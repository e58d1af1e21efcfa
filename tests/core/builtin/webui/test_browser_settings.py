"""In headless Chromium: settings grouped by plugin with one search over all groups, a plugin's row
opening its settings group, and a ``.hmap`` installed from the Plugins page answering in the chat
without a restart. Screenshots go to the ``shots`` folder (see conftest)."""

from __future__ import annotations

from typing import Any

from homeagent_sdk.testing import ToolCallReply


def matching(config: Any, term: str) -> set[str]:
    """Setting keys whose key, display name or description contain ``term`` (what the page should show)."""
    found = set()
    for row in config.describe(""):
        definition = config.definition(row["key"])
        label, description = (definition.display_name, definition.description) if definition else ("", "")
        text = f"{row['key']} {label} {description}"
        if term.lower() in text.lower():
            found.add(row["key"])
    return found


async def shown_keys(page: Any) -> set[str]:
    keys = await page.locator("#settings-form .setting [data-key]").evaluate_all("els => els.map(e => e.dataset.key)")
    return set(keys)


async def test_settings_are_grouped_by_plugin_and_one_search_filters_every_group(daemon, page, login, shots):
    config = daemon.app.config
    await login(page, daemon)
    await page.click("nav a[data-page='settings']")
    core = page.locator("#settings-form details.settings-group[data-scope='core']")
    await core.wait_for()
    scopes = await page.locator("#settings-form details.settings-group").evaluate_all(
        "els => els.map(e => e.dataset.scope)")
    assert scopes[0] == "core" and "plugin.webui" in scopes and len(scopes) == len(set(scopes))
    assert await core.evaluate("e => e.open") is True
    webui = page.locator("#settings-form details.settings-group[data-scope='plugin.webui']")
    assert await webui.evaluate("e => e.open") is False  # collapsed until opened
    await webui.locator("summary").click()
    await webui.locator("[data-key='plugin.webui.session_ttl_hours']").wait_for()
    field = core.locator("[data-key='core.agent.max_tool_turns']")
    await field.fill("7")
    await field.dispatch_event("change")
    await core.locator(".setting:has([data-key='core.agent.max_tool_turns']) .saved:has-text('saved')").wait_for()
    assert config.get("core.agent.max_tool_turns") == 7
    await core.locator("summary").click()  # fold the long core group: one heading per plugin remains
    await page.wait_for_function("() => !document.querySelector(\"details[data-scope='core']\").open")
    await page.screenshot(path=str(shots / "settings.png"), full_page=True)

    # One search over every group: by key (hits core and a plugin), then by a word of a description.
    await page.fill("#settings-filter", "api_key")
    expected = matching(config, "api_key")
    assert "core.llm.api_key" in expected and "plugin.webui.api_key" in expected  # in two groups
    await page.wait_for_function(
        "n => document.querySelectorAll('#settings-form .setting').length === n", arg=len(expected))
    assert await shown_keys(page) == expected
    groups = await page.locator("#settings-form details.settings-group").evaluate_all(
        "els => els.map(e => [e.dataset.scope, e.open])")
    assert ["core", True] in groups and ["plugin.webui", True] in groups
    await page.fill("#settings-filter", "lifetime")
    await page.wait_for_selector("#settings-form [data-key='plugin.webui.session_ttl_hours']")
    assert await shown_keys(page) == matching(config, "lifetime")
    assert await page.locator("#settings-count").inner_text() == f"{len(matching(config, 'lifetime'))} match"
    await page.screenshot(path=str(shots / "settings-search.png"), full_page=True)
    await page.fill("#settings-filter", "no-such-setting-anywhere")
    await page.wait_for_selector("#settings-form .empty:has-text('No settings match')")

    # A plugin's row on the Plugins page opens its group (search cleared, group open and in view).
    await page.click("nav a[data-page='plugins']")
    await page.locator("#plugins tr[data-plugin='webui'] a.plugin-settings").click()
    await page.wait_for_selector("#settings-form details.settings-group.highlight[data-scope='plugin.webui'][open]")
    assert await page.input_value("#settings-filter") == ""
    assert await page.locator("[data-key='plugin.webui.session_ttl_hours']").is_visible()


async def test_an_hmap_installed_from_the_plugins_page_runs_and_its_tool_answers_in_the_chat(
    daemon, page, login, tmp_path, build_hmap, shots
):
    await login(page, daemon)
    await page.click("nav a[data-page='plugins']")
    await page.wait_for_selector("#plugins tr[data-plugin='webui']")
    await page.set_input_files("#hmap", str(build_hmap(tmp_path)))
    await page.click("#install-form button[type='submit']")
    await page.wait_for_selector("#install-result:has-text('installed greeter 0.1.0 (started; tools: greeter_greet')")
    row = page.locator("#plugins tr[data-plugin='greeter']")
    await row.locator(".status-started").wait_for()
    assert "restart" not in (await row.inner_text()).lower()
    await page.screenshot(path=str(shots / "plugins-installed-live.png"), full_page=True)

    daemon.model.add(ToolCallReply("greeter_greet", {"who": "小王"}), "已经跟小王打过招呼了。")
    await page.click("nav a[data-page='chat']")
    await page.fill("#input", "跟小王打个招呼")
    await page.press("#input", "Enter")
    await page.wait_for_selector(".msg.assistant[data-done='1']:has-text('已经跟小王打过招呼了')")
    tool_messages = [m["content"] for m in daemon.model.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_messages == ["Hello, 小王!"]


async def test_a_package_put_on_disk_behind_the_daemon_is_started_with_one_click(daemon, page, login, tmp_path):
    from hmapdev.build import pack_project, render_template
    from homeagent_core.plugins.packages import install_package

    render_template("lua", "luahello", tmp_path / "luahello")
    install_package(daemon.app.data_dir, pack_project(tmp_path / "luahello"))
    await login(page, daemon)
    await page.click("nav a[data-page='plugins']")
    row = page.locator("#plugins tr[data-plugin='luahello']")
    await row.locator("td:has-text('installed, not running')").wait_for()
    await row.locator("button.start").click()
    await page.wait_for_selector("#install-result:has-text('started luahello; tools: luahello_greet')")
    await row.locator(".status-started").wait_for()
    assert await row.locator("button.start").count() == 0
    assert "luahello_greet" in daemon.app.kernel.tools


async def test_the_source_name_pattern_compiles_and_the_browser_enforces_it(daemon, page, login):
    console_errors: list[str] = []
    page.on("console", lambda message: console_errors.append(message.text) if message.type == "error" else None)
    await login(page, daemon)
    await page.click("nav a[data-page='settings']")
    await page.wait_for_selector("#source-name")
    # The same rule as the server's (api_llm._NAME): letters, digits, "_" and "-", 1 to 64 of them.
    for name, valid in (("local", True), ("my-source_2", True), ("bad name!", False), ("a" * 65, False)):
        await page.fill("#source-name", name)
        state = await page.eval_on_selector("#source-name", "e => [e.validity.valid, e.validity.patternMismatch]")
        assert state == [valid, not valid], (name, state)
    assert not [text for text in console_errors if "pattern" in text], console_errors


async def test_the_calendar_passwords_are_never_shown_and_json_settings_read_as_json(
    start_daemon: Any, tmp_path: Any, page: Any, login: Any
) -> None:
    import json

    async with start_daemon(tmp_path / "data", extra=("homeagent_core.builtin.calendar",)) as daemon:
        config = daemon.app.config
        calendars = [{"name": "home", "url": "https://cloud.example.com/dav/alice/family/", "user": "alice"}]
        config.set("plugin.calendar.calendars", calendars)
        config.set("plugin.calendar.passwords", {"home": "app-secret-1234"})
        await login(page, daemon)
        await page.click("nav a[data-page='settings']")
        group = page.locator("#settings-form details.settings-group[data-scope='plugin.calendar']")
        await group.locator("summary").click()
        secret = group.locator("[data-key='plugin.calendar.passwords']")
        await secret.wait_for()
        assert await secret.get_attribute("type") == "password" and await secret.input_value() == ""
        assert "app-secret-1234" not in await page.content()
        shown = group.locator("[data-key='plugin.calendar.calendars']")
        assert json.loads(await shown.input_value()) == calendars
        await secret.fill(json.dumps({"home": "new-secret"}))
        await secret.dispatch_event("change")
        await group.locator(".setting:has([data-key='plugin.calendar.passwords']) .saved:has-text('saved')").wait_for()
        assert config.get("plugin.calendar.passwords") == {"home": "new-secret"}
