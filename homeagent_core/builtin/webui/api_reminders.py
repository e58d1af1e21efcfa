"""Reminder routes: each logged-in person lists, adds, cancels and snoozes their own reminders.

The same store as the ``reminder_*`` tools and ``homeagent reminders`` (the ``reminders``
built-in's): a reminder added here fires like one the agent set, naming the person logged in.
Any login may use these routes; a person other than the owner sees and changes only their own
reminders (another's answers 404, as if it did not exist), the owner sees everyone's, each
marked by person.

- ``GET /api/v1/reminders`` → ``{"person", "owner", "zone", "reminders": [{id, text, due, repeat,
  repeat_words, person, mine}]}``, soonest first (``due``: ISO 8601 in the household's zone);
- ``POST /api/v1/reminders`` ``{"said": "明天早上7点 吃药"}`` (one sentence, read by
  :func:`~homeagent_core.builtin.reminder_said.split_said`) or ``{"when", "text", "repeat"?}``
  (as the tool takes them) → 201 ``{"reminder": {...}}``; a time it cannot read is a 400 whose
  error asks what was meant;
- ``DELETE /api/v1/reminders/{id}`` → ``{"cancelled": id}``;
- ``POST /api/v1/reminders/{id}/snooze`` ``{"by": "10m" | "明天早上8点"}`` → ``{"reminder": {...}}``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.reminder_said import rule_in_words, split_said
from homeagent_core.builtin.reminders import Reminder, RemindersPlugin
from homeagent_core.builtin.webui.api_people import whoami
from homeagent_core.builtin.webui.common import ApiError, UIState, json_body, ok, require_person
from homeagent_core.builtin.when import WhenError
from homeagent_sdk import ToolError

__all__ = ["routes"]


def _plugin(request: Request) -> RemindersPlugin:
    ui: UIState = request.app.state.ui
    host = ui.services.host
    plugin = host.pm.get_plugin("reminders") if host is not None else None
    if not isinstance(plugin, RemindersPlugin) or not plugin.started:
        raise ApiError(
            503, "the reminders built-in is not running; enable it with `homeagent plugins enable reminders`"
        )
    return plugin


def _who(request: Request) -> tuple[str, str | None]:
    """(the person logged in, whose reminders they may see: None = everyone's, for the owner)."""
    me = whoami(request)
    person = str(me["person"])
    return person, None if me["owner"] else person


def _row(reminder: Reminder, person: str) -> dict[str, Any]:
    return {**reminder.to_dict(), "repeat_words": rule_in_words(reminder.rrule), "mine": reminder.person == person}


async def _mine(request: Request) -> tuple[RemindersPlugin, Reminder, str]:
    plugin = _plugin(request)
    person, scope = _who(request)
    reminder_id = str(request.path_params["reminder_id"])
    try:
        reminder = await plugin.find(reminder_id, scope)
    except ToolError as exc:
        raise ApiError(404, str(exc)) from None
    if reminder is None:
        raise ApiError(404, f"no pending reminder {reminder_id!r} of yours; it fired, was cancelled or is not yours")
    return plugin, reminder, person


@require_person
async def reminders_list(request: Request) -> Response:
    plugin = _plugin(request)
    person, scope = _who(request)
    pending = await plugin.pending_of(scope)
    try:
        zone = plugin.zone().key
    except ToolError as exc:
        raise ApiError(500, str(exc)) from None
    return ok({"person": person, "owner": scope is None, "zone": zone,
               "reminders": [_row(r, person) for r in pending]})


@require_person
async def reminders_add(request: Request) -> Response:
    plugin = _plugin(request)
    person, _ = _who(request)
    body = await json_body(request)
    try:
        if "said" in body:
            if not isinstance(body["said"], str):
                raise ApiError(400, f"field 'said' must be str, got {type(body['said']).__name__}")
            # up to a thousand parser tries for a long sentence: off the event loop
            said = await asyncio.to_thread(split_said, body["said"], plugin.now(), plugin.zone())
            reminder = await plugin.create(said.when_text, said.text, person=person)
        else:
            for name in ("when", "text"):
                if not isinstance(body.get(name), str):
                    raise ApiError(400, f"{name!r} is missing; send {{said: '明天早上7点 吃药'}} or {{when, text}}")
            repeat = body.get("repeat") or ""
            if not isinstance(repeat, str):
                raise ApiError(400, f"field 'repeat' must be str, got {type(repeat).__name__}")
            reminder = await plugin.create(body["when"], body["text"], repeat, person=person)
    except (WhenError, ToolError) as exc:
        raise ApiError(400, str(exc)) from None
    return ok({"reminder": _row(reminder, person)}, status=201)


@require_person
async def reminders_cancel(request: Request) -> Response:
    plugin, reminder, _ = await _mine(request)
    if not await plugin.drop_reminder(reminder.id):
        raise ApiError(404, f"no pending reminder {reminder.id!r}; it fired or was cancelled meanwhile")
    return ok({"cancelled": reminder.id})


@require_person
async def reminders_snooze(request: Request) -> Response:
    plugin, reminder, person = await _mine(request)
    body = await json_body(request, required={"by": str})
    try:
        snoozed = await plugin.snooze(reminder, body["by"])
    except ToolError as exc:
        raise ApiError(400, str(exc)) from None
    return ok({"reminder": _row(snoozed, person)})


routes = [
    Route("/api/v1/reminders", reminders_list, methods=["GET"]),
    Route("/api/v1/reminders", reminders_add, methods=["POST"]),
    Route("/api/v1/reminders/{reminder_id}", reminders_cancel, methods=["DELETE"]),
    Route("/api/v1/reminders/{reminder_id}/snooze", reminders_snooze, methods=["POST"]),
]
