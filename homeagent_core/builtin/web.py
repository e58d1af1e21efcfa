"""Built-in ``web``: read the web (``web_fetch``) and search it (``web_search``).

``web_fetch(url)`` fetches one page through the SSRF guard
(:mod:`homeagent_sdk.ssrf`: public addresses only, checked after DNS resolution
and on every redirect hop, unless ``plugin.web.allow_private`` names them) and returns readable
text (:mod:`homeagent_core.builtin.web_fetch`). ``web_search(query, n)`` asks the backend named
in ``plugin.web.search_backend`` (:mod:`homeagent_core.builtin.web_search`) and lists title,
URL and snippet of each hit, reminding the model to fetch a page before quoting it.

The search backend's URL is the owner's own setting (a SearXNG on the home network is normal),
so it is not subject to the guard; every URL the model chooses is.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from homeagent_core.builtin.web_fetch import Fetcher, extract
from homeagent_core.builtin.web_search import BACKENDS, SearchConfig, format_results, search
from homeagent_sdk import ConfigDef, SettingsRegistry, ToolError, ToolRegistryProtocol, hookimpl
from homeagent_sdk.ssrf import AddressPolicy

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "web"

__all__ = ["WebPlugin", "make_plugin"]


class WebPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self._fetcher: Fetcher | None = None
        self._fetcher_key: tuple[Any, ...] = ()
        self._closing: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(
            key="allow_private", type="string", default="",
            description="Comma-separated hosts, addresses or networks the web tools may reach although "
                        "they are loopback/private/link-local. A bare entry allows ports 80 and 443 only, "
                        "host:port that port, host:* every port (e.g. nas.local, 127.0.0.1:8080, "
                        "[::1]:8080, 192.168.1.0/24:*). Empty = public addresses only.",
        ))
        registry.add(ConfigDef(
            key="max_bytes", type="int", default=5 * 1024 * 1024, min=1024, max=200 * 1024 * 1024,
            description="Most bytes of one page read; the rest is cut with a note.",
        ))
        registry.add(ConfigDef(
            key="timeout", type="duration", default="20s", min=0.1, max=600,
            description="Longest a whole fetch (all redirects and the body) may take.",
        ))
        registry.add(ConfigDef(
            key="max_redirects", type="int", default=5, min=0, max=20, description="Redirects followed per fetch.",
        ))
        registry.add(ConfigDef(
            key="cache_ttl", type="duration", default="5m", min=0, max=86400,
            description="How long a fetched page is reused for the same URL.",
        ))
        registry.add(ConfigDef(
            key="max_chars", type="int", default=20000, min=200, max=1_000_000,
            description="Most characters of extracted text returned to the model.",
        ))
        registry.add(ConfigDef(
            key="search_backend", type="select", default="none", options=["none", *BACKENDS],
            description="Search engine of web_search: searxng (self-hosted, JSON API), brave, tavily or bocha.",
        ))
        registry.add(ConfigDef(
            key="search_url", type="string", default="",
            description="Base URL of the search backend (required for searxng; empty = the vendor's API).",
        ))
        registry.add(ConfigDef(
            key="search_api_key", type="password", default="", secret=True,
            description="API key of the search backend (brave, tavily, bocha).",
        ))

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.web_fetch, parallel_safe=True, timeout=660)
        registry.add(self.web_search, parallel_safe=True, timeout=120)

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk

    @hookimpl
    async def shutdown(self) -> None:
        if self._fetcher is not None:
            await self._fetcher.aclose()
            self._fetcher = None

    # ------------------------------------------------------------------ helpers

    @property
    def sdk(self) -> ScopedSDK:
        if self._sdk is None:
            raise ToolError("web has not started yet")
        return self._sdk

    def fetcher(self) -> Fetcher:
        """The fetcher for the current settings (rebuilt when they change)."""
        get = self.sdk.settings.get
        key = (get("allow_private"), get("max_bytes"), get("timeout"), get("max_redirects"), get("cache_ttl"))
        if self._fetcher is None or key != self._fetcher_key:
            old = self._fetcher
            self._fetcher = Fetcher(
                AddressPolicy.parse(str(key[0] or "")),
                max_bytes=int(key[1]), timeout=float(key[2]), max_redirects=int(key[3]), cache_ttl=float(key[4]),
            )
            self._fetcher_key = key
            if old is not None:  # settings changed: close the old client without waiting
                task = asyncio.get_running_loop().create_task(old.aclose())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        return self._fetcher

    # ------------------------------------------------------------------ tools

    async def web_fetch(self, url: str) -> str:
        """读取一个网页（或 PDF / JSON / 纯文本），返回可读的 Markdown 正文、标题与链接。

        只能访问公网地址；引用网页内容前先用它读原文。

        Args:
            url: 完整的 http:// 或 https:// 地址
        """
        result = await self.fetcher().fetch(url)
        return await asyncio.to_thread(extract, result, int(self.sdk.settings.get("max_chars")))

    async def web_search(self, query: str, n: int = 5) -> str:
        """在网上搜索，返回若干结果的标题、链接和摘要。摘要可能过时或不完整：引用前先用 web_fetch 读原文。

        Args:
            query: 搜索词
            n: 结果条数（1-20）
        """
        get = self.sdk.settings.get
        config = SearchConfig(
            backend=str(get("search_backend")), url=str(get("search_url") or ""),
            api_key=str(get("search_api_key") or ""), timeout=float(get("timeout")),
        )
        if not query.strip():
            raise ToolError("web_search needs a non-empty query")
        results = await search(config, query.strip(), max(1, min(int(n), 20)))
        return format_results(query, results, config.backend)


def make_plugin() -> WebPlugin:
    return WebPlugin()
