"""Search backends of ``web_search``: one request builder and one parser per provider.

Each backend follows its provider's documented API:

* ``searxng`` — a self-hosted SearXNG: ``GET <url>/search?q=…&format=json`` (the JSON format
  must be enabled in its ``settings.yml``); hits in ``results[]`` with ``title``, ``url``,
  ``content``.
* ``brave`` — Brave Search API: ``GET https://api.search.brave.com/res/v1/web/search?q=…&count=…``
  with ``X-Subscription-Token``; hits in ``web.results[]`` with ``title``, ``url``, ``description``.
* ``tavily`` — Tavily: ``POST https://api.tavily.com/search`` ``{"query", "max_results"}`` with
  ``Authorization: Bearer``; hits in ``results[]`` with ``title``, ``url``, ``content``.
* ``bocha`` — Bocha (博查, strong on Chinese): ``POST https://api.bochaai.com/v1/web-search``
  ``{"query", "count", "summary": true}`` with ``Authorization: Bearer``; hits in
  ``data.webPages.value[]`` with ``name``, ``url``, ``snippet``/``summary``.

HTTP 429 and 5xx become tool errors that say the backend is rate-limiting or failing, with
``Retry-After`` when given; nothing here retries on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from homeagent_sdk import ToolError

__all__ = ["BACKENDS", "SearchConfig", "SearchHit", "format_results", "search"]

DEFAULT_URLS = {
    "searxng": "",
    "brave": "https://api.search.brave.com",
    "tavily": "https://api.tavily.com",
    "bocha": "https://api.bochaai.com",
}
BACKENDS: tuple[str, ...] = tuple(DEFAULT_URLS)


@dataclass(frozen=True)
class SearchConfig:
    """Which backend, where, with which key."""

    backend: str
    url: str = ""
    api_key: str = ""
    timeout: float = 20.0


@dataclass(frozen=True)
class SearchHit:
    """One result."""

    title: str
    url: str
    snippet: str


def _request(config: SearchConfig, query: str, n: int) -> tuple[str, str, dict[str, Any]]:
    """(method, url, httpx keyword arguments) for one search."""
    base = (config.url or DEFAULT_URLS[config.backend]).rstrip("/")
    bearer = {"Authorization": f"Bearer {config.api_key}"}
    if config.backend == "searxng":
        return "GET", f"{base}/search", {"params": {"q": query, "format": "json"}}
    if config.backend == "brave":
        headers = {"X-Subscription-Token": config.api_key, "Accept": "application/json"}
        return "GET", f"{base}/res/v1/web/search", {"params": {"q": query, "count": n}, "headers": headers}
    if config.backend == "tavily":
        return "POST", f"{base}/search", {"json": {"query": query, "max_results": n}, "headers": bearer}
    return "POST", f"{base}/v1/web-search", {"json": {"query": query, "count": n, "summary": True}, "headers": bearer}


def _items(body: Any, *path: str) -> list[dict[str, Any]]:
    node = body
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return [x for x in node if isinstance(x, dict)] if isinstance(node, list) else []


def _hits(rows: list[dict[str, Any]], title: str, snippet: Callable[[dict[str, Any]], Any]) -> list[SearchHit]:
    return [
        SearchHit(str(r.get(title) or "").strip(), str(r.get("url") or "").strip(), str(snippet(r) or "").strip())
        for r in rows
        if r.get("url")
    ]


def _parse(backend: str, body: Any) -> list[SearchHit]:
    if backend == "searxng":
        return _hits(_items(body, "results"), "title", lambda r: r.get("content"))
    if backend == "brave":
        return _hits(_items(body, "web", "results"), "title", lambda r: r.get("description"))
    if backend == "tavily":
        return _hits(_items(body, "results"), "title", lambda r: r.get("content"))
    if isinstance(body, dict) and body.get("code") not in (None, 200, "200"):
        raise ToolError(f"the bocha search backend refused the query: code {body.get('code')}: {body.get('msg')}")
    return _hits(_items(body, "data", "webPages", "value"), "name", lambda r: r.get("summary") or r.get("snippet"))


async def search(
    config: SearchConfig, query: str, n: int, *, client: httpx.AsyncClient | None = None
) -> list[SearchHit]:
    """Run one search; at most ``n`` hits.

    Raises:
        ToolError: no backend configured, missing URL/key, rate limit, server error, a body
            that is not the provider's JSON.
    """
    if config.backend not in BACKENDS:
        raise ToolError(
            "web search is not set up: set plugin.web.search_backend to one of "
            f"{', '.join(BACKENDS)} (and plugin.web.search_url / plugin.web.search_api_key)"
        )
    if config.backend == "searxng" and not config.url:
        raise ToolError("the searxng backend needs plugin.web.search_url, e.g. http://192.168.1.5:8888")
    if config.backend != "searxng" and not config.api_key:
        raise ToolError(f"the {config.backend} backend needs an API key in plugin.web.search_api_key")
    method, url, kwargs = _request(config, query, n)
    own = client is None
    http = client or httpx.AsyncClient(timeout=config.timeout, trust_env=False)
    try:
        response = await http.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        raise ToolError(
            f"the {config.backend} search backend at {url} is unreachable: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        if own:
            await http.aclose()
    status = response.status_code
    if status == 429:
        retry = response.headers.get("retry-after")
        raise ToolError(
            f"the {config.backend} search backend is rate-limiting (HTTP 429)"
            + (f"; retry after {retry} s" if retry else "; try again later")
        )
    if status in (401, 403):
        raise ToolError(
            f"the {config.backend} search backend rejected the API key (HTTP {status}); "
            "check plugin.web.search_api_key"
        )
    if status >= 400:
        raise ToolError(f"the {config.backend} search backend failed with HTTP {status}; try again later")
    try:
        body = response.json()
    except ValueError:
        hint = (
            "enable the json format in SearXNG's settings.yml" if config.backend == "searxng"
            else "check plugin.web.search_url"
        )
        raise ToolError(
            f"the {config.backend} search backend answered something that is not JSON "
            f"({response.headers.get('content-type', 'no content type')}); {hint}"
        ) from None
    return _parse(config.backend, body)[:n]


def format_results(query: str, hits: list[SearchHit], backend: str) -> str:
    """The text the model sees."""
    if not hits:
        return f"没有找到「{query}」的结果（{backend}）。"
    lines = [f"「{query}」的搜索结果（{backend}）："]
    for i, hit in enumerate(hits, 1):
        lines.append(f"{i}. {hit.title or hit.url}\n   {hit.url}\n   {hit.snippet}".rstrip())
    lines.append("摘要可能不完整或过时：引用或回答前，先用 web_fetch 读取相关链接的原文。")
    return "\n".join(lines)
