"""The Nodes page in headless Chromium: the owner pairs a node, sees it online with its
capabilities, and revokes it (its link is closed and the node is told its token is refused).
Screenshot: ``nodes.png`` in the ``shots`` folder (see conftest).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import PASSWORD

from homeagent_core.app import App
from homeagent_core.datadir import prepare_data_dir
from homeagent_core.node.caps import StatusCapability
from homeagent_core.node.client import NodeClient, TokenRefused, join
from homeagent_core.node.config import NodeConfig
from homeagent_sdk.testing import FakeModel


@dataclass
class NodesDaemon:
    app: App
    url: str
    password: str = PASSWORD


@contextlib.asynccontextmanager
async def nodes_daemon(tmp_path: Path) -> AsyncIterator[NodesDaemon]:
    data = prepare_data_dir(tmp_path / "data")
    app = App(data, load_entrypoints=False, provider=FakeModel(default="好的"), memory=False,
              builtins=("homeagent_core.builtin.nodes", "homeagent_core.builtin.webui"))
    app.services.listen_port = 0
    await app.start()
    try:
        webui = app.host.pm.get_plugin("webui")
        assert webui is not None and webui.port, app.status()
        webui.state.credentials.set_password(PASSWORD, webui.state.credentials_path)
        yield NodesDaemon(app, webui.url)
    finally:
        await app.stop()


async def test_owner_pairs_sees_and_revokes_a_node_on_the_nodes_page(tmp_path, page, login, shots):
    async with nodes_daemon(tmp_path) as daemon:
        await login(page, daemon)
        await page.click("nav a[data-page='nodes']")
        await page.fill("#node-name", "lap")
        await page.click("#node-pair button")
        line = page.locator("#node-code")
        await line.filter(has_text="homeagent node join").wait_for()
        code = re.search(r"code (\w{4}-\w{4})", await line.inner_text())
        assert code is not None and daemon.url in await line.inner_text()

        folder = tmp_path / "lap"
        await asyncio.to_thread(join, daemon.url, code.group(1), folder)
        said: list[str] = []
        client = NodeClient(NodeConfig.load(folder), [StatusCapability()], say=said.append)
        task = asyncio.create_task(client.run_forever())
        row = page.locator("#nodes tr[data-node='lap']")
        await row.locator(".state:has-text('online')").wait_for()
        assert "status" in await row.inner_text()
        await page.screenshot(path=str(shots / "nodes.png"), full_page=True)

        page.once("dialog", lambda dialog: dialog.accept())
        await row.locator("button.revoke").click()
        await row.wait_for(state="detached")
        assert "revoked and disconnected" in await page.inner_text("#nodes-result")
        with pytest.raises(TokenRefused, match="revoked"):
            async with asyncio.timeout(30):
                await task
        assert daemon.app.kernel.tools.get("node_lap_status") is None
