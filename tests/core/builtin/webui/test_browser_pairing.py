"""The pairing page in headless Chromium with a real chat bridge: the OneBot (QQ) plugin, loaded
from its entry point into a running daemon, connected to the loopback OneBot v11 server of its
own tests. An unknown sender gets a code, the owner approves it on the page, the sender's next
message is answered; deny and revoke work the same way. Screenshot: ``pairing.png`` in the
``shots`` folder (see conftest).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from homeagent_core.app import App
from homeagent_core.config import ConfigStore
from homeagent_core.datadir import prepare_data_dir
from homeagent_sdk import ConfigDef
from homeagent_sdk.testing import FakeModel

ROOT = Path(__file__).resolve().parents[4]
ONEBOT = ROOT / "plugins" / "homeagent-plugin-onebot"
for _path in (ONEBOT / "tests", ONEBOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from conftest import API_KEY, PASSWORD  # noqa: E402
from onebot_fake import FakeOneBot, text_of  # noqa: E402

pytestmark = pytest.mark.skipif(
    not any(ep.name == "onebot" for ep in importlib.metadata.entry_points(group="homeagent")),
    reason="homeagent-plugin-onebot is not installed (pip install -e plugins/homeagent-plugin-onebot)",
)


@dataclass
class BridgeDaemon:
    app: App
    model: FakeModel
    fake: FakeOneBot
    url: str
    password: str = PASSWORD

    def client(self, **headers: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers={"X-API-Key": API_KEY, **headers}, timeout=10)


@contextlib.asynccontextmanager
async def bridge_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[BridgeDaemon]:
    """The web UI plus the ``onebot`` entry-point plugin, connected to a loopback OneBot server."""
    monkeypatch.setenv("HOMEAGENT_LOAD_PLUGINS", "onebot")
    fake = await FakeOneBot().start_server()
    data = prepare_data_dir(tmp_path / "data")
    config = ConfigStore(data / "config.db")
    try:  # the plugin declares these when it loads; the daemon is not running yet
        config.define_plugin("onebot", ConfigDef(key="ws_url", type="string", default=""))
        config.define_plugin("onebot", ConfigDef(key="reconnect_min", type="float", default=1.0))
        config.set("plugin.onebot.ws_url", fake.ws_url)
        config.set("plugin.onebot.reconnect_min", 0.05)
        config.set("core.llm.sources.deepseek.api_key", "sk-unused")  # the FakeModel answers; no setup notice
    finally:
        config.close()
    model = FakeModel(default="好的")
    app = App(
        data, load_entrypoints=True,
        builtins=("homeagent_core.builtin.cfgmgr", "homeagent_core.builtin.webui"), provider=model,
    )
    app.services.listen_port = 0
    await app.start()
    try:
        webui = app.host.pm.get_plugin("webui")
        assert webui is not None and webui.port, app.status()
        assert app.host.pm.get_plugin("onebot") is not None, app.status()
        webui.state.credentials.set_password(PASSWORD, webui.state.credentials_path)
        await fake.wait_connected()
        yield BridgeDaemon(app, model, fake, webui.url)
    finally:
        await app.stop()
        await fake.close()


async def _code_for(fake: FakeOneBot, user_id: int, name: str, text: str, transcript: list[str]) -> str:
    """An unknown QQ sender writes; returns the pairing code the bot answered with."""
    await fake.private(user_id, name, text)
    transcript.append(f"{name} (QQ {user_id}) -> bot: {text}")
    sent = await fake.next_sent()
    transcript.append(f"bot -> {name}: {text_of(sent)}")
    assert sent["user_id"] == user_id and "配对码：" in text_of(sent)  # in the language they wrote in
    return text_of(sent).split("配对码：")[1].split()[0]


async def test_owner_approves_denies_and_revokes_qq_senders_on_the_pairing_page(
    tmp_path, monkeypatch, page, login, shots
):
    transcript: list[str] = []
    async with bridge_daemon(tmp_path, monkeypatch) as daemon:
        fake = daemon.fake
        wang = await _code_for(fake, 12345, "小王", "你好", transcript)
        li = await _code_for(fake, 67890, "小李", "在吗", transcript)
        assert daemon.model.requests == []

        await login(page, daemon)
        await page.click("nav a[data-page='pairing']")
        row = page.locator(f"#pairing-pending tr[data-code='{wang}']")
        await row.wait_for()
        assert "小王 (qq 12345)" in await row.locator(".sender").inner_text()
        assert await row.locator("td").first.inner_text() == "onebot"
        await row.locator("input.person").fill("王小明")
        await row.locator("button.approve").click()
        done = page.locator(f"#pairing-decided tr[data-code='{wang}']")
        await done.wait_for()
        assert "approved" in await done.locator(".status").inner_text()
        assert "王小明" in await done.inner_text()
        assert "approved" in await page.inner_text("#pairing-result")
        await page.locator(f"#pairing-pending tr[data-code='{li}']").wait_for()
        await page.screenshot(path=str(shots / "pairing.png"), full_page=True)

        daemon.model.add("今天吃饺子吧")
        await fake.private(12345, "小王", "今天吃什么")
        transcript.append("小王 (QQ 12345) -> bot: 今天吃什么")
        sent = await fake.next_sent()
        transcript.append(f"bot -> 小王: {text_of(sent)}")
        assert (sent["user_id"], text_of(sent)) == (12345, "今天吃饺子吧")
        assert daemon.model.requests[-1]["messages"][-1]["content"] == "王小明 (QQ 12345): 今天吃什么"  # linked

        page.once("dialog", lambda dialog: dialog.accept())
        await page.locator(f"#pairing-pending tr[data-code='{li}'] button.deny").click()
        await page.locator(f"#pairing-decided tr[data-code='{li}'] .status:has-text('denied')").wait_for()
        await fake.private(67890, "小李", "在吗？")
        transcript.append("小李 (QQ 67890) -> bot: 在吗？ (denied: no answer)")

        await page.locator(f"#pairing-decided tr[data-code='{wang}'] button.revoke").click()
        await page.locator(f"#pairing-decided tr[data-code='{wang}']").wait_for(state="detached")
        again = await _code_for(fake, 12345, "小王", "还在吗", transcript)
        assert again != wang
        await page.locator(f"#pairing-pending tr[data-code='{again}']").wait_for()
        assert fake.sent.empty()  # the denied sender got nothing
        assert len(daemon.model.requests) == 1
    print("\n".join(["", "QQ transcript (platform side), decisions taken on the pairing page:", *transcript]))


async def test_pairing_api_needs_login_csrf_and_same_origin_and_names_bad_input(tmp_path, monkeypatch, page, login):
    async with bridge_daemon(tmp_path, monkeypatch) as daemon:
        code = await _code_for(daemon.fake, 12345, "小王", "你好", [])
        async with httpx.AsyncClient(base_url=daemon.url, timeout=10) as anonymous:
            assert (await anonymous.get("/api/v1/pairing")).status_code == 401
            assert (await anonymous.post("/api/v1/pairing/approve", json={"code": code})).status_code == 401
        async with daemon.client() as client:
            listed = (await client.get("/api/v1/pairing")).json()
            assert listed["bridges"] == ["onebot"]
            assert [(r["code"], r["status"], r["name"]) for r in listed["requests"]] == [(code, "pending", "小王")]
            missing = await client.post("/api/v1/pairing/approve", json={"code": "NOPE22"})
            assert missing.status_code == 404 and "NOPE22" in missing.json()["error"]
            other = await client.post("/api/v1/pairing/approve", json={"code": code, "plugin": "telegram"})
            assert other.status_code == 404 and "bridges: onebot" in other.json()["error"]
            odd = await client.post("/api/v1/pairing/deny", json={"code": code, "person": "x"})
            assert odd.status_code == 400 and "approve" in odd.json()["error"]
            assert (await client.post("/api/v1/pairing/approve", json={})).status_code == 400

        await login(page, daemon)
        forged = await page.request.post(daemon.url + "/api/v1/pairing/approve", data={"code": code})
        assert forged.status == 403 and "CSRF" in (await forged.json())["error"]
        cross = await page.request.post(
            daemon.url + "/api/v1/pairing/approve", data={"code": code}, headers={"Origin": "https://evil.example"}
        )
        assert cross.status == 403
        async with daemon.client() as client:
            assert (await client.get("/api/v1/pairing")).json()["requests"][0]["status"] == "pending"
