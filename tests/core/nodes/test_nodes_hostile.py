"""A hostile node never hurts the daemon: wrong tokens, foreign Host/Origin, bad hellos, garbage,
unknown messages, oversized frames and floods are refused or cut off (and marked), and the
daemon goes on answering."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from nodes_procs import API_KEY, Proc, ask, configure, free_port, nodes_list, serve
from openai_loopback import openai_loopback
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

HELLO = {"type": "hello", "protocol": 1, "capabilities": [{"name": "status", "description": "d"}]}


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "home"
    port = free_port()
    with openai_loopback() as model:
        configure(home, model.base_url)
        proc: Proc = serve(home, port)
        try:
            yield f"127.0.0.1:{port}", home
        finally:
            proc.stop(signal.SIGKILL)


def token_for(addr: str, name: str) -> str:
    headers = {"X-API-Key": API_KEY}
    code = httpx.post(f"http://{addr}/api/v1/nodes/pair", json={"name": name}, headers=headers).json()["code"]
    joined = httpx.post(f"http://{addr}/api/v1/nodes/join", json={"code": code})
    assert joined.status_code == 200, joined.text
    return str(joined.json()["token"])


def link(addr: str, token: str, **headers: str) -> ClientConnection:
    return connect(f"ws://{addr}/api/v1/nodes/ws", additional_headers={"Authorization": f"Bearer {token}", **headers},
                   max_size=None, open_timeout=10)


def hello(ws: ClientConnection) -> dict[str, object]:
    ws.send(json.dumps(HELLO))
    answer: dict[str, object] = json.loads(ws.recv(timeout=10))
    return answer


def closed_code(ws: ClientConnection) -> int | None:
    with pytest.raises(ConnectionClosed):
        while True:
            ws.recv(timeout=20)
    return ws.close_code


def refused(addr: str, token: str, **headers: str) -> tuple[int, str]:
    with pytest.raises(InvalidStatus) as caught:
        link(addr, token, **headers)
    response = caught.value.response
    return response.status_code, response.body.decode() if response.body else ""


def raw_handshake(addr: str, token: str, *, host: str) -> str:
    """The status line of a WebSocket handshake sent with ``Host: host`` (a client library sets its own)."""
    request = (
        f"GET /api/v1/nodes/ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    )
    ip, port = addr.rsplit(":", 1)
    with socket.create_connection((ip, int(port)), timeout=10) as sock:
        sock.sendall(request.encode())
        return sock.makefile("rb").readline().decode()


@pytest.mark.timeout(300)
def test_hostile_nodes_are_refused_or_cut_off_and_the_daemon_goes_on(daemon: tuple[str, Path]) -> None:
    addr, home = daemon
    # wrong or missing token: 401 with the reason
    status, body = refused(addr, "hn_not-a-token")
    assert status == 401 and "revoked or unknown" in body
    assert refused(addr, "")[0] == 401
    # a foreign Host (DNS rebinding) and a page of another site are refused before any token check
    token = token_for(addr, "bad")
    assert raw_handshake(addr, token, host="evil.example").startswith("HTTP/1.1 421 ")
    status, body = refused(addr, token, Origin="http://evil.example")
    assert status == 403 and "cross-site" in body

    # a hello that is not one
    with link(addr, token) as ws:
        ws.send(json.dumps({"type": "hello", "protocol": 99, "capabilities": []}))
        assert closed_code(ws) == 4400
    # garbage after the hello: cut off at once
    with link(addr, token) as ws:
        assert hello(ws)["type"] == "welcome"
        ws.send("{not json")
        assert closed_code(ws) == 4400
    assert "garbage" in next(r for r in nodes_list(home) if r["name"] == "bad")["problem"]
    # unknown messages: answered with an error, cut off after five
    with link(addr, token) as ws:
        hello(ws)
        for _ in range(4):
            ws.send(json.dumps({"type": "frobnicate"}))
            assert "unknown message type" in json.loads(ws.recv(timeout=10))["error"]
        ws.send(json.dumps({"type": "result", "id": "c999", "ok": True, "text": "nobody asked"}))
        assert closed_code(ws) == 4400
    # an oversized frame: the socket is closed (1009), the node is marked
    with link(addr, token) as ws:
        hello(ws)
        ws.send("x" * (9 * 1024 * 1024))
        assert closed_code(ws) == 1009
    assert "larger than" in next(r for r in nodes_list(home) if r["name"] == "bad")["problem"]
    # a flood: cut off
    with link(addr, token) as ws:
        hello(ws)
        with contextlib.suppress(ConnectionClosed):  # the cut may come while frames are still sent
            for _ in range(1000):
                ws.send(json.dumps({"type": "pong"}))
        assert closed_code(ws) == 4429
    assert "flood" in next(r for r in nodes_list(home) if r["name"] == "bad")["problem"]

    # the daemon is unhurt: it answers a turn and a well-behaved node still connects
    assert ask(f"http://{addr}", "still there?") == "Hello from the loopback model."
    with link(addr, token_for(addr, "good")) as ws:
        assert hello(ws) == {"type": "welcome", "node": "good", "max_result_bytes": 65536}
    assert {r["name"] for r in nodes_list(home)} == {"bad", "good"}
    # wrong join codes: refused, then the address is slowed down
    for _ in range(5):
        wrong = httpx.post(f"http://{addr}/api/v1/nodes/join", json={"code": "AAAA-AAAA"})
        assert wrong.status_code == 400 and "unknown or already used" in wrong.json()["error"]
    assert httpx.post(f"http://{addr}/api/v1/nodes/join", json={"code": "AAAA-AAAA"}).status_code == 429
    log = (home / "log" / "homeagent.log").read_text()
    assert "Traceback" not in log and "node bad cut off: flood" in log, log
