"""Where calendar events come from: CalDAV calendars (read and write) and ICS subscriptions (read).

:class:`CalDAVCalendar` wraps one CalDAV collection with the :mod:`caldav` library. Its calls
block (HTTP), so the plugin runs them in its own bounded worker pool, each with the setting's
timeout. Failures come back as :class:`CalendarError` with a message that names the calendar
and says what to check: a 401/403 (user or password), a 404 (the URL), a 5xx (the server), a
timeout or a refused connection. Nothing is changed locally when the server refuses a write.

An :class:`IcsSubscription` is a read-only ``.ics`` URL (a school's holidays, a team's
rota), fetched with :func:`homeagent_sdk.ssrf.download_capped`: public addresses only unless
``plugin.calendar.allow_private`` names the host, redirects checked hop by hop, size capped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from homeagent_sdk.errors import ToolError
from homeagent_sdk.ssrf import AddressPolicy, download_capped

__all__ = ["CalDAVCalendar", "CalendarError", "IcsSubscription", "StoredEvent", "fetch_ics"]


class CalendarError(ToolError):
    """A calendar server refused, failed or did not answer (the message says which and why)."""


def _status(exc: BaseException) -> int | None:
    """The HTTP status a caldav error carries, when it carries one."""
    reason = str(getattr(exc, "reason", "") or exc)
    for code in (401, 403, 404, 405, 409, 412, 500, 501, 502, 503, 504):
        if str(code) in reason:
            return code
    return None


def shown(url: str) -> str:
    """``url`` as messages and logs show it: scheme and host only (a URL may carry a login or a token)."""
    parts = urlsplit(url)
    host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname or "?")
    return f"{parts.scheme}://{host}/…"


def _scrub(text: str, url: str) -> str:
    """``text`` without ``url`` (or its first 200 characters) in it."""
    for form in (url, url[:200], url.rstrip("/")):
        text = text.replace(form, shown(url))
    return text


def _explain(name: str, url: str, exc: BaseException) -> CalendarError:
    """A clear message for a failed CalDAV call on calendar ``name``."""
    import niquests
    from caldav.lib import error as dav_error

    parts = urlsplit(url)  # the host only: a URL may carry user:password@
    host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname or "?")
    where = f"calendar {name!r} ({host})"
    if isinstance(exc, dav_error.AuthorizationError) or _status(exc) in (401, 403):
        return CalendarError(
            f"{where} refused the login (HTTP 401/403); check the user in plugin.calendar.calendars and the "
            "password in plugin.calendar.passwords (an app password for iCloud, Fastmail and Nextcloud with 2FA)"
        )
    if isinstance(exc, dav_error.NotFoundError) or _status(exc) == 404:
        return CalendarError(
            f"{where}: nothing at that URL (HTTP 404); check the calendar URL in plugin.calendar.calendars"
        )
    if isinstance(exc, niquests.exceptions.Timeout | TimeoutError):
        return CalendarError(
            f"{where} did not answer in time; the server may be down or slow (plugin.calendar.timeout). "
            "Nothing was changed; try again later"
        )
    if isinstance(exc, niquests.exceptions.ConnectionError | ConnectionError | OSError):
        return CalendarError(
            f"{where} cannot be reached ({type(exc).__name__}); is the server running and the URL right?"
        )
    status = _status(exc)
    if status is not None and status >= 500:
        return CalendarError(
            f"{where} failed with a server error (HTTP {status}); nothing was changed, try again later"
        )
    text = _scrub(str(exc).strip().splitlines()[0], url)[:300] if str(exc).strip() else type(exc).__name__
    return CalendarError(f"{where} answered with an error: {text}")


def _errors() -> tuple[type[BaseException], ...]:
    """What a CalDAV call raises when the server refuses, fails or is not there."""
    import niquests
    from caldav.lib import error as dav_error

    return (dav_error.DAVError, niquests.exceptions.RequestException, OSError, TimeoutError)


@dataclass(frozen=True)
class StoredEvent:
    """One event object as read from a CalDAV calendar: what :meth:`CalDAVCalendar.replace` writes back over."""

    uid: str
    text: str
    url: str
    etag: str  # "" when the server gave none (then the write is not conditional)


@dataclass
class CalDAVCalendar:
    """One CalDAV calendar collection. Every method blocks; call it from a worker thread.

    The :mod:`caldav` library is imported on first use, so loading the plugin costs nothing
    when no calendar is configured.
    """

    name: str
    url: str
    user: str = ""
    password: str = ""
    timeout: float = 20.0
    display_name: str = ""  # pick a calendar by name under a principal/home URL instead of the URL itself
    auth: str = "basic"  # sent with the first request; "digest", or "auto" to wait for the server's challenge

    def _client(self) -> Any:  # caldav's types are sync-or-async unions; used as Any here
        from caldav.davclient import DAVClient  # imported on first use: caldav and niquests take ~0.7 s

        auth_type = None if self.auth == "auto" or not self.user else self.auth
        return DAVClient(
            url=self.url, username=self.user or None, password=self.password or None, timeout=int(self.timeout),
            auth_type=auth_type,
        )

    def _collection(self, client: Any) -> Any:
        if not self.display_name:
            return client.calendar(url=self.url)
        calendars = client.principal().calendars()
        for cal in calendars:
            if str(cal.get_display_name() or "") == self.display_name or str(cal.url).rstrip("/").endswith(
                "/" + self.display_name
            ):
                return cal
        names = ", ".join(str(c.get_display_name() or c.url) for c in calendars) or "none"
        raise CalendarError(
            f"calendar {self.name!r}: the account has no calendar {self.display_name!r} (it has: {names})"
        )

    def _call(self, action: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except CalendarError:
            raise
        except _errors() as exc:
            raise _explain(self.name, self.url, exc) from None
        except Exception as exc:  # caldav raises assorted errors for bad server answers
            raise CalendarError(
                f"calendar {self.name!r}: {action} failed ({type(exc).__name__}: {_scrub(str(exc), self.url)[:200]}); "
                "check the URL points at a CalDAV calendar"
            ) from None

    def fetch(self, start: datetime, end: datetime) -> list[str]:
        """The iCalendar text of every event object with an occurrence in ``[start, end)``."""

        def run() -> list[str]:
            with self._client() as client:
                cal = self._collection(client)
                found = cal.search(start=start, end=end, event=True, expand=False)
                return [str(obj.data) for obj in found if obj.data]

        result: list[str] = self._call("reading events", run)
        return result

    def add(self, ical: str) -> None:
        """Store a new event object."""

        def run() -> None:
            with self._client() as client:
                self._collection(client).add_event(ical)

        self._call("adding the event", run)

    def read(self, uid: str) -> StoredEvent:
        """The object holding ``uid``: its iCalendar text, URL and ETag (for :meth:`replace`)."""

        def run() -> StoredEvent:
            with self._client() as client:
                obj = self._collection(client).get_event_by_uid(uid)
                return StoredEvent(uid, str(obj.data), str(obj.url), str(obj.etag or ""))

        stored: StoredEvent = self._call("finding the event", run)
        return stored

    def replace(self, stored: StoredEvent, ical: str) -> None:
        """Overwrite ``stored`` with ``ical``, only if nobody changed it since it was read (If-Match).

        Raises:
            CalendarError: another client changed or deleted the object in between (HTTP 412);
                nothing was written, their change stays.
        """
        from caldav.calendarobjectresource import Event
        from caldav.elements import dav
        from caldav.lib import error as dav_error

        def run() -> None:
            with self._client() as client:
                props = {dav.GetEtag.tag: stored.etag} if stored.etag else {}
                obj = Event(client=client, url=stored.url, parent=self._collection(client), props=props)
                try:
                    obj.save(raw_data=ical.encode(), precondition="etag")
                except dav_error.ETagMismatchError:
                    raise CalendarError(
                        f"calendar {self.name!r}: the event {stored.uid!r} was changed by someone else (another "
                        "app or person) after it was read here; nothing was changed and their change stays. "
                        "Read it again with calendar_list and retry"
                    ) from None

        self._call("saving the event", run)

    def delete(self, uid: str) -> None:
        """Delete the object holding ``uid`` (a whole series)."""

        def run() -> None:
            with self._client() as client:
                self._collection(client).get_event_by_uid(uid).delete()

        self._call("deleting the event", run)


@dataclass(frozen=True)
class IcsSubscription:
    """A read-only iCalendar URL."""

    name: str
    url: str


async def fetch_ics(sub: IcsSubscription, policy: AddressPolicy, *, max_bytes: int, timeout: float) -> bytes:
    """Download ``sub`` through the SSRF guard.

    Raises:
        CalendarError: refused address, HTTP error, timeout, too large — the message names the
            subscription and, for a private address, the setting that allows it.
    """
    where = f"subscription {sub.name!r}"
    try:
        return await download_capped(sub.url, policy, max_bytes=max_bytes, timeout=timeout)
    except ToolError as exc:
        message = _scrub(str(exc), sub.url).replace("plugin.web.allow_private", "plugin.calendar.allow_private")
        message = message.replace("The web tools only reach", "Subscriptions only reach")
        raise CalendarError(f"{where}: {message}") from None
    except httpx.TimeoutException:
        raise CalendarError(f"{where} did not answer within {timeout:g} s (plugin.calendar.timeout)") from None
    except httpx.HTTPError as exc:
        detail = _scrub(str(exc), sub.url) or type(exc).__name__
        raise CalendarError(f"{where} cannot be fetched: {detail}") from None

