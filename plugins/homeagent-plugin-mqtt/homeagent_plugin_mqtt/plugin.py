"""The ``mqtt`` plugin: what devices without Home Assistant say over MQTT, and a guarded publish.

One broker connection (aiomqtt; TLS with a CA file or the system's, user name and password),
kept open with backoff. The owner configures ``subscriptions`` (JSON list)::

    [{"topic": "home/washer/state", "name": "洗衣机", "when": "done", "notify": "Owner, Mia"},
     {"topic": "home/doorbell", "mode": "input"}]

* a ``watch`` (the default) turns a message whose payload meets ``when`` (``done``, ``on``,
  ``< 5``, ``> 30``; empty = every message) into ``[MQTT提醒] 洗衣机：done。请告诉：Owner, Mia``,
  an L3 interrupt on the ``mqtt`` input channel (the turn answers in the web UI and can pass it
  on to people's chat doors);
* an ``input`` puts every message in the input queue as ``[MQTT] <name>: <payload>``.

``mqtt_publish(topic, payload)`` publishes only to topics matching ``publish_allow`` (MQTT
patterns, ``+`` one level, ``#`` the rest); anything else is refused naming the patterns.
Home Assistant MQTT discovery (``<discovery_prefix>/<component>/[<node>/]<object>/config``) is
read, so a subscribed state topic that a discovered device announced carries that device's
name, and ``mqtt_devices`` lists what was discovered.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any

from homeagent_sdk import (
    ChannelDef,
    ChannelRegistry,
    ConfigDef,
    InjectOptions,
    PluginSDK,
    Priority,
    SettingsRegistry,
    ToolError,
    ToolRegistryProtocol,
    hookimpl,
)
from homeagent_sdk.channels import Backoff, reconnect_setting
from homeagent_sdk.errors import PluginError

__all__ = ["CHANNEL", "MqttPlugin", "Subscription", "make_plugin", "topic_matches"]

log = logging.getLogger("homeagent.plugin.mqtt")

NAME = "mqtt"
CHANNEL = "mqtt"
MAX_PAYLOAD_SHOWN = 500
_COMPARE = re.compile(r"^\s*(<=|>=|<|>|!=|==|=)?\s*(.*?)\s*$")


def topic_matches(pattern: str, topic: str) -> bool:
    """Whether ``topic`` matches the MQTT filter ``pattern`` (``+`` one level, ``#`` the rest)."""
    want, have = pattern.split("/"), topic.split("/")
    for index, part in enumerate(want):
        if part == "#":
            return True
        if index >= len(have) or (part != "+" and part != have[index]):
            return False
    return len(want) == len(have)


def _holds(when: str, payload: str) -> bool:
    """``when`` against a payload: empty = always; ``< 5`` etc. on numbers; else equal (case-insensitive)."""
    found = _COMPARE.match(when or "")
    op, value = (found.group(1) or "==", found.group(2)) if found else ("==", "")
    if not value:
        return True
    if op in ("<", "<=", ">", ">="):
        try:
            number, limit = float(payload), float(value)
        except ValueError:
            return False
        return {"<": number < limit, "<=": number <= limit, ">": number > limit, ">=": number >= limit}[op]
    same = payload.strip().casefold() == value.casefold()
    return not same if op == "!=" else same


@dataclass(frozen=True)
class Subscription:
    """One configured subscription."""

    topic: str
    name: str = ""
    mode: str = "watch"
    when: str = ""
    notify: str = ""


def parse_subscriptions(raw: Any) -> list[Subscription]:
    """The ``subscriptions`` setting.

    Raises:
        PluginError: not a JSON list of objects with a ``topic`` and a known ``mode``.
    """
    if not raw:
        return []
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise PluginError(f"plugin.mqtt.subscriptions is not JSON ({exc})", plugin_name=NAME) from None
    example = '[{"topic": "home/washer/state", "name": "洗衣机", "when": "done", "notify": "Owner"}]'
    if not isinstance(value, list):
        raise PluginError(f"plugin.mqtt.subscriptions must be a JSON list, e.g. {example}", plugin_name=NAME)
    out: list[Subscription] = []
    for number, item in enumerate(value, 1):
        if not isinstance(item, dict) or not str(item.get("topic") or "").strip():
            raise PluginError(f"plugin.mqtt.subscriptions item {number} needs a topic, e.g. {example}",
                              plugin_name=NAME)
        mode = str(item.get("mode") or "watch")
        if mode not in ("watch", "input"):
            raise PluginError(f"plugin.mqtt.subscriptions item {number}: mode {mode!r} is not watch or input",
                              plugin_name=NAME)
        out.append(Subscription(str(item["topic"]).strip(), str(item.get("name") or ""), mode,
                                str(item.get("when") or ""), str(item.get("notify") or "")))
    return out


class MqttPlugin:
    """The plugin object (``make_plugin`` gives each agent its own)."""

    name = NAME

    def __init__(self) -> None:
        self.sdk: PluginSDK | None = None
        self.client: Any = None
        self.subscriptions: list[Subscription] = []
        self.allow: list[str] = []
        self.discovered: dict[str, dict[str, Any]] = {}  # state topic -> {name, component, device, ...}
        self.connected = asyncio.Event()
        self.last_error = ""
        self.notified: list[tuple[str, float]] = []  # (text, seconds from arrival to the inject)
        self._runner: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Future[None]] = set()

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        for definition in (
            ConfigDef(key="host", type="string", default="", category="connection", restart_required=True,
                      description="The MQTT broker's host name or address (empty: the plugin does not start)."),
            ConfigDef(key="port", type="int", default=1883, min=1, max=65535, category="connection",
                      restart_required=True, description="The broker's port (1883; 8883 for TLS)."),
            ConfigDef(key="tls", type="bool", default=False, category="connection", restart_required=True,
                      description="Connect over TLS, checking the broker's certificate."),
            ConfigDef(key="ca_file", type="string", default="", category="connection", restart_required=True,
                      description="With tls: a CA certificate file to check the broker against (empty: the "
                      "system's CAs)."),
            ConfigDef(key="username", type="string", default="", category="connection", restart_required=True,
                      description="User name at the broker (empty: anonymous)."),
            ConfigDef(key="password", type="password", default="", secret=True, category="connection",
                      restart_required=True, description="Password at the broker."),
            ConfigDef(key="client_id", type="string", default="homeagent", category="connection",
                      restart_required=True, description="The MQTT client id."),
            reconnect_setting(),
            ConfigDef(key="subscriptions", type="json", default="", category="topics", restart_required=True,
                      description='Topics to follow, JSON: [{"topic": "home/washer/state", "name": "洗衣机", '
                      '"when": "done", "notify": "Owner"}, {"topic": "home/doorbell", "mode": "input"}]. '
                      "A watch tells people when the payload meets `when`; an input passes every message on."),
            ConfigDef(key="publish_allow", type="string", default="", category="topics", restart_required=True,
                      description="Comma-separated topic patterns mqtt_publish may publish to (+ and # "
                      "wildcards); empty: mqtt_publish refuses everything."),
            ConfigDef(key="discovery_prefix", type="string", default="homeassistant", category="topics",
                      restart_required=True,
                      description="Home Assistant MQTT discovery prefix read for device names (empty: off)."),
        ):
            registry.add(definition)

    @hookimpl
    def register_input_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChannelDef(name=CHANNEL, description="MQTT messages on subscribed topics"))

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.mqtt_publish, timeout=30)
        registry.add(self.mqtt_devices, parallel_safe=True)

    @hookimpl
    async def startup(self, sdk: PluginSDK) -> None:
        settings = sdk.settings
        host = str(settings.get("host", "") or "").strip()
        if not host:
            raise PluginError("plugin.mqtt.host is not set: `homeagent config set plugin.mqtt.host <broker>`",
                              plugin_name=NAME)
        self.subscriptions = parse_subscriptions(settings.get("subscriptions", ""))
        self.allow = [p.strip() for p in str(settings.get("publish_allow", "") or "").split(",") if p.strip()]
        self.sdk = sdk
        first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._runner = asyncio.get_running_loop().create_task(self._run(host, first), name="mqtt")
        try:
            async with asyncio.timeout(30):
                await first
        except TimeoutError:
            await self.shutdown()
            raise PluginError(f"the MQTT broker at {host} did not answer within 30 s", plugin_name=NAME) from None
        except PluginError:
            await self.shutdown()
            raise

    @hookimpl
    async def shutdown(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._runner
            self._runner = None
        for task in list(self._tasks):
            task.cancel()

    # ------------------------------------------------------------------ connection

    def _client(self, host: str) -> Any:
        import aiomqtt

        assert self.sdk is not None
        settings = self.sdk.settings
        context = None
        if settings.get("tls", False):
            ca = str(settings.get("ca_file", "") or "")
            context = ssl.create_default_context(cafile=ca or None)
        return aiomqtt.Client(
            host, int(settings.get("port", 1883) or 1883),
            username=str(settings.get("username", "") or "") or None,
            password=str(settings.get("password", "") or "") or None,
            identifier=str(settings.get("client_id", "") or "homeagent"),
            tls_context=context, timeout=10,
        )

    async def _run(self, host: str, first: asyncio.Future[None]) -> None:
        import aiomqtt

        assert self.sdk is not None
        backoff = Backoff.from_settings(self.sdk.settings)
        prefix = str(self.sdk.settings.get("discovery_prefix", "") or "").strip().strip("/")
        while True:
            try:
                async with self._client(host) as client:
                    self.client = client
                    for topic in {s.topic for s in self.subscriptions}:
                        await client.subscribe(topic)
                    if prefix:
                        await client.subscribe(f"{prefix}/+/+/config")
                        await client.subscribe(f"{prefix}/+/+/+/config")
                    self.connected.set()
                    self.last_error = ""
                    backoff.reset()
                    if not first.done():
                        first.set_result(None)
                    log.info("mqtt: connected to %s", host)
                    async for message in client.messages:
                        self._on_message(str(message.topic), _text(message.payload), prefix)
            except asyncio.CancelledError:
                raise
            except aiomqtt.MqttError as exc:
                self.client = None
                self.connected.clear()
                self.last_error = str(exc)
                if not first.done():
                    refused = "not authori" in str(exc).lower() or "bad user" in str(exc).lower()
                    hint = ("check plugin.mqtt.username and plugin.mqtt.password" if refused else
                            "check plugin.mqtt.host, port and tls, and that the broker runs")
                    first.set_exception(PluginError(f"MQTT broker {host}: {exc}; {hint}", plugin_name=NAME))
                    return
                log.warning("mqtt: connection to %s lost (%s); reconnecting", host, exc)
            await backoff.sleep()

    def _on_message(self, topic: str, payload: str, prefix: str) -> None:
        arrived = time.monotonic()
        if prefix and topic.startswith(prefix + "/") and topic.endswith("/config"):
            self._discovered(topic, payload)
            return
        for sub in self.subscriptions:
            if topic_matches(sub.topic, topic):
                task = asyncio.ensure_future(self._deliver(sub, topic, payload, arrived))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _discovered(self, topic: str, payload: str) -> None:
        try:
            config = json.loads(payload) if payload else None
        except ValueError:
            log.info("mqtt: discovery message on %s is not JSON; ignored", topic)
            return
        if not isinstance(config, dict):
            return
        device = config.get("device") or config.get("dev") or {}
        name = str(config.get("name") or "")
        device_name = str(device.get("name") or "") if isinstance(device, dict) else ""
        full = f"{device_name} {name}" if device_name and name and name not in device_name else device_name or name
        state = str(config.get("state_topic") or config.get("stat_t") or "")
        entry = {"name": full or topic, "component": topic.split("/")[1],
                 "state_topic": state, "command_topic": str(config.get("command_topic") or config.get("cmd_t") or ""),
                 "config_topic": topic}
        self.discovered[state or topic] = entry

    def _name(self, sub: Subscription, topic: str) -> str:
        return sub.name or str(self.discovered.get(topic, {}).get("name") or "") or topic

    async def _deliver(self, sub: Subscription, topic: str, payload: str, arrived: float) -> None:
        assert self.sdk is not None
        shown = payload if len(payload) <= MAX_PAYLOAD_SHOWN else payload[:MAX_PAYLOAD_SHOWN] + "…"
        name = self._name(sub, topic)
        if sub.mode == "input":
            text = f"[MQTT] {name} ({topic}): {shown}"
            options = InjectOptions()
        else:
            if not _holds(sub.when, payload):
                return
            who = sub.notify or "设置这个提醒的人"
            text = f"[MQTT提醒] {name}（{topic}）：{shown}。请告诉：{who}。"
            options = InjectOptions(priority=Priority.L3)
        try:
            await self.sdk.io.inject_text(text, CHANNEL, options)
        except Exception as exc:
            log.warning("mqtt: a message on %s could not be passed on: %s", topic, exc)
            return
        self.notified.append((text, time.monotonic() - arrived))

    # ------------------------------------------------------------------ tools

    async def mqtt_publish(self, topic: str, payload: str, retain: bool = False) -> str:
        """Publish an MQTT message, to the topics the owner allowed (plugin.mqtt.publish_allow).

        Args:
            topic: the topic, without wildcards, e.g. home/fan/set.
            payload: the message, e.g. ON or {"state": "on"}.
            retain: whether the broker keeps it for later subscribers.
        """
        topic = str(topic).strip()
        if not topic or "+" in topic or "#" in topic:
            raise ToolError(f"topic {topic!r} must be one topic without + or # wildcards, e.g. home/fan/set")
        if not any(topic_matches(pattern, topic) for pattern in self.allow):
            allowed = ", ".join(self.allow) or "none (plugin.mqtt.publish_allow is empty)"
            raise ToolError(f"publishing to {topic!r} is not allowed; allowed topic patterns: {allowed}. "
                            "The owner sets them with `homeagent config set plugin.mqtt.publish_allow`")
        client = self.client
        if client is None or not self.connected.is_set():
            raise ToolError(f"the MQTT broker is not connected ({self.last_error or 'connecting'}); try again "
                            "in a moment")
        import aiomqtt

        try:
            await client.publish(topic, str(payload).encode(), qos=1, retain=bool(retain))
        except aiomqtt.MqttError as exc:
            raise ToolError(f"publishing to {topic} failed: {exc}") from None
        return f"published {len(str(payload).encode())} bytes to {topic}"

    async def mqtt_devices(self) -> dict[str, Any]:
        """The devices Home Assistant MQTT discovery announced on the broker, and the subscribed topics."""
        return {
            "discovered": sorted(self.discovered.values(), key=lambda d: str(d["name"])),
            "subscriptions": [dataclasses.asdict(s) for s in self.subscriptions],
            "connected": self.connected.is_set(),
        }


def _text(payload: Any) -> str:
    if isinstance(payload, bytes | bytearray):
        return bytes(payload).decode("utf-8", errors="replace")
    return "" if payload is None else str(payload)


def make_plugin() -> MqttPlugin:
    return MqttPlugin()
