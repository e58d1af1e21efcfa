"""The home: Home Assistant control and watch latency, and how well names people say are matched.

Starts a real Home Assistant (``hass`` from ``.venv-ha``, ``make ha-venv``; the ``demo``
integration, onboarded and furnished as in ``plugins/homeagent-plugin-homeassistant/tests/
ha_server.py``) and an in-process agent (``AgentHarness``: the real kernel and tool registry)
with the ``homeassistant`` plugin connected to it over the WebSocket API. Then:

* ``home_call_p50_ms`` (and ``_p90``) — ``home_call`` through the tool registry, toggling the
  kitchen light: tool → ``call_service`` → Home Assistant changes the state → the plugin sees
  the ``state_changed`` event (the tool returns then);
* ``name_match_accuracy`` — the share of the phrase table (``tests/phrases.py``, ≥ 100 Chinese and
  English phrases, some of which must be answered with a question) matched exactly (target ≥ 0.95);
* ``watch_latency_ms`` (p50, and ``_p90``) — a repeating watch on a binary sensor: from just
  before the state is set in Home Assistant (REST ``POST /api/states``) to the notification
  injected into the agent's input queue (``watch_event_to_notify_p50_ms``: the part from the
  ``state_changed`` event's arrival at the plugin).

    python bench/bench_home.py [--calls 40] [--watches 20] [--json]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLUGIN = REPO / "plugins" / "homeagent-plugin-homeassistant"
for path in (REPO, REPO / "bench", PLUGIN, PLUGIN / "tests"):
    sys.path.insert(0, str(path))

from _harness import Row, arg_parser, emit, percentile  # noqa: E402
from ha_server import PLUGIN_ALIASES, running_home_assistant  # noqa: E402
from homeagent_plugin_homeassistant.plugin import HomeAssistantPlugin  # noqa: E402
from phrases import PHRASES  # noqa: E402

from homeagent_sdk.testing import AgentHarness  # noqa: E402


async def run(calls: int, watches: int) -> tuple[list[Row], dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="bench-home-") as tmp:
        async with running_home_assistant(Path(tmp) / "ha") as ha:
            plugin = HomeAssistantPlugin()
            harness = AgentHarness(Path(tmp) / "agent", memory=False)
            harness.register(plugin, "homeassistant")
            for key, value in {"url": ha.url, "token": ha.token, "expose_entities": "lock.front_door,lock.kitchen_door",
                               "aliases": json.dumps(PLUGIN_ALIASES, ensure_ascii=False),
                               "remember_home": False}.items():
                harness.set(f"plugin.homeassistant.{key}", value)
            async with harness:
                call_samples: list[float] = []
                for number in range(calls + 3):
                    service = "turn_off" if number % 2 == 0 else "turn_on"
                    started = time.perf_counter()
                    result = await harness.call_tool("home_call", domain="light", service=service, target="厨房灯")
                    elapsed = time.perf_counter() - started
                    if not result.success or "light.kitchen_lights" not in json.loads(result.result)["state_changed"]:
                        raise SystemExit(f"home_call did not see the state change: {result.result}")
                    if number >= 3:
                        call_samples.append(elapsed)

                right = 0
                for phrase, expected in PHRASES:
                    match = plugin.matcher.match(phrase)
                    right += (None if match.question else {e.entity_id for e in match.entities}) == expected
                accuracy = right / len(PHRASES)

                made = await harness.call_tool("home_watch_set", target="地下室漏水", state="on", repeat=True)
                assert made.success, made.result
                watch_samples: list[float] = []
                inside: list[float] = []  # from the state_changed event's arrival
                for _ in range(watches):
                    await ha.rest("POST", "/api/states/binary_sensor.basement_floor_wet", {"state": "off"})
                    before = len(plugin.fired)
                    started = time.monotonic()
                    await ha.rest("POST", "/api/states/binary_sensor.basement_floor_wet", {"state": "on"})
                    async with asyncio.timeout(30):
                        while len(plugin.fired) == before:
                            await asyncio.sleep(0.001)
                    watch_samples.append(plugin.fired[-1][2] - started)
                    inside.append(plugin.fired[-1][1])
    rows = [Row.of("home_call (tool → service → state_changed seen)", call_samples),
            Row.of("watch (state set → notification injected)", watch_samples),
            Row.of("watch (event arrived → notification injected)", inside),
            {"name": "name match accuracy", "phrases": len(PHRASES), "right": right, "accuracy": accuracy}]
    figures: dict[str, object] = {
        "home_call_p50_ms": round(statistics.median(call_samples) * 1e3, 2),
        "home_call_p90_ms": round(percentile(call_samples, 90) * 1e3, 2),
        "name_match_accuracy": round(accuracy, 4),
        "name_match_phrases": len(PHRASES),
        "watch_latency_ms": round(statistics.median(watch_samples) * 1e3, 2),
        "watch_latency_p90_ms": round(percentile(watch_samples, 90) * 1e3, 2),
        "watch_event_to_notify_p50_ms": round(statistics.median(inside) * 1e3, 2),
    }
    return rows, figures


def main() -> None:
    parser = arg_parser(__doc__ or "")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--watches", type=int, default=20)
    args = parser.parse_args()
    rows, figures = asyncio.run(run(args.calls, args.watches))
    emit(args, "Home Assistant", rows, figures)


if __name__ == "__main__":
    main()
