"""LLM sources from the settings page: list, add or edit, test, remove (``core.llm.sources.<name>.*``).

API keys never leave the daemon: a listing says only whether a source has one, and an edit
that leaves ``api_key`` empty keeps the stored key. Changes take effect at the next model call
(the provider manager re-reads ``core.llm.*`` when it changes).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui.common import ApiError, UIState, json_body, ok, require_api
from homeagent_sdk.errors import HomeAgentError

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import Services

__all__ = ["routes"]

PREFIX = "core.llm.sources."
FIELDS = ("base_url", "model", "adapter", "api_key")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TEST_PROMPT = "Reply with the single word: ok"


def _ui(request: Request) -> UIState:
    return request.app.state.ui  # type: ignore[no-any-return]


def _name(request: Request) -> str:
    name = str(request.path_params["name"])
    if not _NAME.match(name):
        raise ApiError(400, f"source name {name!r} must be 1-64 letters, digits, '-' or '_'")
    return name


def source_rows(services: Services) -> list[dict[str, Any]]:
    """Every configured source: its settings (the key masked) and what the model layer reports."""
    config = services.config
    values = config.items(PREFIX)
    names = sorted({key[len(PREFIX):].split(".", 1)[0] for key in values})
    live: dict[str, dict[str, Any]] = {}
    provider = services.kernel.provider if services.kernel is not None else None
    if provider is not None and hasattr(provider, "list_sources"):
        live = {row["name"]: row for row in provider.list_sources()}
    default = str(config.get("core.llm.provider") or "")
    rows = []
    for name in names:
        row: dict[str, Any] = {"name": name, "default": name == default}
        for field in FIELDS[:3]:
            row[field] = str(values.get(f"{PREFIX}{name}.{field}") or "")
        row["has_api_key"] = bool(values.get(f"{PREFIX}{name}.api_key"))
        state = live.get(name)
        if state is not None:
            row.update({"available": state.get("available"), "last_error": state.get("last_error"),
                        "disabled": state.get("disabled")})
        rows.append(row)
    return rows


@require_api
async def list_sources(request: Request) -> Response:
    ui = _ui(request)
    return ok({"sources": source_rows(ui.services), "default": ui.services.config.get("core.llm.provider")})


@require_api
async def put_source(request: Request) -> Response:
    """Add or edit one source; ``api_key`` empty or absent keeps the stored one."""
    name = _name(request)
    data = await json_body(request)
    config = _ui(request).services.config
    changes: dict[str, str] = {}
    for field in FIELDS:
        value = data.get(field)
        if value is None or (field == "api_key" and value == ""):
            continue
        if not isinstance(value, str):
            raise ApiError(400, f"field {field!r} must be a string")
        changes[field] = value.strip()
    existing = config.items(f"{PREFIX}{name}.")
    for field in ("base_url", "model", "adapter"):
        if not changes.get(field, existing.get(f"{PREFIX}{name}.{field}")):
            raise ApiError(400, f"{field} is required (e.g. base_url http://127.0.0.1:11434/v1, model qwen2.5, "
                                "adapter openai)")
    url = changes.get("base_url", "")
    if url and not url.startswith(("http://", "https://")):
        raise ApiError(400, f"base_url {url!r} must start with http:// or https://")
    try:
        for field, value in changes.items():
            config.set(f"{PREFIX}{name}.{field}", value)
        if data.get("default") is True or not _default_works(config):
            config.set("core.llm.provider", name)
    except HomeAgentError as exc:
        raise ApiError(400, str(exc)) from None
    return ok({"source": next(r for r in source_rows(_ui(request).services) if r["name"] == name)})


def _default_works(config: Any) -> bool:
    """Whether the default source is configured at all (else a new source becomes the default)."""
    default = str(config.get("core.llm.provider") or "")
    values = config.items(f"{PREFIX}{default}.")
    has_key = bool(values.get(f"{PREFIX}{default}.api_key") or config.get("core.llm.api_key"))
    url = str(values.get(f"{PREFIX}{default}.base_url") or "")
    local = "127.0.0.1" in url or "localhost" in url
    return bool(default and url and (has_key or local))


@require_api
async def delete_source(request: Request) -> Response:
    name = _name(request)
    config = _ui(request).services.config
    keys = [key for key in config.items(f"{PREFIX}{name}.") if key.startswith(f"{PREFIX}{name}.")]
    if not keys:
        raise ApiError(404, f"no LLM source named {name!r}")
    for key in keys:
        config.unset(key)
    return ok({"removed": name})


@require_api
async def test_source(request: Request) -> Response:
    """Send one short request to this source only; 200 with ``ok`` true or false and what happened."""
    name = _name(request)
    kernel = _ui(request).kernel
    manager = kernel.provider
    if not hasattr(manager, "source"):
        raise ApiError(409, "this agent's model is not configured through LLM sources")
    started = time.monotonic()
    try:
        source, provider = manager.source(name)
        reply = await provider.chat({"model": source.model, "stream": False, "max_tokens": 16,
                                     "messages": [{"role": "user", "content": TEST_PROMPT}]})
    except HomeAgentError as exc:
        return ok({"ok": False, "error": str(exc)})
    except Exception as exc:  # a source's failure is this test's answer, not a server error
        return ok({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    return ok({"ok": True, "reply": str(reply.get("content") or "")[:200],
               "seconds": round(time.monotonic() - started, 2)})


routes = [
    Route("/api/v1/llm/sources", list_sources, methods=["GET"]),
    Route("/api/v1/llm/sources/{name}", put_source, methods=["PUT"]),
    Route("/api/v1/llm/sources/{name}", delete_source, methods=["DELETE"]),
    Route("/api/v1/llm/sources/{name}/test", test_source, methods=["POST"]),
]
