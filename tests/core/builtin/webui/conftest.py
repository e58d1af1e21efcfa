"""A running daemon with the web UI on a free port, backed by a FakeModel."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import stat
import zipfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from hmapdev.build import pack_project, render_template
from homeagent_core.app import App
from homeagent_sdk.testing import FakeModel

API_KEY = "test-api-key-0123456789"
PASSWORD = "correct horse battery staple"


@dataclass
class WebDaemon:
    app: App
    model: FakeModel
    url: str
    plugin: object
    api_key: str = API_KEY
    password: str = PASSWORD

    def client(self, *, key: bool = True) -> httpx.AsyncClient:
        headers = {"X-API-Key": API_KEY} if key else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10)


def build_package(root: Path, *, name: str = "greeter", version: str = "0.1.0", greeting: str = "Hello") -> Path:
    """A real out-of-process plugin package built with hmapdev (tool ``<name>_greet``)."""
    project = root / f"{name}-{version}"
    render_template("proc", name, project)
    manifest = json.loads((project / "plugin.json").read_text(encoding="utf-8"))
    manifest["version"] = version
    (project / "plugin.json").write_text(json.dumps(manifest), encoding="utf-8")
    source = project / "src" / "plugin.py"
    source.write_text(source.read_text(encoding="utf-8").replace("Hello", greeting), encoding="utf-8")
    return pack_project(project)


def hostile_package(kind: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("plugin.json", json.dumps({"name": "evil", "version": "1.0.0", "entry": "plugin.bin"}))
        zf.writestr("plugin.bin", "#!/bin/sh\n")
        if kind == "slip":
            zf.writestr("../../outside.sh", "rm -rf ~")
        elif kind == "absolute":
            zf.writestr("/etc/cron.d/evil", "* * * * * root true")
        elif kind == "symlink":
            link = zipfile.ZipInfo("thirdpart/passwd")
            link.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(link, "/etc/passwd")
    return buf.getvalue()


@contextlib.asynccontextmanager
async def running_daemon(
    data_dir: Path, *, extra: tuple[str, ...] = (), sources: bool = False
) -> AsyncIterator[WebDaemon]:
    """A started App over ``data_dir`` (plugins already installed there start too).

    ``extra`` names more built-in modules to load (e.g. the timer). With ``sources`` the model
    is the real provider manager over the configured LLM sources instead of a FakeModel.
    """
    model = FakeModel(default="好的")
    app = App(
        data_dir,
        load_entrypoints=False,
        builtins=("homeagent_core.builtin.cfgmgr", "homeagent_core.builtin.webui", *extra),
        provider=None if sources else model,
    )
    app.services.listen_port = 0
    await app.start()
    try:
        plugin = app.host.pm.get_plugin("webui")
        assert plugin is not None and plugin.port, app.status()
        plugin.state.credentials.set_password(PASSWORD, plugin.state.credentials_path)
        yield WebDaemon(app, model, plugin.url, plugin)
    finally:
        await app.stop()


@pytest.fixture(autouse=True)
def _webui_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOMEAGENT_WEBUI_API_KEY", API_KEY)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[WebDaemon]:
    async with running_daemon(tmp_path / "data") as running:
        yield running


@pytest.fixture
def start_daemon() -> Callable[..., contextlib.AbstractAsyncContextManager[WebDaemon]]:
    """``async with start_daemon(data_dir, extra=(module, ...)) as daemon``: for tests that prepare
    the data dir first or need more built-ins."""
    return running_daemon


@pytest.fixture
def build_hmap() -> Callable[..., Path]:
    """``build_hmap(root, name=, version=, greeting=)`` → a real ``.hmap`` built with hmapdev."""
    return build_package


@pytest.fixture
def hostile_hmap() -> Callable[[str], bytes]:
    """``hostile_hmap("slip" | "absolute" | "symlink")`` → the bytes of a malicious package."""
    return hostile_package


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


#: Set to a folder (``make screenshots`` sets ``docs/screenshots``) to keep the browser tests' renders.
SCREENSHOTS_ENV = "HOMEAGENT_SCREENSHOTS"


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the browser tests save screenshots in.

    A temporary one, so a test run never changes the checkout; ``$HOMEAGENT_SCREENSHOTS`` names
    another (``make screenshots`` renders the committed ``docs/screenshots/`` this way).
    """
    chosen = os.environ.get(SCREENSHOTS_ENV, "")
    if not chosen:
        return tmp_path_factory.mktemp("screenshots")
    folder = Path(chosen).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
async def page() -> AsyncIterator[object]:
    """A page in headless Chromium (skips the test when Chromium is not installed)."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        context = await browser.new_context(viewport={"width": 1100, "height": 800})
        page = await context.new_page()
        yield page
        await context.close()
        await browser.close()


@contextlib.asynccontextmanager
async def open_page(*, viewport: dict[str, int], locale: str = "en-US") -> AsyncIterator[Any]:
    """A page in a fresh headless Chromium with this screen size and browser language."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        context = await browser.new_context(viewport=viewport, locale=locale)
        try:
            yield await context.new_page()
        finally:
            await context.close()
            await browser.close()


@pytest.fixture
def browser_page() -> Callable[..., contextlib.AbstractAsyncContextManager[Any]]:
    """``async with browser_page(viewport={...}, locale="zh-CN") as page``: a page of its own."""
    return open_page


async def browser_login(page: Any, daemon: WebDaemon) -> None:
    """Log ``page`` in to ``daemon``'s web UI and wait for the chat page."""
    await page.goto(daemon.url + "/")
    await page.wait_for_url("**/login")
    await page.fill("#password", daemon.password)
    await page.click("#login-button")
    await page.wait_for_selector("#chat-form")


@pytest.fixture
def login() -> Callable[[Any, WebDaemon], Any]:
    """``await login(page, daemon)``: the page logged in and showing the chat."""
    return browser_login
