"""Pairing routes: the chat-app senders of every bridge who asked to talk to the agent.

Bridges keep their requests in ``<data>/plugin_data/<plugin>/pairing.db`` (see
:mod:`homeagent_sdk.pairing`); like ``homeagent pairing``, these routes open those tables
directly, so every bridge shows up without registering anything, and a running bridge sees a
decision on the sender's next message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui.common import ApiError, UIState, json_body, ok, require_api
from homeagent_sdk.pairing import PairingRequest, PairingStore, pairing_files

__all__ = ["routes"]

_ACTIONS = ("approve", "deny", "revoke")


def _tables(request: Request) -> dict[str, Path]:
    ui: UIState = request.app.state.ui
    return pairing_files(Path(ui.services.data_dir) / "plugin_data")


@contextlib.contextmanager
def _open(path: Path) -> Iterator[PairingStore]:
    store = PairingStore(path)
    try:
        yield store
    finally:
        store.close()


def _listing(tables: dict[str, Path]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for plugin, path in tables.items():
        with _open(path) as store:
            rows.extend({"plugin": plugin, **r.to_dict()} for r in store.list())
    return rows


async def _people(request: Request) -> list[str]:
    """Known people of the social layer (to link an approved sender to); [] without memory."""
    ui: UIState = request.app.state.ui
    social = getattr(ui.services, "social", None)
    if social is None:
        return []
    try:
        return list(await social.persons())
    except Exception:
        return []


@require_api
async def pairing_list(request: Request) -> Response:
    """``{"bridges": [plugin], "requests": [{plugin, platform, account, name, status, code, person, ...}],
    "people": [name]}``; requests newest first within each bridge."""
    tables = _tables(request)
    rows = await asyncio.to_thread(_listing, tables)
    return ok({"bridges": list(tables), "requests": rows, "people": await _people(request)})


def _decide(tables: dict[str, Path], plugin: str, action: str, code: str, person: str) -> tuple[str, PairingRequest]:
    wanted = code.strip().upper()
    for name, path in tables.items():
        if plugin and name != plugin:
            continue
        with _open(path) as store:
            if any(r.code == wanted for r in store.list()):
                if action == "approve":
                    return name, store.approve(wanted, person=person)
                if action == "deny":
                    return name, store.deny(wanted)
                return name, store.revoke(wanted)
    where = f"bridge {plugin!r}" if plugin else "any chat bridge"
    raise ApiError(404, f"no pairing request with code {wanted!r} on {where}; reload the list for current codes")


def _action(action: str) -> Any:
    @require_api
    async def endpoint(request: Request) -> Response:
        data = await json_body(request, required={"code": str})
        plugin = data.get("plugin") or ""
        person = data.get("person") or ""
        if not isinstance(plugin, str) or not isinstance(person, str):
            raise ApiError(400, '"plugin" and "person" must be strings when given')
        if action != "approve" and person:
            raise ApiError(400, f'"person" only applies to approve, not {action}')
        tables = _tables(request)
        if plugin and plugin not in tables:
            known = ", ".join(tables) or "none"
            raise ApiError(404, f"no chat bridge named {plugin!r} has pairing requests (bridges: {known})")
        name, decided = await asyncio.to_thread(_decide, tables, plugin, action, data["code"], person.strip())
        return ok({"plugin": name, "action": action, **decided.to_dict()})

    endpoint.__name__ = f"pairing_{action}"
    return endpoint


routes = [
    Route("/api/v1/pairing", pairing_list, methods=["GET"]),
    *(Route(f"/api/v1/pairing/{action}", _action(action), methods=["POST"]) for action in _ACTIONS),
]
