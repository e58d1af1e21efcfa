"""End to end: a real Mosquitto broker on loopback (with a password file), a real ``homeagent
serve`` with this plugin, and the loopback model in tool mode."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import ipaddress
import json
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiomqtt
import httpx
import pytest
from homeagent_plugin_mqtt.plugin import _holds, parse_subscriptions, topic_matches

from homeagent_sdk.errors import PluginError
from homeagent_sdk.testing import (
    FakeModel,
    FakeModelServer,
    ServedDaemon,
    ToolCallReply,
    daemon_env,
    free_port,
    serve_daemon,
)

pytestmark = pytest.mark.timeout(240)

ADMIN_KEY = "mqtt-e2e-admin-key-0123456789"
USER, PASSWORD = "homeagent", "broker-secret-42"
MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else "")


@dataclass
class Broker:
    port: int
    ca_file: Path | None = None

    def client(self, **kwargs: Any) -> aiomqtt.Client:
        context = ssl.create_default_context(cafile=str(self.ca_file)) if self.ca_file else None
        return aiomqtt.Client("127.0.0.1", self.port, username=USER, password=PASSWORD, tls_context=context,
                              **kwargs)


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it: (ca, cert, key) files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "HomeAgent test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(days=1))
          .not_valid_after(now + timedelta(days=2)).add_extension(x509.BasicConstraints(ca=True, path_length=None),
                                                                  critical=True)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@pytest.fixture(params=["plain", "tls"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    """Mosquitto on a free loopback port (plain TCP, or TLS with a test CA); anonymous clients refused."""
    if not MOSQUITTO:
        pytest.skip("mosquitto is not installed: apt-get install mosquitto (.ci/run does)")
    folder = tmp_path / "mosquitto"
    folder.mkdir()
    passwords = folder / "passwd"
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(passwords), USER, PASSWORD], check=True, timeout=30)
    port = free_port()
    config = folder / "mosquitto.conf"
    tls = ""
    ca_file = None
    if request.param == "tls":
        ca_file, cert, key = _certificates(folder)
        tls = f"cafile {ca_file}\ncertfile {cert}\nkeyfile {key}\n"
    config.write_text(
        f"listener {port} 127.0.0.1\n{tls}allow_anonymous false\npassword_file {passwords}\npersistence false\n"
        f"user {getpass.getuser()}\n", encoding="utf-8")
    log = folder / "mosquitto.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([MOSQUITTO, "-c", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None:
                raise AssertionError(f"mosquitto exited: {log.read_text(errors='replace')}")
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.05)
        yield Broker(port, ca_file)
    finally:
        proc.terminate()
        proc.wait(10)


def _answer(request: dict[str, Any]) -> Any:
    message = request["messages"][-1]
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if message["role"] == "tool":
        return f"工具结果：{text}"
    if "[MQTT提醒]" in text or "[MQTT]" in text:
        return f"已通知：{text}"
    if "开客厅的灯" in text:
        return ToolCallReply("mqtt_publish", {"topic": "home/lights/living/set", "payload": "ON"})
    if "解除警报" in text:
        return ToolCallReply("mqtt_publish", {"topic": "home/alarm/set", "payload": "disarm"})
    return f"got: {text}"


@dataclass
class Daemon:
    served: ServedDaemon
    model: FakeModel

    async def say(self, text: str) -> str:
        async with httpx.AsyncClient(base_url=self.served.url, timeout=60) as http:
            answer = await http.post("/v1/chat/completions", headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                                     json={"model": "homeagent", "messages": [{"role": "user", "content": text}]})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["choices"][0]["message"]["content"])

    def seen(self, marker: str) -> list[str]:
        return [m for r in self.model.requests for m in [json.dumps(r["messages"][-1], ensure_ascii=False)]
                if marker in m]


@contextlib.asynccontextmanager
async def serve(tmp_path: Path, *settings: tuple[str, str]) -> AsyncIterator[Daemon]:
    async with FakeModelServer(FakeModel(responder=_answer)) as model:
        env = daemon_env("mqtt", HOMEAGENT_WEBUI_API_KEY=ADMIN_KEY, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        # secrets: the broker password is masked by `config set` and never reaches the log
        async with serve_daemon(tmp_path / "home", env, settings=(
            ("core.llm.sources.deepseek.base_url", model.base_url), *settings,
        ), secrets=[PASSWORD]) as served:
            yield Daemon(served, model.model)


async def _until(predicate: Any, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


def _connection(broker: Broker, password: str = PASSWORD) -> tuple[tuple[str, str], ...]:
    tls = (("plugin.mqtt.tls", "true"), ("plugin.mqtt.ca_file", str(broker.ca_file))) if broker.ca_file else ()
    return (("plugin.mqtt.host", "127.0.0.1"), ("plugin.mqtt.port", str(broker.port)),
            ("plugin.mqtt.username", USER), ("plugin.mqtt.password", password), *tls)


async def test_watched_topic_notifies_and_publish_is_limited(broker: Broker, tmp_path: Path) -> None:
    async with broker.client() as device:
        await device.publish("homeassistant/sensor/washer/config", json.dumps(
            {"name": "Washer", "state_topic": "home/washer/state", "device": {"name": "Laundry"}}), retain=True)
    subscriptions = [{"topic": "home/washer/state", "when": "done", "notify": "Owner, Mia"},
                     {"topic": "home/doorbell", "mode": "input", "name": "门铃"}]
    async with serve(tmp_path, *_connection(broker),
                     ("plugin.mqtt.subscriptions", json.dumps(subscriptions, ensure_ascii=False)),
                     ("plugin.mqtt.publish_allow", "home/lights/+/set")) as daemon, broker.client() as device:
        await device.subscribe("home/lights/#")
        await device.publish("home/washer/state", "running")
        await device.publish("home/doorbell", "pressed")
        await _until(lambda: bool(daemon.seen("[MQTT] 门铃")))
        assert not daemon.seen("[MQTT提醒]")  # "running" does not meet when=done
        await device.publish("home/washer/state", "done")
        await _until(lambda: bool(daemon.seen("[MQTT提醒]")))
        notice = daemon.seen("[MQTT提醒]")[0]
        assert "Laundry Washer" in notice and "done" in notice and "Owner, Mia" in notice, notice

        reply = await daemon.say("开客厅的灯")
        assert "published 2 bytes to home/lights/living/set" in reply, reply
        async with asyncio.timeout(10):
            message = await anext(aiter(device.messages))
        assert (str(message.topic), message.payload) == ("home/lights/living/set", b"ON")
        reply = await daemon.say("解除警报")
        assert "publishing to 'home/alarm/set' is not allowed" in reply and "home/lights/+/set" in reply, reply


async def test_wrong_password_is_a_plugin_error(broker: Broker, tmp_path: Path) -> None:
    async with serve(tmp_path, *_connection(broker, "wrong-password")) as daemon:
        doctor = await daemon.served.cli_output("doctor")
        assert "plugin mqtt" in doctor and "plugin.mqtt.username and plugin.mqtt.password" in doctor, doctor
        assert (await daemon.say("hello")) == "got: hello"


def test_topic_patterns_conditions_and_settings() -> None:
    assert topic_matches("home/+/set", "home/fan/set")
    assert not topic_matches("home/+/set", "home/fan/speed/set")
    assert topic_matches("home/#", "home/a/b/c") and topic_matches("#", "x")
    assert not topic_matches("home/fan", "home/fan/set")
    assert _holds("", "anything") and _holds("done", "DONE") and not _holds("done", "running")
    assert _holds("< 5", "3.2") and not _holds("< 5", "12") and not _holds("< 5", "off")
    assert _holds("!= off", "on")
    with pytest.raises(PluginError, match="needs a topic"):
        parse_subscriptions('[{"name": "x"}]')
    with pytest.raises(PluginError, match="not JSON"):
        parse_subscriptions("[{")
    with pytest.raises(PluginError, match="mode 'sometimes'"):
        parse_subscriptions('[{"topic": "a", "mode": "sometimes"}]')
