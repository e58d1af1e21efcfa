"""Web Push through a real daemon to a loopback push service that decrypts what it receives."""

from __future__ import annotations

import asyncio
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from push_endpoint import Device, check_vapid, push_service

if TYPE_CHECKING:  # the fixture's type; imported only for checking (several test folders have a conftest)
    from conftest import WebDaemon

REMINDERS = "homeagent_core.builtin.reminders"


async def _subscribe(daemon: WebDaemon, device: Device) -> None:
    async with daemon.client() as client:
        response = await client.post("/api/v1/push/subscribe", json=device.subscription())
        assert response.status_code == 201, response.text


async def _key(daemon: WebDaemon) -> str:
    async with daemon.client() as client:
        response = await client.get("/api/v1/push/key")
        assert response.status_code == 200, response.text
        key: str = response.json()["public_key"]
        return key


def _allow(daemon: WebDaemon, base: str) -> None:
    daemon.app.config.set("plugin.webui.push_allow_private", base.removeprefix("http://"))


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def test_vapid_keys_are_made_once_per_data_directory_and_kept_private(
    start_daemon: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    async with start_daemon(data) as daemon:
        first = await _key(daemon)
    (pem,) = list(data.rglob("vapid_private.pem"))
    assert stat.S_IMODE(pem.stat().st_mode) == 0o600
    async with start_daemon(data) as daemon:
        assert await _key(daemon) == first
    async with start_daemon(tmp_path / "other") as daemon:
        assert await _key(daemon) != first


async def test_a_push_arrives_encrypted_and_signed_and_decrypts_to_what_was_sent(daemon: WebDaemon) -> None:
    with push_service() as service:
        _allow(daemon, service.base)
        device = Device(service.endpoint("phone"))
        await _subscribe(daemon, device)
        payload = {"title": "测试", "body": "明天 7:00 倒垃圾 🗑", "tag": "t1", "url": "/"}
        results = await daemon.plugin.state.pusher.send({""}, payload)  # type: ignore[attr-defined]
        assert results == {device.endpoint: "201"}
        (got,) = await service.wait(1)
        assert got.decrypt(device) == payload
        assert got.headers["ttl"] and got.headers["content-type"] == "application/octet-stream"
        check_vapid(got.headers, device.endpoint, await _key(daemon))
        assert payload["body"].encode() not in got.body  # it travelled encrypted


async def test_a_reminder_reaches_the_owners_device(start_daemon: Any, tmp_path: Path) -> None:
    async with start_daemon(tmp_path / "data", extra=(REMINDERS,)) as daemon:
        with push_service() as service:
            _allow(daemon, service.base)
            device = Device(service.endpoint("phone"))
            await _subscribe(daemon, device)
            from homeagent_sdk.types import ToolCall

            result = await daemon.app.kernel.tools.execute(
                ToolCall(id="t", name="reminder_set", arguments={"when": "in 1 second", "text": "take the tea out"})
            )
            assert result.success, result.result
            (got,) = await service.wait(1)
            message = got.decrypt(device)
            assert message["title"] == "Reminder" and message["body"] == "reminder: take the tea out"
            assert message["tag"] == "reminder-reminder_1"


async def test_an_approval_request_and_a_residents_report_reach_the_owner(daemon: WebDaemon) -> None:
    with push_service() as service:
        _allow(daemon, service.base)
        device = Device(service.endpoint("owner"))
        await _subscribe(daemon, device)
        bus = daemon.app.bus
        bus.publish("approval_requested", {"id": 7, "person": "kid", "tool": "cmd_run", "arguments": {}})
        first = (await service.wait(1))[0].decrypt(device)
        assert first["body"] == "kid asks to run cmd_run" and first["tag"] == "approval-7"
        bus.publish("resident", {"type": "output", "name": "shopper", "task": "list", "content": "milk, eggs"})
        second = (await service.wait(2))[1].decrypt(device)
        assert second["title"] == "Report from shopper" and second["body"] == "milk, eggs"
        bus.publish("resident", {"type": "created", "name": "x"})  # not a report: nothing is pushed
        bus.publish("approval_requested", {"id": 8, "person": "kid", "tool": "files_write", "arguments": {}})
        received = await service.wait(3)
        tags = [r.decrypt(device)["tag"] for r in received]
        assert tags == ["approval-7", "resident-shopper", "approval-8"]


async def test_a_persons_reminder_reaches_only_their_devices(daemon: WebDaemon) -> None:
    from homeagent_core.builtin.webui.push import Subscription

    with push_service() as service:
        _allow(daemon, service.base)
        owner, kid = Device(service.endpoint("owner")), Device(service.endpoint("kid"))
        await _subscribe(daemon, owner)  # the admin login: the owner
        pusher = daemon.plugin.state.pusher  # type: ignore[attr-defined]
        keys = kid.subscription()["keys"]
        await pusher.pool.run(pusher.store.add, Subscription(kid.endpoint, keys["p256dh"], keys["auth"], "kid"))
        daemon.app.bus.publish("reminder_due", {"id": "reminder_4", "person": "kid", "text": "[提醒] 练琴"})
        (got,) = await service.wait(1)
        assert got.path == "/push/kid" and got.decrypt(kid)["body"] == "[提醒] 练琴"
        daemon.app.bus.publish("reminder_due", {"id": "reminder_5", "person": "", "text": "reminder: bins"})
        received = await service.wait(2)
        assert received[1].path == "/push/owner" and received[1].decrypt(owner)["body"] == "reminder: bins"


async def test_a_plugins_notification_reaches_the_person_the_owner_or_the_household(daemon: WebDaemon) -> None:
    from homeagent_core.builtin.webui.push import Subscription
    from homeagent_sdk import NOTIFY_EVENT

    people = daemon.app.services.rights.people  # type: ignore[union-attr]
    people.add("kid", role="child")
    people.add("visitor", role="guest")
    with push_service() as service:
        _allow(daemon, service.base)
        owner, kid, visitor = (Device(service.endpoint(n)) for n in ("owner", "kid", "visitor"))
        await _subscribe(daemon, owner)  # the admin login: the owner
        pusher = daemon.plugin.state.pusher  # type: ignore[attr-defined]
        for device, name in ((kid, "kid"), (visitor, "visitor")):
            keys = device.subscription()["keys"]
            await pusher.pool.run(pusher.store.add, Subscription(device.endpoint, keys["p256dh"], keys["auth"], name))
        bus = daemon.app.bus
        bus.publish(NOTIFY_EVENT, {"person": "kid", "title": "洗衣机", "body": "洗好了"}, source="homeassistant")
        (got,) = await service.wait(1)
        message = got.decrypt(kid)
        assert got.path == "/push/kid" and message["title"] == "洗衣机" and message["body"] == "洗好了"
        assert message["tag"] == "notify-homeassistant"
        bus.publish(NOTIFY_EVENT, {"person": "", "title": "Door", "body": "open 10 min", "tag": "door"})
        second = (await service.wait(2))[1]
        assert second.path == "/push/owner" and second.decrypt(owner)["tag"] == "door"
        bus.publish(NOTIFY_EVENT, {"person": "*", "title": "漏水", "body": "地下室漏水传感器：on"})
        received = await service.wait(4)
        assert sorted(r.path for r in received[2:]) == ["/push/kid", "/push/owner"]  # the guest is not told
        bus.publish(NOTIFY_EVENT, {"person": "kid", "title": 3, "body": None})  # malformed: ignored
        bus.publish(NOTIFY_EVENT, {"person": "kid", "title": "later", "body": "the next one still arrives"})
        fifth = (await service.wait(5))[4]
        assert fifth.decrypt(kid)["title"] == "later"


async def test_a_gone_subscription_is_removed_and_a_hanging_service_blocks_nothing(daemon: WebDaemon) -> None:
    daemon.app.config.set("plugin.webui.push_timeout", 1)
    with push_service() as service:
        _allow(daemon, service.base)
        gone, hanging, fine = (Device(service.endpoint(n)) for n in ("gone", "hang", "fine"))
        service.status["/push/gone"] = 410
        service.status["/push/hang"] = "hang"
        for device in (gone, hanging, fine):
            await _subscribe(daemon, device)
        pusher = daemon.plugin.state.pusher  # type: ignore[attr-defined]
        started = time.monotonic()
        sending = asyncio.ensure_future(pusher.send({""}, {"title": "x", "body": "y"}))
        async with daemon.client() as client:  # the daemon answers while the push hangs
            assert (await client.get("/api/v1/push/key")).status_code == 200
        results = await sending
        assert time.monotonic() - started < 8
        assert results == {gone.endpoint: "410", hanging.endpoint: "timeout", fine.endpoint: "201"}
        async with daemon.client() as client:
            left = [s["endpoint"] for s in (await client.get("/api/v1/push/key")).json()["subscriptions"]]
        assert left == [hanging.endpoint, fine.endpoint]


async def test_subscribing_needs_a_login_and_a_well_formed_subscription(daemon: WebDaemon) -> None:
    device = Device("https://push.example.com/x")
    async with daemon.client(key=False) as anonymous:
        assert (await anonymous.post("/api/v1/push/subscribe", json=device.subscription())).status_code == 401
        assert (await anonymous.get("/api/v1/push/key")).status_code == 401
    async with daemon.client() as client:
        bad = device.subscription()
        bad["keys"]["p256dh"] = "bm90LWEta2V5"
        response = await client.post("/api/v1/push/subscribe", json=bad)
        assert response.status_code == 400 and "p256dh" in response.json()["error"]
        response = await client.post("/api/v1/push/subscribe", json={**device.subscription(), "endpoint": "ftp://x"})
        assert response.status_code == 400 and "endpoint" in response.json()["error"]
        response = await client.post("/api/v1/push/unsubscribe", json={"endpoint": "https://nowhere.example/"})
        assert response.status_code == 404


async def test_a_private_push_endpoint_is_refused_unless_allowed(daemon: WebDaemon) -> None:
    with push_service() as service:
        device = Device(service.endpoint("lan"))
        await _subscribe(daemon, device)
        results = await daemon.plugin.state.pusher.send({""}, {"title": "x"})  # type: ignore[attr-defined]
        assert results[device.endpoint].startswith("error: refused to connect to 127.0.0.1")
        assert service.received == []


async def test_the_pwa_files_are_served(daemon: WebDaemon) -> None:
    async with daemon.client(key=False) as client:
        manifest = await client.get("/manifest.webmanifest")
        assert manifest.status_code == 200 and manifest.headers["content-type"].startswith("application/manifest+json")
        icons = manifest.json()["icons"]
        for icon in icons:
            if icon["src"].endswith(".png"):
                png = await client.get(icon["src"])
                assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
        worker = await client.get("/sw.js")
        assert worker.status_code == 200 and "showNotification" in worker.text
        assert worker.headers["content-type"].startswith("text/javascript")


async def test_the_service_worker_registers_in_chromium_and_a_test_push_arrives(
    daemon: WebDaemon, page: Any, login: Any
) -> None:
    import json

    from homeagent_core.builtin.webui.push import TEXTS

    await page.context.grant_permissions(["notifications"], origin=daemon.url)
    await login(page, daemon)
    state = await page.evaluate(
        """async () => {
            const registration = await navigator.serviceWorker.ready;
            return {scope: registration.scope, script: registration.active.scriptURL,
                    manifest: document.querySelector('link[rel=manifest]').href};
        }"""
    )
    assert state == {"scope": daemon.url + "/", "script": daemon.url + "/sw.js",
                     "manifest": daemon.url + "/manifest.webmanifest"}
    # Headless Chromium has no push service to subscribe at; the subscription is then one whose
    # keys this test holds, sent by the page itself (its session and CSRF token) as push.js does.
    native = await page.evaluate(
        """async () => {
            const registration = await navigator.serviceWorker.ready;
            const {public_key} = await api("/api/v1/push/key");
            try {
                const s = await registration.pushManager.subscribe(
                    {userVisibleOnly: true, applicationServerKey: urlBase64ToBytes(public_key)});
                return s.endpoint;
            } catch (err) { return "unavailable: " + err.name; }
        }"""
    )
    assert native.startswith(("https://", "unavailable: ")), native
    with push_service() as service:
        _allow(daemon, service.base)
        device = Device(service.endpoint("chromium"))
        await page.evaluate(
            """async (sub) => api("/api/v1/push/subscribe", {method: "POST",
                headers: {"Content-Type": "application/json"}, body: JSON.stringify(sub)})""",
            device.subscription(),
        )
        results = await page.evaluate("""async () => (await api("/api/v1/push/test", {method: "POST"})).results""")
        assert results[device.endpoint] == "201"
        (got,) = await service.wait(1)
        message = got.decrypt(device)
        assert message == {"title": TEXTS["test"], "body": TEXTS["test_body"], "tag": "test", "url": "/"}
        check_vapid(got.headers, device.endpoint, await _key(daemon))
    # What the push service decrypted, handed to the service worker as a push service would
    # (DevTools' ServiceWorker.deliverPushMessage): it shows the notification.
    cdp = await page.context.new_cdp_session(page)
    registrations: list[dict[str, Any]] = []
    cdp.on("ServiceWorker.workerRegistrationUpdated", lambda e: registrations.extend(e["registrations"]))
    await cdp.send("ServiceWorker.enable")
    await _until(lambda: bool(registrations))
    await cdp.send("ServiceWorker.deliverPushMessage", {
        "origin": daemon.url, "registrationId": registrations[0]["registrationId"], "data": json.dumps(message),
    })
    shown: list[Any] = []

    async def notifications() -> list[Any]:
        found: list[Any] = await page.evaluate(
            """async () => (await (await navigator.serviceWorker.ready).getNotifications())
                .map((n) => [n.title, n.body, n.tag, n.data.url])"""
        )
        return found

    async with asyncio.timeout(10):
        while not (shown := await notifications()):
            await asyncio.sleep(0.05)
    assert shown == [[TEXTS["test"], TEXTS["test_body"], "test", "/"]]
    await page.goto(daemon.url + "/#account")
    await page.wait_for_selector("#push-card #push-status:not(:empty)")
