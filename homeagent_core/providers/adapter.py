"""LuaAdaptedProvider: unified request -> Lua adapter -> httpx -> unified response or stream.

An :class:`AdapterScript` is one compiled ``*.lua`` adapter in its own sandbox; it knows the
contract of REFERENCE §4.1 and turns every script failure into a :class:`ProviderError` naming
the adapter. :class:`LuaAdaptedProvider` is one configured source (base URL, key, model) that
speaks HTTP through that script, with the kernel's fallbacks of §4.3/§4.4.

Contract extensions (all optional, documented in docs/ADAPTERS.md): ``endpoint`` may contain
``{model}``; ``stream_endpoint`` is used for streaming requests; ``stream_format = "ndjson"``
feeds every body line (not only ``data:`` lines) to ``transform_stream_chunk``.

Adapters written for the original runtime rely on it for three things this module does too:
an endpoint naming Gemini's models collection (``/v1/models``) is completed with
``/{model}:generateContent`` (``:streamGenerateContent?alt=sse`` when streaming); a stream
answered as NDJSON (by content type) is read line by line without ``stream_format``; and the
key header follows the vendor when the adapter sets none (see :func:`key_header`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from homeagent_core.providers.errors import ProviderError
from homeagent_core.providers.wire import (
    STANDARD_FINISH_REASONS,
    normalize_chunk,
    normalize_response,
    parse_openai_chunk,
    parse_openai_response,
    parse_sse_body,
    prepare_request,
)

if TYPE_CHECKING:
    import httpx

    from homeagent_core.providers.lua import LuaSandbox

__all__ = ["AdapterScript", "LuaAdaptedProvider", "complete_models_endpoint", "key_header", "load_adapter",
           "names_models_collection"]

_log = logging.getLogger("homeagent.providers")
_AUTH_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key")
_NDJSON_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl",
                           "application/x-jsonlines", "application/jsonlines"})
NON_STREAM_TIMEOUT_S = 180.0
STREAM_CONNECT_TIMEOUT_S = 30.0


class AdapterScript:
    """One adapter script compiled in its own sandbox (REFERENCE §4.1)."""

    def __init__(self, source: str, *, origin: str = "<string>", **sandbox_opts: Any) -> None:
        from homeagent_core.providers.lua import LuaSandbox, LuaScriptError

        self.origin = origin
        label = Path(origin).stem if origin != "<string>" else "adapter"
        self.name = label
        self.sandbox: LuaSandbox = LuaSandbox(label, **sandbox_opts)
        try:
            table = self.sandbox.load(source, label)
        except LuaScriptError as exc:
            raise ProviderError(f"cannot load {origin}: {exc.kind} error: {exc.reason}",
                                adapter=label, kind="adapter") from exc
        sb = self.sandbox
        if sb.kind(table) != "table":
            raise ProviderError(f"{origin} must return a table, got {sb.kind(table)}",
                                adapter=label)
        name = sb.field(table, "name")
        if isinstance(name, str) and name.strip():
            self.name = name.strip()
        version = sb.field(table, "version")
        self.version = str(version) if isinstance(version, str | int | float) else ""
        endpoint = sb.field(table, "endpoint")
        self.endpoint = endpoint if isinstance(endpoint, str) and endpoint else "/chat/completions"
        stream_ep = sb.field(table, "stream_endpoint")
        self.stream_endpoint = stream_ep if isinstance(stream_ep, str) and stream_ep else ""
        fmt = sb.field(table, "stream_format")
        self.stream_format = fmt if fmt in ("sse", "ndjson") else "sse"
        self.headers = sb.string_table(sb.field(table, "headers"))
        funcs = {}
        for fname in ("transform_request", "transform_response", "transform_stream_chunk",
                      "build_headers", "transform_error"):
            f = sb.field(table, fname)
            if f is not None and sb.kind(f) != "function":
                raise ProviderError(f"{fname} must be a function, got {sb.kind(f)}",
                                    adapter=self.name)
            funcs[fname] = f
        if funcs["transform_request"] is None:
            raise ProviderError(f"{origin} has no transform_request function (required)",
                                adapter=self.name)
        self._req = funcs["transform_request"]
        self._resp = funcs["transform_response"]
        self._chunk = funcs["transform_stream_chunk"]
        self._build_headers = funcs["build_headers"]
        self._error = funcs["transform_error"]
        self.has_build_headers = self._build_headers is not None

    def _call(self, func: Any, fname: str, *args: Any) -> Any:
        from homeagent_core.providers.lua import LuaScriptError

        try:
            return self.sandbox.call(func, *args, script=self.name)
        except LuaScriptError as exc:
            raise ProviderError(f"{fname} failed: {exc.kind} error: {exc.reason}",
                                adapter=self.name) from exc

    def transform_request(self, raw: str) -> str:
        """Unified request JSON -> vendor body (must be a JSON string)."""
        out = self._call(self._req, "transform_request", raw)
        if not isinstance(out, str) or not out:
            raise ProviderError(f"transform_request returned {type(out).__name__}, "
                                "expected a JSON string", adapter=self.name)
        return out

    def transform_response(self, raw: str) -> str | None:
        """Vendor body -> unified response JSON; None when the script has no such function."""
        if self._resp is None:
            return None
        out = self._call(self._resp, "transform_response", raw)
        if not isinstance(out, str):
            raise ProviderError(f"transform_response returned {type(out).__name__}, "
                                "expected a JSON string", adapter=self.name)
        return out

    def new_stream_state(self) -> Any:
        """A fresh Lua table handed to every ``transform_stream_chunk`` call of one stream."""
        return self.sandbox.make_table({})

    def transform_stream_chunk(self, line: str, state: Any = None) -> str | None:
        """One stream payload -> unified chunk JSON, ``""`` to skip, None for the std parser."""
        if self._chunk is None:
            return None
        out = self._call(self._chunk, "transform_stream_chunk", line, state)
        if out is None:
            return ""
        if not isinstance(out, str):
            raise ProviderError(f"transform_stream_chunk returned {type(out).__name__}, "
                                "expected a JSON string", adapter=self.name)
        return None if out == line else out

    def build_headers(self, meta: dict[str, Any]) -> dict[str, str] | None:
        """Dynamic headers, or None (no hook, or the hook failed: static headers are used)."""
        if self._build_headers is None:
            return None
        try:
            table = self._call(self._build_headers, "build_headers",
                               self.sandbox.make_table(meta))
        except ProviderError as exc:
            _log.warning("%s; falling back to static headers", exc)
            return None
        return self.sandbox.string_table(table)

    def transform_error(self, status: int, body: str) -> str | None:
        """Human reason for a non-200 answer, or None."""
        if self._error is None:
            return None
        try:
            out = self._call(self._error, "transform_error", status, body)
        except ProviderError as exc:
            _log.warning("%s", exc)
            return None
        return out if isinstance(out, str) and out else None

    def describe(self) -> dict[str, Any]:
        """Plain facts for listings."""
        return {"name": self.name, "version": self.version, "endpoint": self.endpoint,
                "path": self.origin}


def load_adapter(path: Path | str, **sandbox_opts: Any) -> AdapterScript:
    """Compile an adapter file.

    Raises:
        ProviderError: unreadable file, Lua error or contract violation (names the file).
    """
    p = Path(path)
    try:
        src = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProviderError(f"cannot read {p}: {exc}", adapter=p.stem) from exc
    return AdapterScript(src, origin=str(p), **sandbox_opts)


def names_models_collection(endpoint: str) -> bool:
    """True when an endpoint's path ends at a models collection (Gemini's ``/v1/models``).

    Nothing is ever POSTed to a models collection itself, so such an endpoint can only mean
    "the model's own method under it", which the original runtime's Gemini adapter relies on.
    """
    path = endpoint.partition("?")[0].rstrip("/")
    return path.endswith("/models") or path == "models"


def complete_models_endpoint(endpoint: str, model: str, stream: bool) -> str:
    """``/v1/models`` -> ``/v1/models/{model}:generateContent`` (or the SSE stream variant)."""
    path, _, query = endpoint.partition("?")
    name = model.removeprefix("models/")
    path = f"{path.rstrip('/')}/{quote(name, safe='')}:" + \
        ("streamGenerateContent" if stream else "generateContent")
    params = [q for q in query.split("&") if q]
    if stream and not any(q.startswith("alt=") for q in params):
        params.append("alt=sse")
    return path + ("?" + "&".join(params) if params else "")


def key_header(headers: dict[str, str], endpoint: str, api_key: str) -> tuple[str, str]:
    """The header carrying the source's key when the adapter set none of its own.

    ``Authorization: Bearer <key>`` as the original runtime always sent, except for the two
    vendors whose APIs refuse an API key there: Anthropic (recognised by its required
    ``anthropic-version`` header) takes ``x-api-key``, and Gemini (an endpoint under a models
    collection or naming ``:generateContent``) takes ``x-goog-api-key``.
    """
    lowered = {k.lower() for k in headers}
    if "anthropic-version" in lowered:
        return "x-api-key", api_key
    path = endpoint.partition("?")[0].lower()
    if names_models_collection(path) or "generatecontent" in path:
        return "x-goog-api-key", api_key
    return "Authorization", f"Bearer {api_key}"


def _error_reason(body: str) -> str:
    try:
        b = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:300].strip() or "(empty body)"
    if isinstance(b, dict):
        e = b.get("error", b.get("message"))
        if isinstance(e, dict):
            return str(e.get("message") or e.get("type") or e)
        if e:
            return str(e)
    return body[:300]


class LuaAdaptedProvider:
    """One LLM source reached through a Lua adapter; implements the ChatProvider protocol."""

    def __init__(
        self,
        name: str,
        adapter: AdapterScript,
        *,
        base_url: str,
        api_key: str = "",
        model: str = "",
        client: httpx.AsyncClient | None = None,
        max_concurrent: int = 8,
        timeout_s: float = NON_STREAM_TIMEOUT_S,
        connect_timeout_s: float = STREAM_CONNECT_TIMEOUT_S,
        thinking_enabled: bool | None = None,
    ) -> None:
        self.name = name
        self.thinking_enabled = thinking_enabled
        self.adapter = adapter
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self._client = client
        self._own_client = client is None
        self._sem = asyncio.Semaphore(max(1, max_concurrent))
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s

    def __repr__(self) -> str:  # never shows the key
        return f"LuaAdaptedProvider({self.name!r}, adapter={self.adapter.name!r})"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(http2=False, follow_redirects=False)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    def _fail(self, reason: str, kind: str = "adapter", status: int | None = None) -> ProviderError:
        return ProviderError(reason, source=self.name, adapter=self.adapter.name, kind=kind,
                             status=status)

    def _url(self, model: str, stream: bool) -> str:
        ep = (self.adapter.stream_endpoint if stream and self.adapter.stream_endpoint
              else self.adapter.endpoint)
        if "{model}" in ep:
            ep = ep.replace("{model}", quote(model, safe=""))
        elif names_models_collection(ep):
            ep = complete_models_endpoint(ep, model, stream)
        return self.base_url + ep

    def build(self, request: dict[str, Any], stream: bool) -> tuple[str, dict[str, str], str]:
        """Unified request -> (url, headers, body); runs the adapter's request side."""
        req = prepare_request(request, self.model)
        if "disable_thinking" not in request and self.thinking_enabled is not None:
            req["disable_thinking"] = not self.thinking_enabled
        req["stream"] = stream
        raw = orjson.dumps(req).decode()
        try:
            body = self.adapter.transform_request(raw)
        except ProviderError as exc:
            raise self._fail(exc.reason) from exc
        model = str(req.get("model") or "")
        url = self._url(model, stream)
        headers = dict(self.adapter.headers)
        if self.adapter.has_build_headers:
            dyn = self.adapter.build_headers({
                "url": url, "method": "POST", "body": body, "api_key": self._api_key,
                "timestamp": int(time.time()), "source": {"name": self.name},
                "model": model, "stream": stream})
            if dyn is not None:
                headers.update(dyn)
        headers["Content-Type"] = "application/json"
        if self._api_key and not any(h.lower() in _AUTH_HEADERS for h in headers):
            name, value = key_header(headers, self.adapter.endpoint, self._api_key)
            headers[name] = value
        return url, headers, body

    def _status_error(self, status: int, body: str) -> ProviderError:
        reason = self.adapter.transform_error(status, body) or \
            f"HTTP {status}: {_error_reason(body)}"
        kind = "auth" if status in (401, 403) else "http"
        return self._fail(reason, kind=kind, status=status)

    def parse_response(self, text: str) -> dict[str, Any]:
        """Vendor body -> unified response, with the standard-parser and SSE-body fallbacks."""
        problem = ""
        try:
            out = self.adapter.transform_response(text)
        except ProviderError as exc:
            out, problem = None, exc.reason
        if out is not None and not problem:
            try:
                return normalize_response(orjson.loads(out))
            except (orjson.JSONDecodeError, ValueError) as exc:
                problem = f"transform_response returned invalid JSON/shape: {exc}"
        try:
            return parse_openai_response(orjson.loads(text))
        except (orjson.JSONDecodeError, ValueError) as exc:
            std_problem = str(exc)
        if "data:" in text:
            try:
                return parse_sse_body(text)
            except ValueError:
                pass
        if not problem:
            problem = f"vendor response not understood ({std_problem})"
        raise self._fail(f"{problem}; body starts {text[:120]!r}")

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        """Non-streaming call (180 s total).

        Raises:
            ProviderError: HTTP, network, timeout or adapter failure.
        """
        import httpx

        url, headers, body = self.build(request, stream=False)
        async with self._sem:
            try:
                async with asyncio.timeout(self.timeout_s):
                    resp = await self._http().post(url, content=body, headers=headers,
                                                   timeout=httpx.Timeout(self.timeout_s))
            except TimeoutError as exc:
                raise self._fail(f"no answer within {self.timeout_s:g} s", "timeout") from exc
            except httpx.TimeoutException as exc:
                raise self._fail(f"timed out: {type(exc).__name__}", "timeout") from exc
            except httpx.HTTPError as exc:
                raise self._fail(f"request to {url} failed: {type(exc).__name__}: {exc}",
                                 "network") from exc
        text = resp.text
        if resp.status_code != 200:
            raise self._status_error(resp.status_code, text)
        return self.parse_response(text)

    def parse_stream_payload(
        self, payload: str, lineno: int, state: Any = None
    ) -> dict[str, Any] | None:
        """One stream payload -> unified chunk or None (skip); adapter first, then std parser."""
        try:
            out = self.adapter.transform_stream_chunk(payload, state)
        except ProviderError as exc:
            try:
                body = orjson.loads(payload)
            except orjson.JSONDecodeError:
                raise self._fail(f"stream line {lineno} rejected ({exc.reason}) and is not "
                                 f"JSON: {payload[:120]!r}", "stream") from exc
            chunk = parse_openai_chunk(body)
            if chunk is None:  # neither the script nor the standard parser understood it
                raise self._fail(f"stream line {lineno} rejected: {exc.reason}",
                                 "stream") from exc
            return chunk
        if out == "":
            return None
        if out is None:
            try:
                return parse_openai_chunk(orjson.loads(payload))
            except orjson.JSONDecodeError as exc:
                raise self._fail(f"stream line {lineno} is not JSON: {payload[:120]!r}",
                                 "stream") from exc
        try:
            chunk = orjson.loads(out)
            if isinstance(chunk, dict) and chunk.get("error"):
                raise self._fail(f"upstream error in stream line {lineno}: {chunk['error']}",
                                 "stream")
            return normalize_chunk(chunk)
        except (orjson.JSONDecodeError, ValueError) as exc:
            raise self._fail(f"transform_stream_chunk returned invalid JSON on line {lineno}: "
                             f"{out[:120]!r}", "stream") from exc

    async def chat_stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Streaming call: yields unified chunks; exactly one final chunk has ``done=True``.

        Closing the iterator (``aclose()``) or cancelling the task closes the HTTP request.

        Raises:
            ProviderError: HTTP, network or adapter failure, a garbage line, or a stream whose
                first chunk is an error finish reason.
        """
        import httpx

        url, headers, body = self.build(request, stream=True)
        timeout = httpx.Timeout(connect=self.connect_timeout_s, read=None, write=30.0,
                                pool=self.connect_timeout_s)
        async with self._sem:
            try:
                async with self._http().stream("POST", url, content=body, headers=headers,
                                               timeout=timeout) as resp:
                    if resp.status_code != 200:
                        text = (await resp.aread()).decode("utf-8", "replace")
                        raise self._status_error(resp.status_code, text)
                    ctype = resp.headers.get("content-type", "").partition(";")[0].strip().lower()
                    ndjson = self.adapter.stream_format == "ndjson" or ctype in _NDJSON_TYPES
                    held: dict[str, Any] | None = None
                    state = self.adapter.new_stream_state()
                    first = True
                    lineno = 0
                    async for line in resp.aiter_lines():
                        lineno += 1
                        if ndjson:
                            payload = line.strip()
                            if payload.startswith("data:"):
                                payload = payload[5:].strip()
                        elif line.startswith("data:"):
                            payload = line[5:].strip()
                        else:
                            continue
                        if not payload:
                            continue
                        if payload == "[DONE]":
                            break
                        chunk = self.parse_stream_payload(payload, lineno, state)
                        if chunk is None:
                            continue
                        if first:
                            first = False
                            self._check_first(chunk)
                        if held is not None:  # frames after the done chunk: keep their usage
                            if "usage" in chunk:
                                held["usage"] = chunk["usage"]
                            continue
                        if chunk.get("done"):
                            held = chunk
                            if chunk.get("content") or chunk.get("tool_calls") or \
                                    chunk.get("reasoning_content"):
                                part = dict(chunk, done=False)
                                part.pop("finish_reason", None)
                                part.pop("usage", None)
                                held = {"content": "", "done": True,
                                        "finish_reason": chunk.get("finish_reason", "stop")}
                                if "usage" in chunk:
                                    held["usage"] = chunk["usage"]
                                yield part
                            continue
                        yield chunk
                    if first:
                        raise self._fail("stream ended without any data", "stream")
                    yield held or {"content": "", "done": True, "finish_reason": "stop"}
            except httpx.TimeoutException as exc:
                raise self._fail(f"stream timed out: {type(exc).__name__}", "timeout") from exc
            except httpx.HTTPError as exc:
                raise self._fail(f"stream from {url} broke: {type(exc).__name__}: {exc}",
                                 "network") from exc

    def _check_first(self, chunk: dict[str, Any]) -> None:
        if chunk.get("done") and chunk.get("finish_reason", "") not in STANDARD_FINISH_REASONS \
                and not (chunk.get("content") or chunk.get("tool_calls")
                         or chunk.get("reasoning_content")):
            raise self._fail(f"stream opened with error finish_reason "
                             f"{chunk['finish_reason']!r} and no content", "stream")
