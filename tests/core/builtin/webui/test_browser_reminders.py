"""The Reminders and Backups pages in headless Chromium, over a real daemon.

The mother adds a reminder in words and sees it with its next due time in the household's
zone (and the question when it cannot read what she typed); the child, logged in beside her,
does not see it. The owner sets the backup schedule, creates a backup from the page and
downloads the archive; a damaged archive says so; the child has no Backups entry, cannot open
the page and gets 403 from its API. Screenshots go to the ``shots`` folder.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

REMINDERS = "homeagent_core.builtin.reminders"
BACKUP = "homeagent_core.builtin.backup"
SHANGHAI = ZoneInfo("Asia/Shanghai")
MUM_PASSWORD = "mums-own-password-1"
KID_PASSWORD = "kids-own-password-1"
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def give_login(daemon: Any, name: str, role: str, password: str) -> None:
    daemon.app.people.add(name, role)
    daemon.plugin.state.logins.set_password(name, daemon.app.people.get(name).created_at, password)


async def person_page(page: Any, daemon: Any, name: str, password: str) -> Any:
    """A page in a browser context of its own, logged in as ``name`` (a non-owner lands on their chat)."""
    context = await page.context.browser.new_context(viewport={"width": 1100, "height": 800})
    other = await context.new_page()
    await other.goto(daemon.url + "/login")
    await other.fill("#username", name)
    await other.fill("#password", password)
    await other.click("#login-button")
    await other.locator("#chat-form").wait_for()
    return other


async def test_the_mother_adds_a_reminder_in_words_and_the_child_does_not_see_it(
    page: Any, start_daemon: Any, tmp_path: Path, shots: Path
) -> None:
    async with start_daemon(tmp_path / "data", extra=(REMINDERS,)) as daemon:
        daemon.app.config.set("plugin.reminders.timezone", "Asia/Shanghai")
        give_login(daemon, "mum", "adult", MUM_PASSWORD)
        give_login(daemon, "kid", "child", KID_PASSWORD)
        mum = await person_page(page, daemon, "mum", MUM_PASSWORD)
        kid = await person_page(page, daemon, "kid", KID_PASSWORD)
        try:
            await mum.click("nav a[data-page='reminders']")
            await mum.locator("#reminders td", has_text="No reminders yet").wait_for()

            await mum.fill("#reminder-said", "下下下周八 吃药")
            await mum.click("#reminder-form button[type=submit]")
            problem = mum.locator("#reminder-error")
            await problem.wait_for()
            assert "what time do you mean?" in await problem.inner_text()
            assert "When did you mean?" in await problem.inner_text()
            await mum.screenshot(path=str(shots / "reminders-unreadable.png"))

            await mum.fill("#reminder-said", "明天早上7点 吃药")
            await mum.click("#reminder-form button[type=submit]")
            row = mum.locator("#reminders tr[data-person='mum']", has_text="吃药")
            await row.wait_for()
            await problem.wait_for(state="hidden")
            day = datetime.now(SHANGHAI).date() + timedelta(days=1)
            expected = datetime(day.year, day.month, day.day, 7, tzinfo=SHANGHAI)
            due = row.locator("td.due")
            assert await due.get_attribute("data-due") == expected.isoformat()
            weekday = WEEKDAYS[day.weekday()]
            assert await due.inner_text() == f"{day.isoformat()} 07:00 {weekday}"
            assert await row.locator("td.repeat").inner_text() == "Once"
            assert "Asia/Shanghai" in await mum.locator("#reminders-zone").inner_text()
            await mum.fill("#reminder-said", "每个工作日早上7点提醒我叫孩子起床")
            await mum.click("#reminder-form button[type=submit]")
            weekdays = mum.locator("#reminders tr", has_text="叫孩子起床")
            await weekdays.locator("td.repeat", has_text="每个工作日 07:00 · every weekday at 07:00").wait_for()
            await mum.screenshot(path=str(shots / "reminders.png"), full_page=True)

            # The child's own page, beside hers: her reminders are not there (a reload shows the same).
            await kid.click("nav a[data-page='reminders']")
            await kid.locator("#reminders td", has_text="No reminders yet").wait_for()
            await kid.reload()
            await kid.locator("#reminders td", has_text="No reminders yet").wait_for()
            assert await kid.locator("#reminders tr[data-reminder]").count() == 0
            assert "吃药" not in await kid.locator("#reminders").inner_text()
            await kid.locator("nav a[data-page='backups']").wait_for(state="hidden")  # once the session is read

            # The child's reminder shows on his page, and on hers not.
            await kid.fill("#reminder-said", "周六下午3点提醒我去游泳")
            await kid.click("#reminder-form button[type=submit]")
            await kid.locator("#reminders tr[data-person='kid']", has_text="去游泳").wait_for()
            await mum.reload()
            await mum.locator("#reminders tr", has_text="吃药").wait_for()
            assert "去游泳" not in await mum.locator("#reminders").inner_text()

            # Snooze and cancel on her page.
            await row.locator("input.snooze-by").fill("1h")
            await row.locator("button.snooze").click()
            await mum.locator("#reminders-result", has_text="Snoozed until").wait_for()
            mum.on("dialog", lambda dialog: dialog.accept())
            await mum.locator("#reminders tr", has_text="吃药").locator("button.cancel").click()
            await mum.locator("#reminders tr", has_text="吃药").wait_for(state="detached")
            plugin = daemon.app.host.pm.get_plugin("reminders")
            left = sorted((r.person, r.text) for r in plugin.store.pending())
            assert left == [("kid", "去游泳"), ("mum", "叫孩子起床")]
        finally:
            await mum.context.close()
            await kid.context.close()


async def test_the_owner_backs_up_from_the_page_and_the_child_cannot_open_it(
    page: Any, login: Any, start_daemon: Any, tmp_path: Path, shots: Path
) -> None:
    async with start_daemon(tmp_path / "data", extra=(BACKUP,)) as daemon:
        give_login(daemon, "kid", "child", KID_PASSWORD)
        await login(page, daemon)
        await page.click("nav a[data-page='backups']")
        await page.locator("#backup-last", has_text="No backup has run yet").wait_for()
        await page.locator("#backup-archives td", has_text="No archives yet").wait_for()

        await page.select_option("#backup-schedule-select", "daily")
        await page.locator("label:has(#backup-schedule-select) .saved", has_text="saved").wait_for()
        await page.fill("#backup-keep-daily", "5")
        await page.press("#backup-keep-daily", "Enter")
        await page.locator("label:has(#backup-keep-daily) .saved", has_text="saved").wait_for()
        assert daemon.app.config.get("plugin.backup.schedule") == "daily"
        assert daemon.app.config.get("plugin.backup.keep_daily") == 5

        await page.click("#backup-now")
        await page.locator("#backup-progress", has_text="Backup written").wait_for(timeout=60000)
        (archive,) = sorted((daemon.app.data_dir / "backups").glob("homeagent-*.tar"))
        row = page.locator(f"#backup-archives tr[data-archive='{archive.name}']")
        await row.locator("td[data-status='complete']").wait_for()
        await page.locator("#backup-last [data-ok='true']").wait_for()
        async with page.expect_download() as info:
            await row.locator("a.download").click()
        download = await info.value
        saved = tmp_path / "downloaded.tar"
        await download.save_as(str(saved))
        assert download.suggested_filename == archive.name and saved.read_bytes() == archive.read_bytes()

        broken = archive.with_name("homeagent-20250101T000000Z.tar")
        broken.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
        damaged = page.locator(f"#backup-archives tr[data-archive='{broken.name}'] td[data-status='damaged']")
        await damaged.wait_for(timeout=15000)  # the page refreshes every 5 s
        assert "Damaged, cannot be restored" in await damaged.inner_text()
        assert await page.locator(f"#backup-archives tr[data-archive='{broken.name}'] a.download").count() == 0
        await page.screenshot(path=str(shots / "backups.png"), full_page=True)

        kid = await person_page(page, daemon, "kid", KID_PASSWORD)
        try:
            await kid.locator("nav a[data-page='backups']").wait_for(state="hidden")  # once the session is read
            await kid.goto(daemon.url + "/#backups")
            await kid.wait_for_url("**/#account")
            await kid.locator("#account-form").wait_for()
            assert not await kid.locator("#page-backups").is_visible()
            assert await kid.locator("#backup-archives tr[data-archive]").count() == 0
            status = await kid.evaluate("fetch('/plugins/backup/status').then((r) => r.status)")
            download = await kid.evaluate(f"fetch('/plugins/backup/download/{archive.name}').then((r) => r.status)")
            assert (status, download) == (403, 403)
        finally:
            await kid.context.close()
