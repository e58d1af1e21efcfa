"""People in the browser (headless Chromium): two persons' own web UIs, and the owner's
Approve / Deny of an adult's ``cmd_run`` that then runs (a real ``echo``) or fails.

Screenshots are written to the test's temp folder.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
from menu import menu_settles_on

from homeagent_sdk._fake_model import ToolCallReply

CMD = "homeagent_core.builtin.cmd"
MUM_PASSWORD = "mums-own-password-1"


async def wait_for(predicate: Any, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


def follow_up(daemon: Any, approval: int) -> str:
    """The text of the ``[审批 #N]`` input the model received, or ``""``."""
    for request in daemon.model.requests:
        text = str(request["messages"][-1]["content"])
        if f"[审批 #{approval}]" in text:
            return text
    return ""


async def test_the_owner_approves_and_denies_an_adults_cmd_run_in_the_browser(
    page: Any, login: Any, start_daemon: Any, tmp_path: Path
):
    async with start_daemon(tmp_path / "data", extra=(CMD,)) as daemon:
        daemon.app.config.set("plugin.cmd.enabled", "true")
        daemon.app.config.set("plugin.cmd.allow_root", "true")  # the tests run as root
        cmd = daemon.app.host.pm.get_plugin("cmd")
        daemon.app.people.add("mum", "adult")
        key = daemon.app.people.new_key("mum")
        await login(page, daemon)
        daemon.model.add(
            ToolCallReply("cmd_run", {"command": "echo approved-run"}),
            "it waits",
            ToolCallReply("cmd_run", {"command": "echo denied-run"}),
            "it waits too",
        )
        mum = openai.AsyncOpenAI(base_url=daemon.url + "/v1", api_key=key, max_retries=0, timeout=10)
        async with mum:
            await mum.chat.completions.create(model="m", messages=[{"role": "user", "content": "list files"}])
            toast = page.locator('#approval-toasts [data-approval="1"]')
            await toast.wait_for()
            assert "mum (adult" in await toast.inner_text() and "approved-run" in await toast.inner_text()
            assert len(cmd.history) == 0  # it waits for the owner
            await page.screenshot(path=str(tmp_path / "approval-toast.png"))
            await toast.locator("button[data-approve]").click()
            await wait_for(lambda: follow_up(daemon, 1))
            assert "approved-run" in follow_up(daemon, 1) and len(cmd.history) == 1
            await toast.wait_for(state="detached")

            await mum.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
            await page.goto(daemon.url + "/#people")
            row_deny = page.locator('#people-approvals button[data-deny="2"]')
            await row_deny.wait_for()
            await page.screenshot(path=str(tmp_path / "people.png"), full_page=True)
            await row_deny.click()
            await wait_for(lambda: follow_up(daemon, 2))
            assert "denied by the owner" in follow_up(daemon, 2)
            assert len(cmd.history) == 1  # the denied call never ran
            # The history below keeps both outcomes (they are in people.db: a restart keeps them too).
            await page.locator("#approval-history-box summary").click()
            await page.locator('#people-approval-history tr[data-history="2"] td[data-status="denied"]').wait_for()
            approved = page.locator('#people-approval-history tr[data-history="1"] td[data-status="approved"]')
            await approved.wait_for()
            assert "(web)" in await page.locator('#people-approval-history tr[data-history="1"]').inner_text()
        outcomes = [(r.person, r.outcome) for r in daemon.app.people.audit_rows(50) if r.action == "cmd_run"]
        assert ("mum", "approved") in outcomes and ("mum", "denied-by-owner") in outcomes


async def test_two_persons_each_see_only_their_own_pages(page: Any, login: Any, daemon: Any, tmp_path: Path):
    daemon.app.people.add("mum", "adult")
    await login(page, daemon)
    await page.goto(daemon.url + "/#people")
    invite = page.locator('#people button[data-invite="mum"]')
    await invite.wait_for()
    await invite.click()
    link = (await page.locator("#people-secret-value").inner_text()).strip()
    assert "/invite#" in link
    assert await page.locator('nav a[data-page="settings"]').is_visible()

    context = await page.context.browser.new_context()
    other = await context.new_page()
    try:
        await other.goto(link)
        await other.locator("#invite-button:not([disabled])").wait_for()
        await other.fill("#invite-password", MUM_PASSWORD)
        await other.fill("#invite-repeat", MUM_PASSWORD)
        await other.click("#invite-button")
        await other.wait_for_url("**/login#mum")
        assert await other.input_value("#username") == "mum"
        await other.fill("#password", MUM_PASSWORD)
        await other.click("#login-button")
        await other.locator("#chat-form").wait_for()  # her own chat first
        await menu_settles_on(other, ["chat", "reminders", "account"])
        await other.click('nav a[data-page="account"]')
        await other.locator("#account-form").wait_for()
        assert "mum (adult)" in await other.locator("#account-who").inner_text()
        assert not await other.locator("#page-people").is_visible()
        await other.screenshot(path=str(tmp_path / "account-mum.png"))
        # The same link a second time is refused on the page itself.
        await other.goto(link)
        await other.locator("#invite-who", has_text="used already").wait_for()
    finally:
        await context.close()
