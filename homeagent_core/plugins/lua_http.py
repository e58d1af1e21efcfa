"""``sdk.http.get/post`` of Lua plugins: real, synchronous HTTP with a timeout and a size cap.

It is the only outbound IO a Lua script has, and only when ``plugin.json`` lists the ``http``
capability (checked by the caller). Only ``http://`` and ``https://`` URLs are accepted; at most
five redirects are followed; a body over the cap is an error, never silently cut.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["DEFAULT_HTTP_MAX_BYTES", "DEFAULT_HTTP_TIMEOUT", "http_request"]

DEFAULT_HTTP_TIMEOUT = 15.0
"""Seconds one ``sdk.http`` request may take (connect + read)."""
DEFAULT_HTTP_MAX_BYTES = 4 * 1024 * 1024
"""Largest response body ``sdk.http`` returns; a bigger one is an error."""


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def http_request(method: str, args: list[Any], *, timeout: float, max_bytes: int) -> dict[str, Any]:
    """Run ``http.get(url, headers?)`` or ``http.post(url, body, content_type?, headers?)``.

    Returns ``{status, body, headers}``; the body is decoded as UTF-8 (invalid bytes replaced).

    Raises:
        ValueError: not an http(s) URL, an unknown method, or the body exceeds ``max_bytes``.
        ConnectionError: the request failed (refused, timed out, too many redirects...).
    """
    import httpx

    if method not in ("get", "post"):
        raise ValueError(f"http.{method}: unknown function; use http.get or http.post")
    a = [*args, None, None, None, None]
    url = str(a[0] or "")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"http.{method}: only http:// and https:// URLs are allowed, got {url[:80]!r}")
    headers = a[1] if method == "get" and isinstance(a[1], dict) else {}
    body: bytes | None = None
    if method == "post":
        raw = a[1]
        body = orjson.dumps(raw) if isinstance(raw, dict | list) else _text(raw).encode("utf-8")
        headers = a[3] if isinstance(a[3], dict) else {}
        headers = {**headers, "content-type": str(a[2] or "application/json")}
    verb = "GET" if method == "get" else "POST"
    sent = {str(k): str(v) for k, v in headers.items()}
    try:
        with httpx.Client(timeout=timeout, follow_redirects=True, max_redirects=5) as client, \
                client.stream(verb, url, headers=sent, content=body) as resp:
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise ValueError(f"http.{method}: response from {url} exceeds {max_bytes} bytes")
                chunks.append(chunk)
            return {"status": resp.status_code, "body": b"".join(chunks).decode("utf-8", "replace"),
                    "headers": dict(resp.headers.items())}
    except httpx.HTTPError as exc:
        raise ConnectionError(f"http.{method}: request to {url[:200]} failed: {exc}") from None
