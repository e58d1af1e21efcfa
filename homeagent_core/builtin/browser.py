"""Built-in ``browser``: a real headless browser for pages that need JavaScript.

One tool, ``browser(action, url, label, text)``: ``open`` a URL, ``read`` the page's visible
text, ``click`` an element by its visible label, ``type`` into a field found by its label or
placeholder, take a ``screenshot`` (stored in the media store and handed to a model that takes
images as an image block; otherwise its media id can be passed to ``describe_image``),
``close``. One browser per agent, started on first use and closed after
``plugin.browser.idle_timeout`` without a call.

Every connection the browser makes — the page itself, every redirect hop, scripts, images,
``fetch``, form posts, WebSockets — goes through the same SSRF guard as ``web_fetch``
(``plugin.web.allow_private`` allowlists private addresses): Chromium's only way out is the
checking proxy of :mod:`~homeagent_core.builtin.browser_proxy`, loopback included, with QUIC
and non-proxied WebRTC UDP switched off. A refused connection fails and the first refusal is
reported.

Needs Playwright (``pip install 'homeagent[browser]'``) and a Chromium on the system
(``plugin.browser.executable``, default the ``chromium`` on ``PATH``); Playwright's own browser
download is not used.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from homeagent_core.builtin.browser_proxy import REFUSED_HEADER, GuardedProxy
from homeagent_sdk import ConfigDef, HomeAgentError, SettingsRegistry, ToolError, ToolRegistryProtocol, hookimpl
from homeagent_sdk.ssrf import AddressPolicy, check_url
from homeagent_sdk.types import MediaAttachment, ToolResult

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "browser"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    # every connection through the checking proxy: no QUIC, no WebRTC UDP around it
    "--disable-quic",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
]
ACTIONS = ("open", "read", "click", "type", "screenshot", "close")

__all__ = ["BrowserPlugin", "make_plugin"]


class BrowserPlugin:
    """The plugin object; holds at most one browser."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self._pw: Any = None
        self._browser: Any = None
        self._page: Any = None
        self._lock = asyncio.Lock()
        self._idle: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task[None] | None = None
        self._refused: list[str] = []
        self._proxy: GuardedProxy | None = None

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(
            key="executable", type="string", default="",
            description="Chromium executable for the browser tool (empty = chromium or chromium-browser on PATH).",
        ))
        registry.add(ConfigDef(
            key="idle_timeout", type="duration", default="5m", min=1, max=86400,
            description="Close the browser after this long without a browser call.",
        ))
        registry.add(ConfigDef(
            key="max_chars", type="int", default=20000, min=200, max=1_000_000,
            description="Most characters of page text one read returns.",
        ))

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.browser, serial=True, timeout=120)

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk

    @hookimpl
    async def shutdown(self) -> None:
        await self._close()
        closing, self._closing = self._closing, None
        if closing is not None:  # an idle close still stopping Playwright's driver: let it finish
            with contextlib.suppress(Exception):
                await closing

    # ------------------------------------------------------------------ plumbing

    @property
    def sdk(self) -> ScopedSDK:
        if self._sdk is None:
            raise ToolError("browser has not started yet")
        return self._sdk

    def _policy(self) -> AddressPolicy:
        config = self.sdk.config
        allow = config.get("plugin.web.allow_private", "") if config is not None else ""
        return AddressPolicy.parse(str(allow or ""))

    async def _ensure(self) -> Any:
        if self._page is not None and not self._page.is_closed():
            return self._page
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            raise ToolError("the browser tool is unavailable: Playwright is not installed "
                            "(pip install 'homeagent[browser]')") from None
        configured = str(self.sdk.settings.get("executable") or "").strip()
        executable = configured or shutil.which("chromium") or shutil.which("chromium-browser")
        if not executable:
            raise ToolError("the browser tool is unavailable: looked for chromium and chromium-browser on PATH; "
                            "install Chromium or set plugin.browser.executable")
        policy = self._policy()
        self._proxy = GuardedProxy(policy, self._refused_by_proxy)
        proxy_url = await self._proxy.start()
        # <-loopback>: Chromium would otherwise bypass the proxy for localhost and 127.0.0.1
        args = [*LAUNCH_ARGS, f"--proxy-server={proxy_url}", "--proxy-bypass-list=<-loopback>"]
        self._pw = await async_playwright().start()
        try:
            self._browser = await self._pw.chromium.launch(executable_path=executable, args=args)
        except Exception as exc:
            await self._close()
            raise ToolError(f"the browser did not start ({executable}): {exc}") from None
        context = await self._browser.new_context(viewport={"width": 1100, "height": 800})

        async def guard(route: Any) -> None:
            url = route.request.url
            if urlsplit(url).scheme in ("data", "blob", "about"):
                await route.continue_()
                return
            try:
                await check_url(url, policy)
            except ToolError as exc:
                self._refused.append(str(exc))
                await route.abort("blockedbyclient")
                return
            await route.continue_()

        await context.route("**/*", guard)
        self._page = await context.new_page()
        return self._page

    def _refused_by_proxy(self, reason: str) -> None:
        if reason not in self._refused:
            self._refused.append(reason)

    def _touch(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        delay = float(self.sdk.settings.get("idle_timeout") or 300)
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later(delay, self._close_when_idle)

    def _close_when_idle(self) -> None:
        """Start closing the idle browser; shutdown waits for this close to finish."""
        self._closing = asyncio.get_running_loop().create_task(self._close(), name="browser-idle-close")

    async def _close(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        browser, pw, proxy = self._browser, self._pw, self._proxy
        self._page = self._browser = self._pw = self._proxy = None
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        if pw is not None:
            with contextlib.suppress(Exception):
                await pw.stop()
        if proxy is not None:
            await proxy.close()

    @property
    def running(self) -> bool:
        """Whether a browser is open now (or still closing: its processes have not exited yet)."""
        closing = self._closing is not None and not self._closing.done()
        return self._browser is not None or closing

    async def _locate(self, page: Any, label: str, *, field: bool) -> Any:
        candidates = (
            [page.get_by_label(label, exact=False), page.get_by_placeholder(label, exact=False)]
            if field else
            [page.get_by_role("button", name=label), page.get_by_role("link", name=label),
             page.get_by_text(label, exact=False)]
        )
        for locator in candidates:
            if await locator.count():
                return locator.first
        kind = "field" if field else "button, link or text"
        raise ToolError(f"no {kind} labelled {label!r} on {page.url}; use action read to see the page")

    async def _text(self, page: Any) -> str:
        max_chars = int(self.sdk.settings.get("max_chars") or 20000)
        body = (await page.inner_text("body")).strip()
        cut = f"\n[text cut at {max_chars} characters]" if len(body) > max_chars else ""
        refused = "".join(f"\n[blocked: {reason}]" for reason in self._refused[:3])
        return f"# {await page.title()}\nURL: {page.url}\n\n{body[:max_chars]}{cut}{refused}"

    # ------------------------------------------------------------------ the tool

    async def browser(self, action: str, url: str = "", label: str = "", text: str = "") -> str | ToolResult:
        """用真实浏览器（会执行 JavaScript）打开和操作网页。只能访问公网地址。

        action: open（打开 url）、read（读取页面文字）、click（按可见文字点击按钮/链接）、
        type（在标签或占位文字为 label 的输入框里输入 text）、screenshot（截图，存入媒体库，返回 media_id）、close。

        Args:
            action: open / read / click / type / screenshot / close
            url: 要打开的网址（open 时必填）
            label: 按钮、链接或输入框的可见文字（click / type 时必填）
            text: 要输入的文字（type 时必填）
        """
        if action not in ACTIONS:
            raise ToolError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        async with self._lock:
            if action == "close":
                await self._close()
                return "浏览器已关闭"
            if action != "open" and (self._page is None or self._page.is_closed()):
                raise ToolError("no page is open; call browser with action open and a url first")
            self._refused = []
            page = await self._ensure()
            self._touch()
            try:
                return await self._act(page, action, url, label, text)
            except ToolError:
                raise
            except Exception as exc:
                refused = f" ({self._refused[0]})" if self._refused else ""
                raise ToolError(f"browser {action} failed: {type(exc).__name__}: {str(exc).splitlines()[0]}"
                                f"{refused}") from None

    async def _act(self, page: Any, action: str, url: str, label: str, text: str) -> str | ToolResult:
        if action == "open":
            if not url:
                raise ToolError("action open needs a url")
            await check_url(url, self._policy())
            response = await page.goto(url, wait_until="load", timeout=30_000)
            if response is not None and response.headers.get(REFUSED_HEADER.lower()):
                reason = self._refused[0] if self._refused else await response.text()
                raise ToolError(f"browser open {url} failed: {reason}")
            return await self._text(page)
        if action == "read":
            return await self._text(page)
        if action in ("click", "type") and not label:
            raise ToolError(f"action {action} needs the label of the element")
        if action == "click":
            target = await self._locate(page, label, field=False)
            await target.click(timeout=10_000)
            with contextlib.suppress(Exception):
                await page.wait_for_load_state("load", timeout=10_000)
            return await self._text(page)
        if action == "type":
            target = await self._locate(page, label, field=True)
            await target.fill(text, timeout=10_000)
            return f"已在「{label}」中输入 {len(text)} 个字符"
        png = await page.screenshot(type="png")
        services = self.sdk.services
        store = services.media_store if services is not None else None
        if store is None or not getattr(store, "enabled", False):
            path = self.sdk.data_dir / "screenshot.png"
            await asyncio.to_thread(path.write_bytes, png)
            return f"截图已保存到 {path}（没有媒体库，无法用 describe_image 查看）"
        try:
            record = await store.put(png, "image/png", name="screenshot.png")
        except HomeAgentError as exc:
            raise ToolError(f"the screenshot could not be stored: {exc}") from None
        text = (f"截图已保存：media_id {record.digest[:12]}（{page.url}，{len(png)} 字节）。"
                "能看图的模型会在下面收到这张图；否则调用 describe_image(media_id, question)。")
        shot = MediaAttachment(digest=record.digest, mime="image/png", data=png, name="screenshot.png")
        return ToolResult("", "browser", True, text, attachments=[shot])


def make_plugin() -> BrowserPlugin:
    return BrowserPlugin()
