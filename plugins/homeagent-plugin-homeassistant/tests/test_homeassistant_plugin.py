"""The plugin in an in-process agent (the real kernel and memory) against a real Home Assistant."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ha_server import PLUGIN_ALIASES, HomeAssistant, running_home_assistant
from homeagent_plugin_homeassistant.plugin import HomeAssistantPlugin, notified, parse_since
from homeagent_plugin_homeassistant.watches import Watch, WatchEngine, WatchStore, parse_condition
from phrases import PHRASES

from homeagent_sdk import NOTIFY_EVENT, ToolError, Triple
from homeagent_sdk.testing import AgentHarness

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
async def home(tmp_path: Path) -> AsyncIterator[HomeAssistant]:
    async with running_home_assistant(tmp_path / "ha") as ha:
        yield ha


@pytest.fixture
async def agent(home: HomeAssistant, tmp_path: Path) -> AsyncIterator[tuple[AgentHarness, HomeAssistantPlugin]]:
    plugin = HomeAssistantPlugin()
    harness = AgentHarness(tmp_path / "agent")
    harness.register(plugin, "homeassistant")
    for key, value in {
        "url": home.url, "token": home.token, "expose_entities": "lock.front_door,lock.kitchen_door",
        "aliases": json.dumps(PLUGIN_ALIASES, ensure_ascii=False), "reconnect_min": 0.2,
    }.items():
        harness.set(f"plugin.homeassistant.{key}", value)
    async with harness:
        yield harness, plugin


async def _until(predicate: object, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.05)


async def test_names_people_use_match_the_demo_entities(agent: tuple[AgentHarness, HomeAssistantPlugin]) -> None:
    _, plugin = agent
    right = 0
    misses = []
    for phrase, expected in PHRASES:
        match = plugin.matcher.match(phrase)
        got = None if match.question else {e.entity_id for e in match.entities}
        right += got == expected
        if got != expected:
            misses.append((phrase, expected, got))
    assert len(PHRASES) >= 100
    assert right / len(PHRASES) >= 0.95, misses
    question = plugin.matcher.match("灯").question
    assert "could mean" in question and "light.bed_light" in question


async def test_read_control_exposure_and_history(agent: tuple[AgentHarness, HomeAssistantPlugin],
                                                 home: HomeAssistant) -> None:
    harness, _ = agent
    listed = await harness.call_tool("home_list", area="客厅")
    assert listed.success and "light.living_room_rgbww_lights" in listed.result
    assert "light.bed_light" not in listed.result
    hidden = await harness.call_tool("home_state", target="fan.living_room_fan")
    assert not hidden.success and "no exposed device matches" in hidden.result  # fans are not exposed by default
    sensor = await harness.call_tool("home_call", domain="sensor", service="turn_off", target="室外温度")
    assert not sensor.success and "read-only" in sensor.result
    bad = await harness.call_tool("home_list", area="阁楼")
    assert not bad.success and "no area called '阁楼'" in bad.result

    warmer = await harness.call_tool("home_call", domain="climate", service="set_temperature", target="卧室空调",
                                     data={"temperature": 20})
    assert warmer.success, warmer.result
    assert (await home.state("climate.hvac"))["attributes"]["temperature"] == 20
    for service in ("turn_off", "turn_on"):
        done = await harness.call_tool("home_call", domain="light", service=service, target="厨房灯")
        assert done.success and "light.kitchen_lights" in done.result
    states: list[str] = []
    async with asyncio.timeout(30):  # the recorder writes in the background
        while states[-2:] != ["off", "on"]:
            history = await harness.call_tool("home_history", target="厨房灯", since="1h")
            assert history.success, history.result
            states = [c["state"] for c in json.loads(history.result)["history"]["light.kitchen_lights"]["changes"]]
            await asyncio.sleep(0.2)
    lock = await harness.call_tool("home_call", domain="lock", service="unlock", target="前门")
    assert not lock.success and "home_secure_call" in lock.result
    unlocked = await harness.call_tool("home_secure_call", domain="lock", service="unlock", target="前门")
    assert unlocked.success, unlocked.result  # the owner may
    await home.wait_state("lock.front_door", "unlocked")


async def test_watches_fire_persist_and_cancel(agent: tuple[AgentHarness, HomeAssistantPlugin],
                                               home: HomeAssistant, tmp_path: Path) -> None:
    harness, plugin = agent
    pushed: list[dict[str, object]] = []
    harness.app.bus.subscribe(lambda event: pushed.append(event.data), NOTIFY_EVENT, label="test")
    made = await harness.call_tool("home_watch_set", target="走廊窗帘", state="closed", duration="1s",
                                   notify="全家", message="窗帘关了")
    assert made.success and "watch_1 set" in made.result, made.result
    other = await harness.call_tool("home_watch_set", target="地下室漏水", state="on", repeat=True)
    assert other.success and "watch_2" in other.result
    await home.rest("POST", "/api/services/cover/close_cover", {"entity_id": "cover.hall_window"})
    await _until(lambda: any(fired[0] == "watch_1" for fired in plugin.fired), timeout=30)
    # straight to the household's phones, whatever the model does with the turn it starts
    assert pushed[0] == {"person": "*", "title": "Hall Window", "body": "closed (1 s) — 窗帘关了",
                         "tag": "home-watch_1"}
    listed = json.loads((await harness.call_tool("home_watch_list")).result)["watches"]
    assert [w["id"] for w in listed] == ["watch_2"]  # the one-off is gone
    bad = await harness.call_tool("home_watch_set", target="洗衣机", state="< five")
    assert not bad.success and "needs a number" in bad.result
    store = WatchStore(tmp_path / "agent" / "plugin_data" / "homeassistant" / "watches.db")
    try:
        assert [w.id for w in store.all()] == ["watch_2"]  # on disk, for the next start
    finally:
        store.close()
    cancelled = await harness.call_tool("home_watch_cancel", watch_id="watch_2")
    assert cancelled.success
    again = await harness.call_tool("home_watch_cancel", watch_id="watch_2")
    assert not again.success and "no watch" in again.result


async def test_moves_renames_and_hiding_in_home_assistant_are_followed(
        agent: tuple[AgentHarness, HomeAssistantPlugin], home: HomeAssistant) -> None:
    harness, plugin = agent
    before = await harness.call_tool("home_list", area="厨房")
    assert before.success and "light.kitchen_lights" in before.result, before.result
    areas = {a["name"]: a["area_id"] for a in (await home.ws([{"type": "config/area_registry/list"}]))[0]}
    # The owner moves the kitchen light to the bedroom with a new name, and hides the bed light.
    await home.ws([
        {"type": "config/entity_registry/update", "entity_id": "light.kitchen_lights",
         "area_id": areas["Bedroom"], "aliases": ["厨房灯", "餐桌灯"]},
        {"type": "config/entity_registry/update", "entity_id": "light.bed_light", "hidden_by": "user"},
    ])

    def followed() -> bool:
        moved = plugin.catalog.get("light.kitchen_lights")
        return moved is not None and moved.area == "Bedroom" and plugin.catalog.get("light.bed_light") is None

    await _until(followed, timeout=30)
    listed = await harness.call_tool("home_list", area="卧室")
    assert "light.kitchen_lights" in listed.result and "light.bed_light" not in listed.result, listed.result
    assert [e.entity_id for e in plugin.matcher.match("餐桌灯").entities] == ["light.kitchen_lights"]
    # A hidden entity's state changes do not bring it back.
    await home.rest("POST", "/api/services/light/toggle", {"entity_id": "light.bed_light"})
    await home.rest("POST", "/api/services/light/turn_off", {"entity_id": "light.ceiling_lights"})
    await _until(lambda: (e := plugin.catalog.get("light.ceiling_lights")) is not None and e.state == "off")
    assert plugin.catalog.get("light.bed_light") is None
    hidden = await harness.call_tool("home_state", target="light.bed_light")
    assert not hidden.success and "(light.bed_light" not in hidden.result, hidden.result
    # A device added while the plugin runs is picked up, then placed in its area.
    await home.ws([{"type": "input_boolean/create", "name": "Guest Mode"}])
    await _until(lambda: "input_boolean.guest_mode" in plugin.catalog.entities, timeout=30)
    await home.ws([{"type": "config/entity_registry/update", "entity_id": "input_boolean.guest_mode",
                    "area_id": areas["Living Room"], "aliases": ["访客模式"]}])
    await _until(lambda: plugin.catalog.entities["input_boolean.guest_mode"].area == "Living Room", timeout=30)
    assert "访客模式" in plugin.catalog.entities["input_boolean.guest_mode"].aliases


async def test_the_home_is_in_memory(agent: tuple[AgentHarness, HomeAssistantPlugin]) -> None:
    harness, plugin = agent
    await _until(lambda: not plugin._tasks, timeout=30)
    relations = await harness.memory.relations("Living Room RGBWW Lights")
    located = [r.target_name.casefold() for r in relations if r.relation_type == "located_in"]
    assert "living room" in located, relations


def test_whose_phones_a_fired_watch_reaches() -> None:
    def watch(notify: tuple[str, ...], by: str) -> Watch:
        return Watch("watch_1", "lock.front_door", parse_condition("unlocked"), 0.0, notify, "", False, by)

    assert notified(watch((), "Mia")) == ["Mia"]  # nobody named: the person who set it
    assert notified(watch((), "")) == [""]  # set outside any conversation: the owner
    assert notified(watch(("我", "Dad", "me"), "Mia")) == ["Mia", "Dad"]
    assert notified(watch(("全家", "Mia"), "Dad")) == ["*", "Mia"]
    assert notified(watch(("Everyone",), "Dad")) == ["*"]
    assert notified(watch(("全家",), "(guest)")) == []  # a guest's watch reaches no phone


def test_times_conditions_and_errors() -> None:
    now = datetime(2026, 12, 6, 20, 30, tzinfo=UTC)
    assert parse_since("2h", now) == now - timedelta(hours=2)
    assert parse_since("3小时", now) == now - timedelta(hours=3)
    assert parse_since("半小时", now) == now - timedelta(minutes=30)
    assert parse_since("昨天", now) == datetime(2026, 12, 5, tzinfo=UTC)
    assert parse_since("2026-12-06T08:00:00+00:00", now).hour == 8
    with pytest.raises(ToolError, match="is not a time"):
        parse_since("soon-ish", now)
    assert parse_condition("关着").holds("off") and parse_condition("< 5").holds("3")
    assert parse_condition("!= locked").holds("unlocked") and not parse_condition("> 30").holds("unknown")


async def test_watch_engine_durations_repeats_and_reconnects(tmp_path: Path) -> None:
    fired: list[tuple[str, str, float]] = []

    async def fire(watch: Watch, state: str, held: float) -> None:
        fired.append((watch.id, state, held))

    store = WatchStore(tmp_path / "watches.db")
    engine = WatchEngine(store, fire)
    try:
        door = store.add("binary_sensor.door", parse_condition("on"), 0.2, ("全家",), "", True)
        washer = store.add("sensor.washer_power", parse_condition("< 5"), 0.0, (), "", False)
        engine.add(door, "off", "")
        engine.add(washer, "1200", "")
        now = datetime.now(UTC).isoformat()
        engine.seen("binary_sensor.door", "on", now)
        engine.seen("sensor.washer_power", "3.5", now)
        await _until(lambda: len(fired) == 2, timeout=10)
        assert sorted(f[0] for f in fired) == ["watch_1", "watch_2"]
        assert [w.id for w in store.all()] == ["watch_1"]  # the one-off is gone, the repeating one stays
        engine.seen("binary_sensor.door", "on", now, initial=True)  # a reconnect while still open
        assert not engine._timers  # nothing is going to tell again
        engine.seen("binary_sensor.door", "off", now)
        engine.seen("binary_sensor.door", "on", datetime.now(UTC).isoformat())
        await _until(lambda: len(fired) == 3, timeout=10)
        engine.seen("binary_sensor.door", "off", now)
        # open for longer than the duration before the watch was made: counts from last_changed
        engine.seen("binary_sensor.door", "on", (datetime.now(UTC) - timedelta(seconds=5)).isoformat(),
                    initial=True)
        await _until(lambda: len(fired) == 4, timeout=10)
    finally:
        await engine.close()
        store.close()


async def test_my_room_resolves_through_the_person(agent: tuple[AgentHarness, HomeAssistantPlugin]) -> None:
    harness, _ = agent
    await harness.memory.commit([Triple("Mia", "room", "卧室", subject_type="person", object_type="area")])
    state = await harness.call_tool("home_state", target="我房间的灯", person="Mia")
    assert state.success and "light.bed_light" in state.result, state.result
    nobody = await harness.call_tool("home_state", target="我房间的灯")
    assert not nobody.success and "pass person" in nobody.result
    unknown = await harness.call_tool("home_state", target="my room light", person="Leo")
    assert not unknown.success and "which room is Leo's" in unknown.result
