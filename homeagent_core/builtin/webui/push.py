"""Web Push: notifications that reach a phone whose page is closed (RFC 8030, 8291, 8292).

Each data directory has its own VAPID key pair (``<webui data>/vapid_private.pem``, mode 0600,
made on first start). A logged-in person's browser subscribes through
``POST /api/v1/push/subscribe`` (the service worker's ``PushSubscription``: endpoint and the
``p256dh``/``auth`` keys); the subscription is stored for that person in ``push.db``.

What is pushed, and to whom (events on the bus):

- ``reminder_due`` — to the person the reminder belongs to (the owner's devices when it has none;
  none for a guest's);
- ``approval_requested`` — to the owner's devices;
- ``resident`` with ``type: output`` (a resident's report) — to the owner's devices;
- ``notify`` (:data:`homeagent_sdk.NOTIFY_EVENT`, published by a plugin: a home watch that fired,
  say) — ``person`` is a person's name, ``""`` for the owner, ``"*"`` for the whole household
  (every person but guests); ``title`` and ``body`` are shown, ``tag`` replaces an earlier
  notification with the same tag.

Each message is a small JSON object (``title``, ``body``, ``tag``, ``url``) encrypted per
RFC 8291 (aes128gcm, :mod:`http_ece`) and signed with a VAPID JWT (RFC 8292, :mod:`py_vapid`).
Pushes run as background tasks: the bus callback returns at once, each request has its own
timeout (``plugin.webui.push_timeout``), so a hanging push service delays nothing else. A
subscription the push service says is gone (404/410) is removed. Push endpoints are fetched
through the SSRF guard: a push service is a public host; a private one must be named in
``plugin.webui.push_allow_private``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import http_ece
import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02, VapidException

from homeagent_core.workers import WorkerPool
from homeagent_sdk._atomic import atomic_write
from homeagent_sdk._schema import StoreSchema, open_schema, sql_step, version_one_if
from homeagent_sdk.api import NOTIFY_EVENT
from homeagent_sdk.errors import ToolError
from homeagent_sdk.ssrf import AddressPolicy, GuardedTransport, check_url
from homeagent_sdk.types import Event

__all__ = ["PUSH_DB", "VAPID_FILE", "PushKeys", "PushStore", "Pusher", "Subscription", "b64url"]

log = logging.getLogger("homeagent.webui.push")

VAPID_FILE = "vapid_private.pem"
PUSH_DB = "push.db"
#: How long a push service keeps an undelivered message (seconds).
TTL = 24 * 3600
_MAX_BODY = 3000  # characters of text in one notification (a push message holds ~4 KB)
_MAX_TITLE = 120
#: ``notify``'s person for everyone in the household (guests excepted).
EVERYONE = "*"


#: The notification texts, in one place for the message catalogues.
TEXTS = {
    "reminder": "Reminder",
    "approval": "Approval needed",
    "approval_body": "{person} asks to run {tool}",
    "resident": "Report from {name}",
    "test": "Notifications work",
    "test_body": "This device will get reminders and approval requests.",
}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PushKeys:
    """This data directory's VAPID key pair."""

    def __init__(self, pem: bytes) -> None:
        self.vapid = Vapid02.from_pem(pem)
        public = self.vapid.public_key.public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        #: The application server key a browser subscribes with (base64url, uncompressed P-256 point).
        self.public_key = b64url(public)

    @classmethod
    def load_or_create(cls, path: Path) -> PushKeys:
        """Read the key pair at ``path``, or make one there (0600, written atomically)."""
        if not path.exists():
            key = ec.generate_private_key(ec.SECP256R1())
            pem = key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            atomic_write(path, pem, mode=0o600)
        return cls(path.read_bytes())

    def headers(self, endpoint: str, subject: str) -> dict[str, str]:
        """The VAPID ``Authorization`` header for a push to ``endpoint`` (valid 12 hours)."""
        parts = urlsplit(endpoint)
        claims = {"aud": f"{parts.scheme}://{parts.netloc}", "exp": int(time.time()) + 12 * 3600, "sub": subject}
        signed: dict[str, str] = self.vapid.sign(claims)
        return {"Authorization": signed["Authorization"]}


@dataclass(frozen=True)
class Subscription:
    """One browser's push subscription."""

    endpoint: str
    p256dh: str
    auth: str
    person: str  # "" = the admin login (the owner)
    created: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        host = urlsplit(self.endpoint).netloc
        return {"endpoint": self.endpoint, "host": host, "person": self.person, "created": self.created}


PUSH_SCHEMA = StoreSchema(
    "push.db",
    [sql_step("CREATE TABLE IF NOT EXISTS subscriptions (endpoint TEXT PRIMARY KEY, p256dh TEXT NOT NULL, "
              "auth TEXT NOT NULL, person TEXT NOT NULL, created REAL NOT NULL)")],
    legacy=version_one_if("subscriptions"),
)
"""The schema of ``push.db``: one step per version (never edit a shipped one)."""


