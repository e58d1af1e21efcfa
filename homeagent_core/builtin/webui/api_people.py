"""People routes: logins per person, the owner's People page and the approvals it decides.

Any logged-in person may read who they are (``GET /api/v1/session``) and change their own
password (``PUT /api/v1/me/password``, the current one required). Everything under
``/api/v1/people`` and ``/api/v1/approvals`` is the owner's: another person's session gets
403. The invite routes (``/invite`` page, ``GET/POST /api/v1/invite``) need no login: the
one-time token is the proof, and failed tries count against the login rate limit.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui.auth import SESSION_COOKIE, InviteError, Logins, check_new_password
from homeagent_core.builtin.webui.common import ApiError, UIState, error, json_body, ok, require_api, require_person
from homeagent_sdk.errors import HomeAgentError

__all__ = ["check_login", "invite_path", "routes", "whoami"]

T = TypeVar("T")


def _ui(request: Request) -> UIState:
    return request.app.state.ui  # type: ignore[no-any-return]


def _people(ui: UIState) -> Any:
    """The person registry (``homeagent_core.agent.people.PeopleRegistry``, reached through the services)."""
    if ui.services.rights is None:
        raise ApiError(503, "the person registry is not open (the agent kernel is not running)")
    return ui.services.rights.people


def _logins(ui: UIState) -> Logins:
    if ui.logins is None:
        raise ApiError(503, "per-person logins are not available")
    return ui.logins


def invite_path(token: str) -> str:
    """The path of an invite link (the token is in the fragment: never sent to a server or a log)."""
    return f"/invite#{token}"


def check_login(ui: UIState, username: str, password: str) -> tuple[str, float] | None:
    """The session person of a right login (``("", 0.0)`` for the admin login), else None."""
    if ui.credentials.check_password(username, password):
        return "", 0.0
    rights, logins = ui.services.rights, ui.logins
    person = rights.people.get(username) if rights is not None and username.strip() else None
    if logins is None:
        return None
    if person is None:
        logins.check("", 0.0, password)  # hash anyway: the answer's timing does not tell who exists
        return None
    return (person.name, person.created_at) if logins.check(person.name, person.created_at, password) else None


def whoami(request: Request) -> dict[str, Any]:
    """Who the request speaks for: ``{"person", "role", "owner", "admin_login"}``."""
    ui = _ui(request)
    name = request.state.login
    admin = not name
    if admin and ui.services.rights is not None:
        owner = ui.services.rights.people.owner()
        name = owner.name if owner is not None else ""
    return {"person": name, "role": request.state.role, "owner": request.state.role == "owner", "admin_login": admin}


def _by(request: Request) -> str:
    return f"{whoami(request)['person'] or 'owner'} (web)"


async def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a registry change off the event loop; its refusal becomes a 400 with its message."""
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except (HomeAgentError, ValueError) as exc:  # PeopleError: unknown person or role, last owner, ...
        raise ApiError(400, str(exc)) from None


