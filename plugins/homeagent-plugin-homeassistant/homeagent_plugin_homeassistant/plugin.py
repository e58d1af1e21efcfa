"""The ``homeassistant`` plugin: see and control the house through Home Assistant.

Tools (their rights come from the person policy, ``homeagent people``):

* ``home_state(target)``, ``home_list(area?, domain?)``, ``home_history(target, since)`` — read;
* ``home_call(domain, service, target, data?)`` — control an exposed, non-sensitive entity;
* ``home_secure_call(...)`` — the same for sensitive ones (locks, alarm panels, cameras, garage
  doors and gates): by default an adult's call waits for the owner's approval and a child's is
  refused, so a child cannot unlock the door;
* ``home_watch_set / home_watch_list / home_watch_cancel`` — watches (:mod:`.watches`): when one
  fires, an input ``[家居提醒] …`` naming whom to tell enters on the ``home`` input channel as an
  L3 interrupt; the turn it starts answers in the web UI, and can send it on to people's chat
  doors (``output_send__<door>``).

Targets are what people say (:mod:`.matcher <homeagent_plugin_homeassistant.match>`); only
exposed entities are visible (:class:`~.catalog.Exposure`). A wrong token or an unreachable
server fails the plugin's start with a message saying which (``homeagent doctor``, the plugins
page); the daemon runs on. A connection lost later is reopened with backoff, and calls made
meanwhile fail with a message saying so. Registry changes (areas, names, aliases, hidden
entities) and entities that appear after the connection are followed by reloading the
registries (coalesced, :data:`REGISTRY_SETTLE_S`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from homeagent_plugin_homeassistant.catalog import READ_ONLY_DOMAINS, Catalog, Exposure, HomeEntity
from homeagent_plugin_homeassistant.client import HAAuthError, HAClient, HAError, HAUnavailable
from homeagent_plugin_homeassistant.match import Matcher
from homeagent_plugin_homeassistant.watches import Watch, WatchEngine, WatchStore, parse_condition
from homeagent_sdk import (
    NOTIFY_EVENT,
    ChannelDef,
    ChannelRegistry,
    ConfigDef,
    InjectOptions,
    PluginSDK,
    Priority,
    SettingsRegistry,
    ToolError,
    ToolRegistryProtocol,
    Triple,
    hookimpl,
)
from homeagent_sdk.channels import Backoff, reconnect_setting
from homeagent_sdk.current import CURRENT_PRINCIPAL
from homeagent_sdk.errors import PluginError

__all__ = ["CHANNEL", "HomeAssistantPlugin", "make_plugin", "parse_since"]

log = logging.getLogger("homeagent.plugin.homeassistant")

NAME = "homeassistant"
CHANNEL = "home"
#: Registry changes that move, rename, hide or add entities: the catalog reloads on each.
REGISTRY_EVENTS = ("entity_registry_updated", "area_registry_updated", "device_registry_updated")
#: Seconds to wait after a registry change before reloading (a burst becomes one reload).
REGISTRY_SETTLE_S = 0.5
#: How long home_call waits for Home Assistant to report the new state.
SETTLE = 5.0
_HISTORY_ROWS = 50
#: What people say for "everyone at home" in a watch's notify list.
_EVERYONE = frozenset({"全家", "全家人", "家里人", "家人", "大家", "所有人", "everyone", "everybody", "all", "family",
                       "the family", "household"})
_ME = frozenset({"我", "me", "myself"})
_SPAN = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|seconds?|秒|m|min|mins|minutes?|分钟|分|h|hr|hrs|hours?|小时|个小时|d|days?|天)\s*(ago|前|以前|之前)?\s*$"
)
_MY_ROOM = re.compile(r"我的房间|我房间|我屋里|我屋|我卧室|my room|my bedroom", re.IGNORECASE)
_UNIT = {"s": 1, "秒": 1, "m": 60, "分": 60, "h": 3600, "小": 3600, "个": 3600, "d": 86400, "天": 86400}



def _span(said: str) -> float | None:
    """Seconds of ``2h`` / ``30 minutes`` / ``3小时`` / ``10分钟`` / ``半小时``, None if not a span."""
    if said in ("半小时", "half an hour"):
        return 1800.0
    found = _SPAN.match(said)
    if not found:
        return None
    unit = found.group(2)
    return float(found.group(1)) * _UNIT.get(unit[:1], 1)


def parse_since(text: str, now: datetime) -> datetime:
    """A start time: ``2h``, ``30 minutes``, ``3小时``, ``半小时``, ``today``, ``昨天``, ISO 8601.

    Raises:
        ToolError: none of those.
    """
    said = " ".join(str(text or "").strip().casefold().split())
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    days = {"今天": 0, "today": 0, "昨天": 1, "yesterday": 1}
    if said in days:
        return midnight - timedelta(days=days[said])
    seconds = _span(said)
    if seconds is not None:
        return now - timedelta(seconds=seconds)
    try:
        when = datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise ToolError(
            f"since {text!r} is not a time; use a span such as 2h, 30 minutes, 3小时, 半小时, today, 昨天, "
            "or an ISO 8601 time"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=now.tzinfo)


def _duration(text: str) -> float:
    """``10m``, ``10分钟``, ``90``, empty → seconds; a clear error otherwise."""
    said = " ".join(str(text or "").strip().casefold().split())
    if not said:
        return 0.0
    if re.fullmatch(r"\d+(\.\d+)?", said):
        return float(said)
    seconds = _span(said)
    if seconds is None:
        raise ToolError(f"duration {text!r} is not a duration; use 10m, 30s, 2h, 10分钟 or a number of seconds")
    return seconds


def _aliases(raw: Any) -> dict[str, list[str]]:
    """The ``aliases`` setting: JSON ``{"lock.front_door": ["前门", "大门"]}``."""
    if not raw:
        return {}
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, dict) or not all(isinstance(v, list) for v in value.values()):
        raise PluginError(
            'plugin.homeassistant.aliases must be a JSON object of entity id -> list of names, e.g. '
            '{"lock.front_door": ["前门", "大门"]}', plugin_name=NAME,
        )
    return {str(k): [str(n) for n in v] for k, v in value.items()}


#: How a guest's principal is stored as a watch's creator.
GUEST = "(guest)"


def notified(watch: Watch) -> list[str]:
    """Whose phones a fired watch goes to (``NOTIFY_EVENT`` persons): the people it names ("全家" is
    everyone, "我" its creator), else its creator; a guest's watch reaches no phone.
    """
    if watch.created_by == GUEST:
        return []
    out: list[str] = []
    for name in watch.notify or (watch.created_by,):
        folded = name.casefold()
        person = "*" if folded in _EVERYONE else watch.created_by if folded in _ME else name
        if person not in out:
            out.append(person)
    return out


class HomeAssistantPlugin:
    """The plugin object (``make_plugin`` gives each agent its own)."""

    name = NAME

    def __init__(self) -> None:
        self.sdk: PluginSDK | None = None
        self.client: HAClient | None = None
        self.catalog = Catalog(Exposure())
        self.matcher = Matcher([])
        self.watches: WatchEngine | None = None
        self._waiters: dict[str, list[asyncio.Future[HomeEntity]]] = {}
        self._remembered = False
        self._seen_at = 0.0  # when the last state_changed event arrived (monotonic)
        self._tasks: set[asyncio.Task[None]] = set()
        self._loading: asyncio.Task[None] | None = None  # a registry reload waiting or running
        self._arrived: list[tuple[str, dict[str, Any] | None]] | None = None  # state changes during a load
        #: (watch id, seconds from the state change's event to the notification, monotonic time it was sent)
        self.fired: list[tuple[str, float, float]] = []

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        for definition in (
            ConfigDef(key="url", type="string", default="http://homeassistant.local:8123", category="connection",
                      restart_required=True, description="Home Assistant's address (http(s)://host:8123)."),
            ConfigDef(key="token", type="password", default="", secret=True, category="connection",
                      restart_required=True,
                      description="A long-lived access token (Home Assistant: your profile → Security → "
                      "Long-lived access tokens)."),
            ConfigDef(key="timeout", type="float", default=10.0, min=1, max=120, category="connection",
                      description="Seconds to wait for Home Assistant to answer a command."),
            reconnect_setting(),
            ConfigDef(key="expose_domains", type="string",
                      default="light,switch,climate,cover,media_player,sensor,binary_sensor", category="exposure",
                      restart_required=True,
                      description="Comma-separated domains whose entities the agent may see (and control, unless "
                      "read-only: sensors)."),
            ConfigDef(key="expose_areas", type="string", default="", category="exposure", restart_required=True,
                      description="Comma-separated areas (names or aliases) whose every entity is exposed."),
            ConfigDef(key="expose_entities", type="string", default="", category="exposure", restart_required=True,
                      description="Comma-separated entity ids exposed besides the domains and areas "
                      "(e.g. lock.front_door)."),
            ConfigDef(key="hide_entities", type="string", default="", category="exposure", restart_required=True,
                      description="Comma-separated entity ids never exposed."),
            ConfigDef(key="aliases", type="json", default="", category="exposure", restart_required=True,
                      description='More names for entities, JSON: {"lock.front_door": ["前门", "大门"]} (Home '
                      "Assistant's own entity aliases count too)."),
            ConfigDef(key="remember_home", type="bool", default=True, category="memory",
                      description="Put the areas and the exposed devices in the memory graph (device located_in "
                      "area), so the agent knows the home."),
        ):
            registry.add(definition)

    @hookimpl
    def register_input_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChannelDef(name=CHANNEL, description="Home Assistant watches firing ([家居提醒] …)"))

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.home_state, parallel_safe=True)
        registry.add(self.home_list, parallel_safe=True)
        registry.add(self.home_history, parallel_safe=True)
        registry.add(self.home_call, timeout=30)
        registry.add(self.home_secure_call, timeout=30)
        registry.add(self.home_watch_set)
        registry.add(self.home_watch_list, parallel_safe=True)
        registry.add(self.home_watch_cancel)

    @hookimpl
    async def startup(self, sdk: PluginSDK) -> None:
        settings = sdk.settings
        token = str(settings.get("token", "") or "").strip()
        if not token:
            raise PluginError(
                "plugin.homeassistant.token is not set: create a long-lived access token in Home Assistant "
                "(profile → Security) and run `homeagent config set plugin.homeassistant.token <token>`",
                plugin_name=NAME,
            )
        url = str(settings.get("url", "") or "")
        self.catalog = Catalog(
            Exposure.from_settings(
                str(settings.get("expose_domains", "") or ""), str(settings.get("expose_areas", "") or ""),
                str(settings.get("expose_entities", "") or ""), str(settings.get("hide_entities", "") or ""),
            ),
            _aliases(settings.get("aliases", "")),
        )
        try:
            client = HAClient(url, token, on_event=self._on_event, on_connect=self._reload,
                              backoff=Backoff.from_settings(settings),
                              timeout=float(settings.get("timeout", 10.0) or 10.0))
        except ValueError as exc:
            raise PluginError(f"plugin.homeassistant.url: {exc}", plugin_name=NAME) from None
        self.sdk = sdk
        store = await asyncio.to_thread(WatchStore, sdk.data_dir / "watches.db")
        self.watches = WatchEngine(store, self._fire)
        await self.watches.load()
        self.client = client
        try:
            await client.start()
        except HAAuthError as exc:
            self.client = None
            await self._close_watches()
            raise PluginError(
                f"{exc}: make a new long-lived access token in Home Assistant (profile → Security) and run "
                "`homeagent config set plugin.homeassistant.token <token>`", plugin_name=NAME,
            ) from None
        except (HAUnavailable, HAError) as exc:
            self.client = None
            await client.close()
            await self._close_watches()
            raise PluginError(
                f"{exc}. Check that Home Assistant runs and that plugin.homeassistant.url "
                f"({url}) is its address, then restart HomeAgent", plugin_name=NAME,
            ) from None
        except BaseException:
            self.client = None
            await client.close()
            await self._close_watches()
            raise
        log.info("homeassistant: connected to %s (Home Assistant %s), %d entities exposed", client.url,
                 client.version, len(self.catalog.exposed()))

    @hookimpl
    async def shutdown(self) -> None:
        if self.client is not None:
            await self.client.close()
            self.client = None
        for task in list(self._tasks):
            task.cancel()
        await self._close_watches()

    async def _close_watches(self) -> None:
        if self.watches is not None:
            await self.watches.close()
            await asyncio.to_thread(self.watches.store.close)
            self.watches = None

    # ------------------------------------------------------------------ state

    async def _reload(self) -> None:
        """After each (re)connect: follow state and registry changes, load everything, re-check the watches."""
        client = self._client()
        for event_type in ("state_changed", *REGISTRY_EVENTS):
            await client.subscribe(event_type)
        await self._load()
        if self.watches is not None:
            for watch in list(self.watches.watches.values()):
                entity = self.catalog.entities.get(watch.entity_id)
                if entity is not None:
                    self.watches.seen(entity.entity_id, entity.state, entity.last_changed, only=watch.id, initial=True)
        if not self._remembered and self.sdk is not None and self.sdk.settings.get("remember_home", True):
            self._remembered = True
            self._spawn(self._remember())

    async def _remember(self) -> None:
        """Areas and exposed devices into the memory graph (public memory API)."""
        assert self.sdk is not None
        triples = [
            Triple(e.name, "located_in", e.area, subject_type="device", object_type="area",
                   sentence_text=f"{e.name} ({e.entity_id}) is in the {e.area}")
            for e in self.catalog.exposed() if e.area
        ]
        triples += [
            Triple(alias, "alias_of", area, subject_type="area", object_type="area")
            for area, aliases in self.catalog.areas.items() for alias in aliases
        ]
        try:
            for start in range(0, len(triples), 50):
                await self.sdk.memory.commit(triples[start:start + 50])
        except Exception as exc:
            log.warning("homeassistant: the home could not be put in memory: %s", exc)

    async def _load(self) -> None:
        """Rebuild the catalog from the registries and the states (state changes meanwhile kept)."""
        client = self._client()
        self._arrived = []
        try:
            areas = await client.command("config/area_registry/list")
            devices = await client.command("config/device_registry/list")
            listed = await client.command("config/entity_registry/list")
            extended = await client.command("config/entity_registry/get_entries",
                                            entity_ids=[e["entity_id"] for e in listed]) if listed else {}
            registry = [e for e in (extended or {}).values() if e]
            states = await client.command("get_states")
            self.catalog.load(states, areas, devices, registry)
            # Changes that arrived while loading: keep those newer than the snapshot.
            loaded = {str(s.get("entity_id")): str(s.get("last_updated") or "") for s in states}
            for entity_id, new_state in self._arrived:
                if new_state is None or str(new_state.get("last_updated") or "") >= loaded.get(entity_id, ""):
                    self.catalog.update(new_state, entity_id)
        finally:
            self._arrived = None
        self.matcher = Matcher(self.catalog.exposed(), self.catalog.areas)

    def _load_soon(self) -> None:
        """Reload the registries shortly (coalesced): an area, a name or an entity changed."""
        if self._loading is not None and not self._loading.done():
            return

        async def run() -> None:
            await asyncio.sleep(REGISTRY_SETTLE_S)  # one reload for a burst (integrations load many at once)
            try:
                await self._load()
            except (HAError, ToolError) as exc:
                log.warning("homeassistant: reloading the registries failed: %s; the next change tries again", exc)

        self._loading = asyncio.get_running_loop().create_task(run(), name="homeassistant-registries")
        self._tasks.add(self._loading)
        self._loading.add_done_callback(self._tasks.discard)

    def _on_event(self, event: dict[str, Any]) -> None:
        if event.get("event_type") in REGISTRY_EVENTS:
            self._load_soon()
            return
        data = event.get("data") or {}
        entity_id = str(data.get("entity_id") or "")
        if not entity_id:
            return
        seen = time.monotonic()
        if self._arrived is not None:
            self._arrived.append((entity_id, data.get("new_state")))
        if data.get("new_state") is not None and not self.catalog.knows(entity_id):
            self._load_soon()  # a new entity (or one that came back after a restart): its area is in the registry
        entity = self.catalog.update(data.get("new_state"), entity_id)
        if entity is None:
            return
        for future in self._waiters.pop(entity_id, []):
            if not future.done():
                future.set_result(entity)
        if self.watches is not None:
            self._seen_at = seen
            self.watches.seen(entity_id, entity.state, entity.last_changed)

    async def _fire(self, watch: Watch, state: str, held: float) -> None:
        assert self.sdk is not None
        entity = self.catalog.entities.get(watch.entity_id)
        name = entity.name if entity is not None else watch.entity_id
        unit = str(entity.attributes.get("unit_of_measurement") or "") if entity is not None else ""
        asker = watch.created_by if watch.created_by and watch.created_by != GUEST else ""
        named = [asker or "设置这个提醒的人" if n.casefold() in _ME else n for n in watch.notify]
        who = "、".join(named) if named else asker or "设置这个提醒的人"
        since = f"，已持续 {int(held)} 秒" if held else ""
        note = f"（{watch.message}）" if watch.message else ""
        text = (f"[家居提醒] {name}（{watch.entity_id}）现在是 {state}{unit}{since}{note}。"
                f"请告诉：{who}。[{watch.id}]")
        started = self._seen_at or time.monotonic()
        # Straight to their phones first: a leak must not wait on a model that may not answer.
        body = f"{state}{unit}{f' ({int(held)} s)' if held else ''}{f' — {watch.message}' if watch.message else ''}"
        for person in notified(watch):
            self.sdk.events.publish(NOTIFY_EVENT, {"person": person, "title": name, "body": body,
                                                   "tag": f"home-{watch.id}"})
        await self.sdk.io.inject_text(text, CHANNEL, InjectOptions(priority=Priority.L3))
        self.sdk.events.publish("home_watch_fired", {**watch.to_dict(), "state": state, "text": text})
        done = time.monotonic()
        self.fired.append((watch.id, done - started, done))
        log.info("homeassistant: %s fired (%s is %s)", watch.id, watch.entity_id, state)

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _client(self) -> HAClient:
        """The connected client; a clear error while Home Assistant is away."""
        client = self.client
        if client is None:
            raise ToolError("the Home Assistant plugin has not started (see `homeagent doctor`)")
        if not client.connected.is_set():
            raise ToolError(
                f"Home Assistant at {client.url} is not connected ({client.last_error or 'connecting'}); HomeAgent "
                "reconnects on its own: try again in a moment"
            )
        return client

    async def _rooms(self, target: str, person: str) -> str:
        """``target`` with "我房间" / "my room" replaced by the area the memory says is ``person``'s
        (a relation between the person and an area, e.g. ``Mia room 卧室``)."""
        text = str(target)
        found = _MY_ROOM.search(text)
        owner = person.strip()
        if found is None:
            return text
        if not owner:
            raise ToolError(f"「{target}」 names someone's room: pass person (who is speaking) so I can look it up")
        if self.sdk is None:
            return text
        try:
            relations = await self.sdk.memory.relations(owner)
        except Exception as exc:
            log.info("homeassistant: memory lookup for %s failed: %s", owner, exc)
            relations = []
        for relation in relations:
            for other in (relation.target_name, relation.source_name):
                area, _label = self.matcher.area_in(" ".join(other.casefold().split()))
                if area:
                    return text[:found.start()] + area + " " + text[found.end():]
        raise ToolError(
            f"I do not know which room is {owner}'s: tell me (e.g. \"{owner}的房间是卧室\", stored with "
            "memory_commit as {owner} room <area>), or name the room"
        )

    def _resolve(self, target: str, *, domain: str = "", many: bool = False) -> list[HomeEntity]:
        match = self.matcher.match(str(target), domain=domain, many=many)
        if match.question or not match.entities:
            raise ToolError(match.question)
        return match.entities

    # ------------------------------------------------------------------ tools: read

    async def home_state(self, target: str, person: str = "") -> dict[str, Any]:
        """The state of a device or sensor in the home (Home Assistant), found by what the person said.

        Args:
            target: what the person calls it, Chinese or English: 客厅的灯, 卧室空调, 现在客厅几度,
                洗衣机, front door, all the lights, 我房间的灯; or an entity id such as light.kitchen_lights.
            person: who is speaking, when the target says "my room" / 我房间 (looked up in memory).
        """
        self._client()
        entities = self._resolve(await self._rooms(target, person))
        return {"entities": [e.summary() for e in entities]}

    async def home_list(self, area: str = "", domain: str = "") -> dict[str, Any]:
        """The devices of the home the agent may see, optionally of one area and/or domain.

        Args:
            area: an area name or alias (客厅, Living Room), or empty for all.
            domain: a Home Assistant domain (light, climate, cover, sensor, lock, ...), or empty for all.
        """
        self._client()
        entities = self.catalog.exposed()
        if area:
            wanted, _label = self.matcher.area_in(" ".join(str(area).casefold().split()))
            if not wanted:
                known = ", ".join(sorted(self.catalog.areas)) or "none"
                raise ToolError(f"no area called {area!r}; the areas are: {known}")
            entities = [e for e in entities if e.area == wanted]
        if domain:
            entities = [e for e in entities if e.domain == domain.strip()]
        return {"count": len(entities), "entities": [e.summary() for e in entities[:200]]}

    async def home_history(self, target: str, since: str = "today") -> dict[str, Any]:
        """How a device's state changed since a time (Home Assistant's recorder).

        Args:
            target: the device, as the person said it (洗衣机, front door, 客厅温度).
            since: from when: 2h, 30 minutes, 3小时, 半小时, today, 昨天, or ISO 8601.
        """
        client = self._client()
        entities = self._resolve(target)
        start = parse_since(since, datetime.now(UTC))
        try:
            result = await client.command(
                "history/history_during_period", start_time=start.isoformat(),
                entity_ids=[e.entity_id for e in entities], minimal_response=True, no_attributes=True,
                significant_changes_only=False,
            )
        except HAError as exc:
            raise ToolError(str(exc)) from None
        out: dict[str, Any] = {}
        for entity in entities:
            rows = (result or {}).get(entity.entity_id, [])
            changes = [
                {"state": row.get("s"), "at": datetime.fromtimestamp(float(row.get("lu") or row.get("lc") or 0),
                                                                     UTC).isoformat(timespec="seconds")}
                for row in rows
            ]
            out[entity.entity_id] = {"name": entity.name, "changes": changes[-_HISTORY_ROWS:],
                                     "total": len(changes)}
        return {"since": start.isoformat(timespec="seconds"), "history": out}

    # ------------------------------------------------------------------ tools: control

    async def home_call(
        self, domain: str, service: str, target: str, data: dict[str, Any] | None = None, person: str = ""
    ) -> dict[str, Any]:
        """Control a device in the home: call a Home Assistant service on what the person named.

        Args:
            domain: the service's domain: light, switch, climate, cover, media_player, fan, ...
            service: the service: turn_on, turn_off, toggle, set_temperature, set_hvac_mode,
                open_cover, close_cover, media_pause, volume_set, ...
            target: the device as the person said it (客厅的灯, 卧室空调, all the lights) or an entity id.
            data: the service's fields, e.g. {"temperature": 22} or {"brightness_pct": 40}.
            person: who is speaking, when the target says "my room" / 我房间 (looked up in memory).
        """
        return await self._call(domain, service, await self._rooms(target, person), data, secure=False)

    async def home_secure_call(
        self, domain: str, service: str, target: str, data: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Control a sensitive device (lock, alarm panel, camera, garage door or gate).

        Anyone but the owner needs the owner's approval for this; a child may not use it.

        Args:
            domain: lock, alarm_control_panel, camera or cover.
            service: e.g. unlock, lock, open, alarm_arm_away, alarm_disarm, open_cover, close_cover.
            target: the device as the person said it (前门, garage door) or an entity id.
            data: the service's fields, e.g. {"code": "1234"}.
        """
        return await self._call(domain, service, target, data, secure=True)

    async def _call(
        self, domain: str, service: str, target: str, data: dict[str, Any] | None, *, secure: bool
    ) -> dict[str, Any]:
        client = self._client()
        domain, service = str(domain).strip(), str(service).strip()
        if not re.fullmatch(r"[a-z0-9_]+", domain) or not re.fullmatch(r"[a-z0-9_]+", service):
            raise ToolError(f"domain {domain!r} and service {service!r} must be Home Assistant names such as "
                            "light and turn_off")
        if domain in READ_ONLY_DOMAINS:
            raise ToolError(f"{domain} entities are read-only; use home_state to read them")
        if data is not None and not isinstance(data, dict):
            raise ToolError('data must be an object of the service\'s fields, e.g. {"temperature": 22}')
        entities = self._resolve(target, domain=domain)
        sensitive = [e for e in entities if e.sensitive]
        if sensitive and not secure:
            names = ", ".join(f"{e.name} ({e.entity_id})" for e in sensitive)
            raise ToolError(f"{names} is a sensitive device; home_call does not control it. Use home_secure_call, "
                            "which asks the owner first (and is not allowed to children)")
        if secure and len(sensitive) != len(entities):
            names = ", ".join(e.entity_id for e in entities if not e.sensitive)
            raise ToolError(f"{names} is not a sensitive device; use home_call for it")
        ids = [e.entity_id for e in entities]
        loop = asyncio.get_running_loop()
        waits = {i: loop.create_future() for i in ids}
        for entity_id, future in waits.items():
            self._waiters.setdefault(entity_id, []).append(future)
        try:
            await client.command("call_service", domain=domain, service=service, service_data=dict(data or {}),
                                 target={"entity_id": ids})
        except HAUnavailable as exc:
            raise ToolError(str(exc)) from None
        except HAError as exc:
            raise ToolError(f"Home Assistant refused {domain}.{service} on {', '.join(ids)}: {exc}") from None
        changed: list[str] = []
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SETTLE):
                for entity_id, future in waits.items():
                    await future
                    changed.append(entity_id)
        for entity_id, future in waits.items():
            if not future.done():
                future.cancel()
                waiting = self._waiters.get(entity_id, [])
                if future in waiting:
                    waiting.remove(future)
        return {
            "called": f"{domain}.{service}",
            "entities": [self.catalog.entities[i].summary() for i in ids if i in self.catalog.entities],
            "state_changed": changed,
        }

    # ------------------------------------------------------------------ tools: watches

    async def home_watch_set(
        self, target: str, state: str, duration: str = "", notify: str = "", message: str = "", repeat: bool = False
    ) -> str:
        """Watch a device and tell people when its state is (or stays) as given: 洗衣机好了告诉我 (power < 5),
        门开着超过10分钟就提醒全家 (state open, duration 10m, notify 全家).

        Args:
            target: the device as the person said it (洗衣机, front door, 地下室漏水).
            state: the state to watch for: off, on, open, closed, locked, unlocked, or a comparison
                such as "< 5" or "> 30" for a number (power in W, temperature).
            duration: how long it must stay so before anyone is told (10m, 10分钟, 30s); empty = at once.
            notify: whom to tell, comma-separated person names, or 全家 / everyone; empty = the person asking.
            message: a note to pass on (洗衣机好了，记得晾衣服).
            repeat: keep watching after it fired (tell again each time it happens).
        """
        self._client()
        engine = self._engine()
        entities = self._resolve(target)
        if len(entities) != 1:
            raise ToolError("a watch follows one device; name one of them")
        entity = entities[0]
        try:
            condition = parse_condition(state)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        people = tuple(p.strip() for p in re.split(r"[,，、;；]", str(notify)) if p.strip())
        principal = CURRENT_PRINCIPAL.get()
        creator = "" if principal is None else principal.person or GUEST  # "" (no principal): the owner
        watch = await asyncio.to_thread(engine.store.add, entity.entity_id, condition, _duration(duration), people,
                                        " ".join(str(message).split())[:500], bool(repeat), creator)
        engine.add(watch, entity.state, entity.last_changed)
        return (f"{watch.id} set: when {entity.name} ({entity.entity_id}) is {condition}"
                f"{f' for {int(watch.duration)} s' if watch.duration else ''}, tell "
                f"{', '.join(people) or 'the person asking'}{' (every time)' if repeat else ' (once)'}")

    async def home_watch_list(self) -> dict[str, Any]:
        """The watches set on the home's devices."""
        engine = self._engine()
        return {"watches": [w.to_dict() for w in engine.watches.values()]}

    async def home_watch_cancel(self, watch_id: str) -> str:
        """Cancel a watch.

        Args:
            watch_id: its id from home_watch_set or home_watch_list, e.g. watch_3.
        """
        engine = self._engine()
        try:
            removed = await engine.remove(str(watch_id))
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        if not removed:
            raise ToolError(f"no watch {watch_id!r}; home_watch_list shows them")
        return f"{watch_id} cancelled"

    def _engine(self) -> WatchEngine:
        if self.watches is None:
            raise ToolError("the Home Assistant plugin has not started")
        return self.watches


def make_plugin() -> HomeAssistantPlugin:
    return HomeAssistantPlugin()