class PushStore:
    """Subscriptions in SQLite (WAL). Thread-safe, blocking: call it from a worker thread."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        open_schema(self._db, path, PUSH_SCHEMA)

    def add(self, sub: Subscription) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO subscriptions (endpoint, p256dh, auth, person, created) VALUES (?, ?, ?, ?, ?)",
                (sub.endpoint, sub.p256dh, sub.auth, sub.person, sub.created or time.time()),
            )

    def remove(self, endpoint: str, person: str | None = None) -> bool:
        with self._lock:
            if person is None:
                cur = self._db.execute("DELETE FROM subscriptions WHERE endpoint = ?", (endpoint,))
            else:
                cur = self._db.execute(
                    "DELETE FROM subscriptions WHERE endpoint = ? AND person = ?", (endpoint, person)
                )
        return cur.rowcount > 0

    def of(self, people: Iterable[str]) -> list[Subscription]:
        names = sorted(set(people))
        if not names:
            return []
        marks = ",".join("?" * len(names))
        with self._lock:
            rows = self._db.execute(
                f"SELECT endpoint, p256dh, auth, person, created FROM subscriptions WHERE person IN ({marks}) "
                "ORDER BY created",
                names,
            ).fetchall()
        return [Subscription(*row) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def validate(body: dict[str, Any], person: str) -> Subscription:
    """A subscription from a browser's ``PushSubscription.toJSON()``; a clear error for anything else.

    Raises:
        ValueError: the endpoint is not an http(s) URL or a key is missing or malformed.
    """
    endpoint = str(body.get("endpoint") or "")
    keys = body.get("keys")
    if not endpoint.startswith(("https://", "http://")) or len(endpoint) > 2000:
        raise ValueError("endpoint must be the push service URL of PushSubscription.toJSON() (https://...)")
    if not isinstance(keys, dict):
        raise ValueError('keys must be {"p256dh": ..., "auth": ...} as PushSubscription.toJSON() gives them')
    p256dh, auth = str(keys.get("p256dh") or ""), str(keys.get("auth") or "")
    try:
        point, secret = _unb64url(p256dh), _unb64url(auth)
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except ValueError:
        raise ValueError("keys.p256dh must be a base64url P-256 public key (65 bytes uncompressed)") from None
    if len(secret) != 16:
        raise ValueError("keys.auth must be a base64url 16-byte secret")
    return Subscription(endpoint, p256dh, auth, person, time.time())


def encrypt(sub: Subscription, data: bytes) -> bytes:
    """``data`` encrypted for ``sub`` (RFC 8291, aes128gcm, a fresh sender key each time)."""
    sender = ec.generate_private_key(ec.SECP256R1())
    body: bytes = http_ece.encrypt(
        data, private_key=sender, dh=_unb64url(sub.p256dh), auth_secret=_unb64url(sub.auth), version="aes128gcm"
    )
    return body


class Pusher:
    """Sends notifications to people's subscriptions; listens to the bus for what to send."""

    def __init__(
        self,
        keys: PushKeys,
        store: PushStore,
        setting: Callable[[str], Any],
        owners: Callable[[], set[str]],
        household: Callable[[], set[str]] | None = None,
    ) -> None:
        self.keys = keys
        self.store = store
        self._setting = setting
        self._owners = owners
        self._household = household or owners
        self._tasks: set[asyncio.Task[Any]] = set()
        #: store calls and encryption run here, never on the event loop
        self.pool = WorkerPool("push", 2)
        #: (endpoint, HTTP status or error) of every push tried, newest last (bounded)
        self.outcomes: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ the bus

    def handle(self, event: Event) -> None:
        """Bus callback: turn an event into a notification and send it in the background."""
        message = self.message_for(event)
        if message is None:
            return
        person, payload = message
        task = asyncio.get_running_loop().create_task(self.notify(person, payload), name=f"push-{event.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def message_for(self, event: Event) -> tuple[str | None, dict[str, Any]] | None:
        """Whom ``event`` notifies (a person's name; None: the owner) and what it says; None for nobody."""
        data = event.data
        if event.name == "reminder_due":
            person = str(data.get("person") or "")
            if person == "(guest)":  # someone the door did not know: their reminder is theirs alone
                return None
            return person or None, {"title": TEXTS["reminder"], "body": str(data.get("text", ""))[:_MAX_BODY],
                                    "tag": f"reminder-{data.get('id', '')}", "url": "/"}
        if event.name == "approval_requested":
            body = TEXTS["approval_body"].format(person=data.get("person", "?"), tool=data.get("tool", "?"))
            return None, {"title": TEXTS["approval"], "body": body, "tag": f"approval-{data.get('id', '')}",
                          "url": "/"}
        if event.name == NOTIFY_EVENT:
            return self._notification(event)
        if event.name == "resident" and data.get("type") == "output" and data.get("content"):
            return None, {"title": TEXTS["resident"].format(name=data.get("name", "?")),
                          "body": str(data.get("content", ""))[:_MAX_BODY], "tag": f"resident-{data.get('name')}",
                          "url": "/#residents"}
        return None

    @staticmethod
    def _notification(event: Event) -> tuple[str | None, dict[str, Any]] | None:
        """A plugin's ``notify``: whom (a person, the owner, :data:`EVERYONE`) and what; None if malformed."""
        data = event.data
        person, title, body = data.get("person", ""), data.get("title"), data.get("body")
        if not isinstance(person, str) or not isinstance(title, str) or not isinstance(body, str) or not title.strip():
            log.warning("notify from %s ignored: it needs person (a name, \"\" or \"*\"), title and body as "
                        "strings", event.source or "?")
            return None
        if person == "(guest)":
            return None
        tag = str(data.get("tag") or f"notify-{event.source or 'plugin'}")[:120]
        payload = {"title": " ".join(title.split())[:_MAX_TITLE], "body": body[:_MAX_BODY], "tag": tag, "url": "/"}
        return person or None, payload

    # ------------------------------------------------------------------ sending

    def _recipients(self, person: str | None) -> list[Subscription]:
        """Blocking: the subscriptions a notification for ``person`` (None: the owner) goes to.

        The owner's devices are those of the admin login and of every person with the owner role;
        :data:`EVERYONE`'s are every login's but a guest's.
        """
        if person == EVERYONE:
            return self.store.of(self._household())
        owners = self._owners()
        return self.store.of(owners if person is None or person in owners else {person})

    async def notify(self, person: str | None, payload: dict[str, Any]) -> dict[str, str]:
        """Push ``payload`` to ``person``'s devices (None: the owner's); ``{endpoint: outcome}``."""
        return await self._push(await self.pool.run(self._recipients, person), payload)

    async def send(self, people: set[str], payload: dict[str, Any]) -> dict[str, str]:
        """Push ``payload`` to every subscription of ``people`` (logins; "" is the admin login)."""
        return await self._push(await self.pool.run(self.store.of, people), payload)

    async def _push(self, subs: list[Subscription], payload: dict[str, Any]) -> dict[str, str]:
        if not subs:
            return {}
        data = json.dumps(payload, ensure_ascii=False).encode()
        results = await asyncio.gather(*(self._one(sub, data) for sub in subs))
        return dict(zip((s.endpoint for s in subs), results, strict=True))

    async def _one(self, sub: Subscription, data: bytes) -> str:
        timeout = float(self._setting("push_timeout") or 10)
        policy = AddressPolicy.parse(str(self._setting("push_allow_private") or ""))
        subject = str(self._setting("push_subject") or "") or "mailto:homeagent@localhost"
        try:
            await check_url(sub.endpoint, policy)
            body = await self.pool.run(encrypt, sub, data)
            headers = {
                **self.keys.headers(sub.endpoint, subject),
                "TTL": str(TTL),
                "Content-Encoding": "aes128gcm",
                "Content-Type": "application/octet-stream",
                "Urgency": "high",
            }
            async with (
                asyncio.timeout(timeout),
                httpx.AsyncClient(transport=GuardedTransport(policy), timeout=timeout) as client,
            ):
                response = await client.post(sub.endpoint, content=body, headers=headers)
            outcome = str(response.status_code)
            if response.status_code in (404, 410):
                await self.pool.run(self.store.remove, sub.endpoint, None)
                log.info("push subscription of %s at %s is gone (HTTP %d); removed",
                         sub.person or "the owner", urlsplit(sub.endpoint).netloc, response.status_code)
            elif response.status_code >= 400:
                log.warning("push to %s failed: HTTP %d", urlsplit(sub.endpoint).netloc, response.status_code)
        except TimeoutError:
            outcome = "timeout"
            log.warning("push to %s did not answer within %g s (plugin.webui.push_timeout); the subscription stays",
                        urlsplit(sub.endpoint).netloc, timeout)
        except VapidException as exc:
            outcome = f"error: plugin.webui.push_subject must be mailto:you@example.com or an https URL ({exc})"
            log.warning("push to %s not sent: %s", urlsplit(sub.endpoint).netloc, outcome)
        except (httpx.HTTPError, ToolError, OSError) as exc:
            outcome = f"error: {exc}"
            log.warning("push to %s failed: %s", urlsplit(sub.endpoint).netloc, exc)
        self.outcomes.append((sub.endpoint, outcome))
        del self.outcomes[:-100]
        return outcome

    async def aclose(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.pool.run(self.store.close)
        self.pool.shutdown()
