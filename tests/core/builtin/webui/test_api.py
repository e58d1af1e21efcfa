"""The web UI's REST API over real HTTP: auth, validation, chat, settings, plugins, uploads."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest

from homeagent_core.app import App
from homeagent_core.builtin.webui.auth import LoginLimiter, client_ip, parse_proxies
from homeagent_sdk.testing import ToolCallReply

WebDaemon = object  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)


PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
    b"\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82"
)


async def test_every_api_route_requires_authentication(daemon: WebDaemon):
    from starlette.routing import Route

    routes = [r for r in daemon.plugin.app.routes if isinstance(r, Route) and r.path.startswith(("/api/", "/v1/"))]
    assert len(routes) > 15
    async with daemon.client(key=False) as client:
        for route in routes:
            # public: a password, a one-time invite token, a node's one-time pairing code
            if route.path in ("/api/v1/login", "/api/v1/invite", "/api/v1/nodes/join"):
                continue
            for method in route.methods or ():
                if method == "HEAD":
                    continue
                path = route.path.replace("{name}", "x")
                response = await client.request(method, path)
                assert response.status_code == 401, f"{method} {path}"
                assert response.json() == {"error": "unauthorized"}


async def test_api_key_works_as_header_and_bearer_and_a_wrong_key_does_not(daemon: WebDaemon):
    async with httpx.AsyncClient(base_url=daemon.url) as client:
        assert (await client.get("/api/v1/status", headers={"X-API-Key": daemon.api_key})).status_code == 200
        bearer = {"Authorization": f"Bearer {daemon.api_key}"}
        assert (await client.get("/api/v1/status", headers=bearer)).status_code == 200
        assert (await client.get("/api/v1/status", headers={"X-API-Key": "nope"})).status_code == 401


async def test_login_sets_a_safe_session_cookie_and_logout_ends_it(daemon: WebDaemon):
    async with daemon.client(key=False) as client:
        response = await client.post("/api/v1/login", json={"username": "admin", "password": daemon.password})
        assert response.status_code == 200
        cookie = response.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "max-age=86400" in cookie
        assert "secure" not in cookie  # plain http on loopback: a Secure cookie would never come back
        token = response.json()["csrf_token"]
        session = (await client.get("/api/v1/session")).json()
        assert (session["auth"], session["csrf_token"], session["role"], session["admin_login"]) == (
            "session", token, "owner", True)
        assert (await client.get("/api/v1/status")).status_code == 200
        assert (await client.get("/", follow_redirects=False)).status_code == 200
        assert (await client.post("/api/v1/logout", headers={"X-CSRF-Token": token})).status_code == 200
        assert (await client.get("/api/v1/status")).status_code == 401
        page = await client.get("/", follow_redirects=False)
        assert page.status_code == 302 and page.headers["location"] == "/login"


async def test_login_failures_are_rate_limited_per_source_with_retry_after(daemon: WebDaemon):
    async with daemon.client(key=False) as client:
        for _ in range(5):
            bad = await client.post("/api/v1/login", json={"username": "admin", "password": "guess"})
            assert bad.status_code == 401 and bad.json() == {"error": "Wrong user name or password"}
        limited = await client.post("/api/v1/login", json={"username": "admin", "password": daemon.password})
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) >= 1


async def test_login_rejects_malformed_bodies(daemon: WebDaemon):
    async with daemon.client(key=False) as client:
        broken = await client.post("/api/v1/login", content=b"{not json", headers={"content-type": "application/json"})
        assert broken.status_code == 400
        untyped = await client.post("/api/v1/login", content=b'{"username": "admin", "password": "x"}')
        assert untyped.status_code == 415 and "application/json" in untyped.json()["error"]
        wrong = await client.post("/api/v1/login", json={"username": "admin", "password": 123})
        assert wrong.status_code == 400 and "must be str" in wrong.json()["error"]


def test_forwarded_for_is_trusted_only_from_configured_proxies():
    proxies = parse_proxies("10.0.0.0/8, 192.168.1.5")
    headers = {"x-forwarded-for": "203.0.113.9, 10.0.0.2"}
    assert client_ip("10.1.2.3", headers, proxies) == "203.0.113.9"
    assert client_ip("198.51.100.7", headers, proxies) == "198.51.100.7"
    # a client behind the proxy writes what it likes on the left; the proxy appends the truth
    spoofed = {"x-forwarded-for": "1.2.3.4, 203.0.113.9"}
    assert client_ip("10.1.2.3", spoofed, proxies) == "203.0.113.9"
    with pytest.raises(ValueError, match="not an IP address"):
        parse_proxies("example.com")


def test_the_login_limiter_forgets_after_success():
    limiter = LoginLimiter(free=2)
    limiter.failed("a")
    limiter.failed("a")
    assert limiter.retry_after("a") >= 1 and limiter.retry_after("b") == 0
    limiter.succeeded("a")
    assert limiter.retry_after("a") == 0


async def test_chat_returns_the_reply_and_history_records_it(daemon: WebDaemon):
    daemon.model.add("你好，我记住了")
    async with daemon.client() as client:
        response = await client.post("/api/v1/chat", json={"message": "我叫小王"})
        assert response.status_code == 200
        assert response.json()["response"] == "你好，我记住了"
        await daemon.app.bus.drain()
        history = (await client.get("/api/v1/chat/history")).json()
    roles = [(m["role"], m["content"]) for m in history["messages"]]
    assert roles[-2:] == [("user", "我叫小王"), ("assistant", "你好，我记住了")]


async def test_chat_is_idempotent_by_client_message_id(daemon: WebDaemon):
    daemon.model.add(ToolCallReply("config_list_plugins", {}, delay=0.05), "一次")
    async with daemon.client() as client:
        body = {"message": "只处理一次", "client_msg_id": "m-1"}
        first, second = await asyncio.gather(client.post("/api/v1/chat", json=body),
                                             client.post("/api/v1/chat", json=body))
    replies = sorted([first.json(), second.json()], key=lambda r: r.get("deduplicated", False))
    assert replies[0]["response"] == replies[1]["response"] == "一次"
    assert replies[1]["deduplicated"] is True
    assert len(daemon.model.requests) == 2  # one turn: the tool round and the answer


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"[1, 2]", 400, "JSON object"),
        (b"{oops", 400, "not valid JSON"),
        (b"{}", 400, "missing field 'message'"),
        (b'{"message": 42}', 400, "must be str"),
        (b'{"message": "   "}', 400, "empty"),
        (b'{"message": "hi", "device_id": "../x"}', 400, "device_id"),
    ],
)
async def test_chat_rejects_bad_bodies_with_json_errors(daemon: WebDaemon, body: bytes, status: int, message: str):
    async with daemon.client() as client:
        response = await client.post("/api/v1/chat", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status
    assert message in response.json()["error"]


async def test_oversized_bodies_are_refused(daemon: WebDaemon):
    async with daemon.client() as client:
        big = b'{"message": "' + b"x" * (1024 * 1024 + 10) + b'"}'
        response = await client.post("/api/v1/chat", content=big, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and "too large" in response.json()["error"]


async def test_settings_are_typed_validated_and_secrets_masked(daemon: WebDaemon):
    async with daemon.client() as client:
        listing = (await client.get("/api/v1/settings", params={"prefix": "core.agent."})).json()
        assert listing["settings"]["core.agent.max_tool_turns"] == 10
        assert listing["meta"]["core.agent.max_tool_turns"]["type"] == "int"
        assert "plugin.webui" in listing["plugins"]
        bad = await client.put("/api/v1/settings", json={"key": "core.agent.max_tool_turns", "value": "lots"})
        assert bad.status_code == 400 and "expected an integer" in bad.json()["error"]
        unknown = await client.put("/api/v1/settings", json={"key": "core.nope", "value": 1})
        assert unknown.status_code == 400 and "unknown config key" in unknown.json()["error"]
        good = await client.put("/api/v1/settings", json={"key": "core.agent.max_tool_turns", "value": 4.0})
        assert good.json()["value"] == 4
        secret = await client.put("/api/v1/settings", json={"key": "core.llm.api_key", "value": "sk-very-secret"})
        assert secret.json()["value"] == "****"
        dump = (await client.get("/api/v1/settings")).text
        assert "sk-very-secret" not in dump
        reset = await client.put("/api/v1/settings", json={"key": "core.agent.max_tool_turns", "value": None})
        assert reset.json()["value"] == 10


async def test_status_says_when_no_llm_is_configured(daemon: WebDaemon):
    async with daemon.client() as client:
        assert (await client.get("/api/v1/status")).json()["llm_configured"] is False
        await client.put("/api/v1/settings", json={"key": "core.llm.sources.local.base_url",
                                                   "value": "http://127.0.0.1:11434/v1"})
        assert (await client.get("/api/v1/status")).json()["llm_configured"] is True


async def test_kernel_status_lists_plugins_and_tools(daemon: WebDaemon):
    async with daemon.client() as client:
        status = (await client.get("/api/v1/kernel")).json()
    names = {p["name"]: p for p in status["plugins"]}
    assert names["webui"]["status"] == "started"
    assert "config_get" in status["tools"] and status["kernel"]["running"] is True


async def test_a_status_poll_waiting_on_memory_does_not_stall_the_event_loop(daemon: WebDaemon):
    import time

    services = daemon.app.services
    original = services.status_extra

    def slow_memory_status() -> dict[str, object]:
        time.sleep(0.6)  # memory's status waiting for a store lock a writer holds
        return original()

    services.status_extra = slow_memory_status
    loop = asyncio.get_running_loop()
    gaps: list[float] = []

    async def ticker() -> None:
        last = loop.time()
        while True:
            await asyncio.sleep(0.01)
            now = loop.time()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    try:
        async with daemon.client() as client:
            status = (await client.get("/api/v1/kernel")).json()
    finally:
        ticking.cancel()
        services.status_extra = original
    assert "memory" in status and status["kernel"]["running"] is True
    assert max(gaps) < 0.4, f"the event loop stalled {max(gaps):.2f} s behind a status poll"


async def test_plugins_can_be_disabled_and_enabled_and_names_are_checked(daemon: WebDaemon):
    async with daemon.client() as client:
        assert (await client.post("/api/v1/plugins/cfgmgr/disable")).json()["status"] == "disabled"
        listing = (await client.get("/api/v1/plugins")).json()
        assert "cfgmgr" in listing["disabled"]
        assert daemon.app.config.disabled_plugins() == {"cfgmgr"}
        assert (await client.post("/api/v1/plugins/cfgmgr/enable")).json()["status"] == "enabled"
        bad = await client.post("/api/v1/plugins/..%2F..%2Fetc/disable")
        assert bad.status_code in (400, 404)


async def test_image_upload_is_type_checked_and_saved_under_a_safe_name(daemon: WebDaemon):
    daemon.model.add("一张很小的图")
    async with daemon.client() as client:
        files = {"file": ("../../evil name.png", PNG, "image/png")}
        response = await client.post("/api/v1/chat/file", files=files, data={"message": "看看这个"})
        assert response.status_code == 200, response.text
        info = response.json()["file"]
        assert info["name"] == "evil_name.png" and info["size"] == len(PNG)
        assert (daemon.app.data_dir / "uploads" / "evil_name.png").read_bytes() == PNG
        assert (await client.get(info["url"])).content == PNG
        fake = await client.post("/api/v1/chat/file", files={"file": ("x.png", b"not a png", "image/png")})
        assert fake.status_code == 415
        exe = await client.post("/api/v1/chat/file", files={"file": ("x.sh", b"#!/bin/sh", "application/x-sh")})
        assert exe.status_code == 415
    request = daemon.model.requests[-1]
    assert any(isinstance(m.get("content"), list) for m in request["messages"]) or "看看这个" in str(request)


async def test_unknown_routes_and_methods_answer_json(daemon: WebDaemon):
    async with daemon.client() as client:
        missing = await client.get("/api/v1/nothing")
        assert missing.status_code == 404 and missing.json() == {"error": "not found"}
        wrong = await client.delete("/api/v1/status")
        assert wrong.status_code == 405


async def test_memory_routes_say_when_memory_is_not_running(daemon: WebDaemon):
    if daemon.app.services.memory is not None:
        pytest.skip("memory is running in this build")
    async with daemon.client() as client:
        response = await client.get("/api/v1/memory/graph")
    assert response.status_code == 503 and "not running" in response.json()["error"]


async def test_a_port_in_use_is_a_clear_startup_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        from homeagent_sdk.testing import FakeModel

        app = App(tmp_path / "d", load_entrypoints=False, builtins=("homeagent_core.builtin.webui",),
                  provider=FakeModel(default="x"))
        app.services.listen_port = port
        await app.start()
        info = app.host.info("webui")
        assert info.status == "failed"
        assert f"cannot listen on 127.0.0.1:{port}" in info.error and "--port" in info.error
        # No web UI, so no password to show: none is made (the next start that listens makes it).
        assert not (tmp_path / "d" / "plugin_data" / "webui" / "credentials.json").exists()
        assert "password" not in capsys.readouterr().err
        await app.stop()
    finally:
        busy.close()


async def test_the_listening_socket_is_tcp_so_responses_are_not_held_back_by_nagle(daemon: WebDaemon):
    # asyncio sets TCP_NODELAY on accepted connections only when the socket says it is TCP.
    sockets = [s for server in daemon.plugin.server.servers for s in server.sockets]
    assert sockets and all(s.proto == socket.IPPROTO_TCP for s in sockets)
