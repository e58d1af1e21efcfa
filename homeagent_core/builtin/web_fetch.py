"""Fetch one URL through the SSRF guard and turn the body into readable text.

:class:`Fetcher` follows redirects itself (each hop checked by the guard, loops and too many
hops refused), reads at most ``max_bytes`` of the body (the rest is cut with a note, so a page
that never ends still returns), gives up after ``timeout`` seconds in all, and caches results
by URL for ``cache_ttl`` seconds.

:func:`extract` turns the body into text: HTML through trafilatura (readable Markdown with
title and links; lazy import, run off the event loop), PDF through pypdf, JSON pretty-printed,
plain text as is. Bodies are decoded by the declared charset, then UTF-8, then a detected
charset, so a GBK or Latin-1 page without a header still reads right.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import httpx

from homeagent_sdk import ToolError
from homeagent_sdk.ssrf import AddressPolicy, GuardedTransport, check_url

__all__ = ["FetchResult", "Fetcher", "decode_body", "extract"]

USER_AGENT = "HomeAgent/1 (+https://github.com/homeagent; personal assistant fetch)"
_REDIRECTS = (301, 302, 303, 307, 308)
_CACHE_SIZE = 64


@dataclass
class FetchResult:
    """What came back: final URL, status, content type, body (maybe cut) and the hops taken."""

    url: str
    status: int
    content_type: str
    body: bytes
    truncated: bool
    charset: str | None
    hops: list[str]


class Fetcher:
    """HTTP GET with the guard, caps and a short cache; one per plugin instance."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        max_bytes: int = 5 * 1024 * 1024,
        timeout: float = 20.0,
        max_redirects: int = 5,
        cache_ttl: float = 300.0,
    ) -> None:
        self.policy = policy
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.cache_ttl = cache_ttl
        self._cache: OrderedDict[str, tuple[float, FetchResult]] = OrderedDict()
        self._client = httpx.AsyncClient(
            transport=GuardedTransport(policy),
            follow_redirects=False,
            timeout=httpx.Timeout(timeout),
            headers={"User-Agent": USER_AGENT, "Accept": "text/html,application/xhtml+xml,application/pdf,"
                     "application/json,text/plain;q=0.9,*/*;q=0.5"},
            trust_env=False,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(self, url: str) -> FetchResult:
        """Fetch ``url`` (cached for ``cache_ttl``).

        Raises:
            ToolError: refused address, redirect loop, too many redirects, timeout, HTTP or
                network error — each message says which and for what URL.
        """
        now = time.monotonic()
        hit = self._cache.get(url)
        if hit is not None and now - hit[0] < self.cache_ttl:
            self._cache.move_to_end(url)
            return hit[1]
        try:
            async with asyncio.timeout(self.timeout):
                result = await self._follow(url)
        except TimeoutError:
            raise ToolError(
                f"fetching {url} took longer than {self.timeout:g} s and was abandoned "
                "(plugin.web.timeout sets the limit)"
            ) from None
        self._cache[url] = (time.monotonic(), result)
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return result

    async def _follow(self, url: str) -> FetchResult:
        hops: list[str] = []
        current = url.strip()
        while True:
            parsed = await check_url(current, self.policy)
            key = str(parsed)
            if key in hops:
                raise ToolError(f"redirect loop: {' -> '.join([*hops, key])}")
            hops.append(key)
            try:
                async with self._client.stream("GET", parsed) as response:
                    if response.status_code in _REDIRECTS and "location" in response.headers:
                        if len(hops) > self.max_redirects:
                            raise ToolError(
                                f"more than {self.max_redirects} redirects starting at {url} "
                                "(plugin.web.max_redirects sets the limit)"
                            )
                        current = str(parsed.join(response.headers["location"]))
                        continue
                    if response.status_code >= 400:
                        raise ToolError(f"{key} answered HTTP {response.status_code} {response.reason_phrase}")
                    body, truncated = await self._read(response)
                    return FetchResult(
                        url=key,
                        status=response.status_code,
                        content_type=response.headers.get("content-type", "").split(";")[0].strip().lower(),
                        body=body,
                        truncated=truncated,
                        charset=response.charset_encoding,
                        hops=hops,
                    )
            except httpx.HTTPError as exc:
                raise ToolError(f"fetching {key} failed: {type(exc).__name__}: {exc}") from None

    async def _read(self, response: httpx.Response) -> tuple[bytes, bool]:
        """At most ``max_bytes`` of the (decompressed) body; True when the rest was dropped."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            room = self.max_bytes - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), False


def decode_body(body: bytes, charset: str | None) -> str:
    """Text of ``body``: declared charset, else UTF-8, else the detected charset."""
    if charset:
        try:
            return body.decode(charset)
        except (LookupError, UnicodeDecodeError):
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(body).best()
        if best is not None:
            return str(best)
    except ImportError:
        pass
    return body.decode("utf-8", errors="replace")


def _kind(content_type: str, body: bytes) -> str:
    head = body[:512].lstrip().lower()
    if content_type == "application/pdf" or body.startswith(b"%PDF-"):
        return "pdf"
    if content_type in ("text/html", "application/xhtml+xml") or head.startswith((b"<!doctype html", b"<html")):
        return "html"
    if content_type == "application/json" or content_type.endswith("+json"):
        return "json"
    if content_type.startswith("text/") or not content_type:
        return "text"
    return "binary"


def extract(result: FetchResult, max_chars: int) -> str:
    """Readable text of a fetched body, headed by its URL (and title); CPU-bound, run in a thread.

    Raises:
        ToolError: a binary type nothing here can read, or a PDF that does not parse.
    """
    kind = _kind(result.content_type, result.body)
    title = ""
    if kind == "html":
        title, text = _html(result.body, result.url, result.charset)
    elif kind == "pdf":
        if result.truncated:
            raise ToolError(f"the PDF at {result.url} is larger than plugin.web.max_bytes and was cut; raise the limit")
        title, text = _pdf(result.body)
    elif kind == "json":
        raw = decode_body(result.body, result.charset)
        try:
            text = json.dumps(json.loads(raw), ensure_ascii=False, indent=2)
        except ValueError:
            text = raw
    elif kind == "text":
        text = decode_body(result.body, result.charset)
    else:
        raise ToolError(
            f"{result.url} is {result.content_type or 'binary data'}, which web_fetch cannot read "
            "(it reads HTML, PDF, JSON and plain text)"
        )
    notes: list[str] = []
    if result.truncated:
        notes.append(f"[the page was cut at {len(result.body)} bytes; plugin.web.max_bytes sets the limit]")
    if len(text) > max_chars:
        text = text[:max_chars]
        notes.append(f"[text cut at {max_chars} characters]")
    head = [f"URL: {result.url}"]
    if title:
        head.insert(0, f"# {title}")
    return "\n".join([*head, "", text.strip(), *notes]).strip()


def _html(body: bytes, url: str, charset: str | None) -> tuple[str, str]:
    try:
        import trafilatura
    except ImportError:
        raise ToolError("reading web pages needs trafilatura: pip install 'homeagent[web]'") from None

    html = decode_body(body, charset)
    meta: Any = trafilatura.extract_metadata(html)
    title = str(getattr(meta, "title", "") or "") if meta is not None else ""
    text = trafilatura.extract(
        html, url=url, output_format="markdown", include_links=True, include_tables=True,
        include_comments=False, favor_recall=True,
    )
    if not text:
        text = trafilatura.html2txt(html) or ""
    return title, text


def _pdf(body: bytes) -> tuple[str, str]:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:
        raise ToolError("reading PDFs needs pypdf: pip install 'homeagent[web]'") from None
    try:
        reader = PdfReader(io.BytesIO(body))
        pages = [page.extract_text() or "" for page in reader.pages]
        title = str(reader.metadata.title or "") if reader.metadata is not None else ""
    except (PdfReadError, ValueError, KeyError) as exc:
        raise ToolError(f"the PDF could not be read: {exc}") from None
    text = "\n\n".join(f"## Page {i}\n{p.strip()}" for i, p in enumerate(pages, 1) if p.strip())
    return title, text