def _text(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ApiError(400, f"field {name!r} must be a non-empty string")
    return value.strip()


def _person_row(ui: UIState, person: Any) -> dict[str, Any]:
    row: dict[str, Any] = person.to_dict()
    row["web_login"] = _logins(ui).has_password(person.name, person.created_at)
    row["sessions"] = ui.sessions.count(person.name)
    return row


# ---------------------------------------------------------------- any person


@require_person
async def my_password(request: Request) -> Response:
    """``{current, new}``: change the password of the login this session belongs to."""
    ui = _ui(request)
    if request.state.auth != "session":
        raise ApiError(400, "log in with a password to change it; an API key has no password")
    data = await json_body(request, required={"current": str, "new": str})
    try:
        check_new_password(data["new"])
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    token = request.cookies.get(SESSION_COOKIE)
    if not request.state.login:  # the admin login (credentials.json)
        ok_now = await asyncio.to_thread(ui.credentials.check_password, ui.credentials.username, data["current"])
        if not ok_now:
            raise ApiError(403, "the current password is wrong; nothing changed")
        await asyncio.to_thread(ui.credentials.set_password, data["new"], ui.credentials_path)
        ui.sessions.drop_person("", keep=token)
        return ok({"status": "ok", "person": whoami(request)["person"]})
    person = _people(ui).require(request.state.login)
    logins = _logins(ui)
    if not await asyncio.to_thread(logins.check, person.name, person.created_at, data["current"]):
        raise ApiError(403, "the current password is wrong; nothing changed")
    await asyncio.to_thread(logins.set_password, person.name, person.created_at, data["new"])
    ui.sessions.drop_person(person.name, keep=token)
    return ok({"status": "ok", "person": person.name})


# ---------------------------------------------------------------- the owner's People page


@require_api
async def people_list(request: Request) -> Response:
    ui = _ui(request)
    people = _people(ui)
    persons = await asyncio.to_thread(people.list)
    roles = await asyncio.to_thread(people.roles)
    return ok(
        {
            "people": [_person_row(ui, p) for p in persons],
            "roles": [r.to_dict() for r in roles.values()],
            "me": whoami(request),
        }
    )


@require_api
async def people_add(request: Request) -> Response:
    ui = _ui(request)
    data = await json_body(request, required={"name": str, "role": str})
    person = await _call(_people(ui).add, data["name"], data["role"], by=_by(request))
    return ok(_person_row(ui, person), status=201)


def _target(request: Request) -> str:
    return str(request.path_params["name"])


@require_api
async def people_remove(request: Request) -> Response:
    """Remove a person: their accounts, API keys, web password, invites and sessions end now."""
    ui = _ui(request)
    name = _target(request)
    await _call(_people(ui).remove, name, by=_by(request))
    await asyncio.to_thread(_logins(ui).forget, name)
    ended = ui.sessions.drop_person(name)
    return ok({"status": "ok", "removed": name, "sessions_ended": ended})


@require_api
async def people_role(request: Request) -> Response:
    ui = _ui(request)
    data = await json_body(request, required={"role": str})
    person = await _call(_people(ui).set_role, _target(request), data["role"], by=_by(request))
    return ok(_person_row(ui, person))


@require_api
async def people_link(request: Request) -> Response:
    ui = _ui(request)
    data = await json_body(request, required={"platform": str, "account": str})
    change = _people(ui).unlink if request.method == "DELETE" else _people(ui).link
    person = await _call(change, _target(request), data["platform"], data["account"], by=_by(request))
    return ok(_person_row(ui, person))


@require_api
async def people_key(request: Request) -> Response:
    """A new API key for the person; the answer is the only time it is shown."""
    ui = _ui(request)
    key = await _call(_people(ui).new_key, _target(request), by=_by(request))
    return ok({"person": _target(request), "api_key": key}, status=201)


@require_api
async def people_password(request: Request) -> Response:
    """``{password?}``: reset a person's web password (a random one when absent, shown once);
    their sessions end."""
    ui = _ui(request)
    data = await json_body(request)
    password = data.get("password") or secrets.token_urlsafe(12)
    person = await _call(_people(ui).require, _target(request))
    await _call(_logins(ui).set_password, person.name, person.created_at, password)
    ended = ui.sessions.drop_person(person.name)
    await asyncio.to_thread(_people(ui).audit_change, _by(request), "password_reset", person.name)
    body: dict[str, Any] = {"person": person.name, "sessions_ended": ended}
    if not data.get("password"):
        body["password"] = password
    return ok(body)


@require_api
async def people_sessions_end(request: Request) -> Response:
    """End every web session of a person (they must log in again)."""
    ui = _ui(request)
    person = await _call(_people(ui).require, _target(request))
    ended = ui.sessions.drop_person(person.name)
    await asyncio.to_thread(_people(ui).audit_change, _by(request), "sessions_revoke", f"{person.name}: {ended}")
    return ok({"person": person.name, "sessions_ended": ended})


@require_api
async def people_invite(request: Request) -> Response:
    """A one-time link (24 h) on which the person sets their own web password."""
    ui = _ui(request)
    person = await _call(_people(ui).require, _target(request))
    token, expires = await asyncio.to_thread(_logins(ui).invite, person.name, person.created_at)
    await asyncio.to_thread(_people(ui).audit_change, _by(request), "invite_new", person.name)
    path = invite_path(token)
    return ok(
        {"person": person.name, "path": path, "url": str(request.base_url).rstrip("/") + path, "expires": expires},
        status=201,
    )


@require_api
async def people_audit(request: Request) -> Response:
    ui = _ui(request)
    raw = request.query_params.get("limit", "100")
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise ApiError(400, f"limit must be a whole number from 1 to 1000, got {raw!r}")
    person = request.query_params.get("person", "")
    rows = await asyncio.to_thread(_people(ui).audit_rows, int(raw), person=person)
    return ok({"audit": [r.to_dict() for r in rows]})


# ---------------------------------------------------------------- approvals


@require_api
async def approvals_list(request: Request) -> Response:
    rights = _ui(request).services.rights
    if rights is None:
        raise ApiError(503, "approvals exist only while the agent kernel runs")
    if request.query_params.get("history", "") not in ("", "0"):
        raw = request.query_params.get("limit", "50")
        if not raw.isdigit() or not 1 <= int(raw) <= 1000:
            raise ApiError(400, f"limit must be a whole number from 1 to 1000, got {raw!r}")
        return ok({"approvals": await rights.approvals.history(int(raw))})
    return ok({"approvals": [a.to_dict() for a in rights.approvals.list()]})


@require_api
async def approvals_decide(request: Request) -> Response:
    """``{approve: bool}``: approve (the call runs with the asker's rights) or deny."""
    rights = _ui(request).services.rights
    if rights is None:
        raise ApiError(503, "approvals exist only while the agent kernel runs")
    raw = str(request.path_params["id"])
    if not raw.isdigit():
        raise ApiError(400, f"an approval id is a number, got {raw!r}")
    data = await json_body(request, required={"approve": bool})
    try:
        decided = await rights.approvals.decide(int(raw), data["approve"], by=_by(request))
    except HomeAgentError as exc:  # ApprovalError: unknown, decided already, expired, its turn stopped
        raise ApiError(409, str(exc)) from None
    return ok(decided.to_dict())


# ---------------------------------------------------------------- invites (no login)


def _invite_refused(ui: UIState, request: Request, exc: Exception) -> Response:
    ui.limiter.failed(ui.source_of(request))
    return error(410 if isinstance(exc, InviteError) and "not valid" not in str(exc) else 404, str(exc))


async def invite_get(request: Request) -> Response:
    """``?token=``: whose invite it is (to greet them), or why it cannot be used."""
    ui = _ui(request)
    source = ui.source_of(request)
    wait = ui.limiter.retry_after(source)
    if wait:
        return error(429, f"too many tries; wait {wait} s", {"Retry-After": str(wait)})
    try:
        person, _ = await asyncio.to_thread(_logins(ui).invite_person, request.query_params.get("token", ""))
    except InviteError as exc:
        return _invite_refused(ui, request, exc)
    return ok({"person": person})


async def invite_post(request: Request) -> Response:
    """``{token, password}``: set the invited person's password; the link stops working."""
    ui = _ui(request)
    source = ui.source_of(request)
    wait = ui.limiter.retry_after(source)
    if wait:
        return error(429, f"too many tries; wait {wait} s", {"Retry-After": str(wait)})
    try:
        data = await json_body(request, required={"token": str, "password": str})
    except ApiError as exc:
        return error(exc.status, exc.message)
    try:
        name, since = await asyncio.to_thread(_logins(ui).accept, data["token"], data["password"])
    except InviteError as exc:
        return _invite_refused(ui, request, exc)
    except ValueError as exc:
        return error(400, str(exc))
    person = _people(ui).get(name)
    if person is None or person.created_at != since:
        await asyncio.to_thread(_logins(ui).forget, name)
        return error(410, "this invite was for a person who has been removed; ask the owner for a new one")
    await asyncio.to_thread(_people(ui).audit_change, f"{name} (web)", "invite_used", name)
    return ok({"status": "ok", "person": name, "username": name})


routes = [
    Route("/api/v1/me/password", my_password, methods=["PUT"]),
    Route("/api/v1/people", people_list, methods=["GET"]),
    Route("/api/v1/people", people_add, methods=["POST"]),
    Route("/api/v1/people/audit", people_audit, methods=["GET"]),
    Route("/api/v1/people/{name}", people_remove, methods=["DELETE"]),
    Route("/api/v1/people/{name}/role", people_role, methods=["PUT"]),
    Route("/api/v1/people/{name}/link", people_link, methods=["POST", "DELETE"]),
    Route("/api/v1/people/{name}/key", people_key, methods=["POST"]),
    Route("/api/v1/people/{name}/password", people_password, methods=["POST"]),
    Route("/api/v1/people/{name}/sessions", people_sessions_end, methods=["DELETE"]),
    Route("/api/v1/people/{name}/invite", people_invite, methods=["POST"]),
    Route("/api/v1/approvals", approvals_list, methods=["GET"]),
    Route("/api/v1/approvals/{id}", approvals_decide, methods=["POST"]),
    Route("/api/v1/invite", invite_get, methods=["GET"]),
    Route("/api/v1/invite", invite_post, methods=["POST"]),
]
