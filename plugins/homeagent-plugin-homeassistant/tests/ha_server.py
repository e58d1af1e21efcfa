"""A real Home Assistant core on loopback, for the tests and the benchmark.

``hass -c <dir>`` runs from the venv of its own that ``make ha-venv`` builds (``.venv-ha`` at
the repository root: Home Assistant 2024.3, the last line that runs on Python 3.11, pins
aiohttp, cryptography and more than HomeAgent's venv can share). Its configuration loads the
``demo`` integration (lights, climate, covers, locks, sensors, binary sensors), ``config``
(the registries' WebSocket commands) and ``history``. Onboarding goes through Home Assistant's
own HTTP API, the way the frontend does it: create the owner (``/api/onboarding/users``), trade
the auth code for a token (``/auth/token``), then ask the WebSocket API for a long-lived access
token (``auth/long_lived_access_token``), which is what a household pastes into HomeAgent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets

from homeagent_sdk.testing import free_port

REPO = Path(__file__).resolve().parents[3]
HA_VENV = Path(os.environ.get("HOMEAGENT_HA_VENV", str(REPO / ".venv-ha")))
HASS = HA_VENV / "bin" / "hass"

CONFIGURATION = """\
homeassistant:
  name: Test Home
  latitude: 31.23
  longitude: 121.47
  elevation: 4
  unit_system: metric
  time_zone: UTC
  country: CN
demo:
onboarding:
config:
history:
input_boolean:
recorder:
  commit_interval: 0
logger:
  default: warning
http:
  server_host: 127.0.0.1
  server_port: {port}
"""

#: How the household set up its home in Home Assistant: areas with Chinese aliases, and the
#: demo entities placed in them (what the owner does once on HA's area and entity pages).
AREAS: dict[str, list[str]] = {
    "Living Room": ["客厅"],
    "Bedroom": ["卧室", "主卧"],
    "Kitchen": ["厨房"],
    "Office": ["书房", "办公室"],
    "Garage": ["车库"],
    "Hallway": ["门厅", "玄关", "走廊"],
    "Backyard": ["后院"],
    "Basement": ["地下室"],
    "Laundry": ["洗衣房"],
}
#: Entities without a unique id (the demo's locks) cannot be placed in HA's registry; the
#: plugin's own ``aliases`` setting names them.
PLUGIN_ALIASES: dict[str, list[str]] = {
    "lock.front_door": ["前门", "大门", "门锁", "大门锁"],
    "lock.kitchen_door": ["厨房门锁", "厨房后门"],
    "media_player.living_room": ["客厅电视", "客厅音箱"],
    "media_player.bedroom": ["卧室音箱", "卧室音响"],
    "media_player.kitchen": ["厨房音箱"],
    "switch.decorative_lights": ["装饰灯", "彩灯"],
    "switch.ac": ["空调插座"],
}
PLACEMENT: dict[str, tuple[str, list[str]]] = {
    "light.living_room_rgbww_lights": ("Living Room", ["客厅灯", "客厅的灯"]),
    "light.ceiling_lights": ("Living Room", ["吊灯", "客厅吊灯"]),
    "light.bed_light": ("Bedroom", ["床头灯", "卧室灯"]),
    "light.kitchen_lights": ("Kitchen", ["厨房灯"]),
    "light.office_rgbw_lights": ("Office", ["书房灯", "台灯"]),
    "light.entrance_color_white_lights": ("Hallway", ["门厅灯", "玄关灯"]),
    "climate.hvac": ("Bedroom", ["卧室空调", "空调"]),
    "climate.heatpump": ("Living Room", ["暖气", "地暖", "heating"]),
    "climate.ecobee": ("Office", ["书房空调"]),
    "sensor.outside_temperature": ("Backyard", ["室外温度", "外面温度"]),
    "sensor.outside_humidity": ("Backyard", ["室外湿度"]),
    "cover.living_room_window": ("Living Room", ["客厅窗帘"]),
    "cover.kitchen_window": ("Kitchen", ["厨房窗帘"]),
    "cover.hall_window": ("Hallway", ["走廊窗帘"]),
    "cover.garage_door": ("Garage", ["车库门"]),
    "sensor.power_consumption": ("Laundry", ["洗衣机", "washing machine", "washer"]),
    "binary_sensor.basement_floor_wet": ("Basement", ["地下室漏水", "漏水传感器"]),
    "binary_sensor.movement_backyard": ("Backyard", ["后院移动", "后院人体感应"]),
}


@dataclass
class HomeAssistant:
    """One running ``hass``: its URL, long-lived token and config folder."""

    config: Path
    port: int
    token: str = ""
    process: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.config / "hass.out"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/api/websocket"

    # ------------------------------------------------------------------ process

    async def start(self, timeout: float = 240.0) -> None:
        """Start ``hass`` and wait until its HTTP API answers."""
        if not HASS.exists():
            raise RuntimeError(
                f"Home Assistant is not installed at {HASS}: run `make ha-venv` at the repository root "
                "(or point HOMEAGENT_HA_VENV at a venv with homeassistant==2024.3.3)"
            )
        self.config.mkdir(parents=True, exist_ok=True)
        (self.config / "configuration.yaml").write_text(CONFIGURATION.format(port=self.port), encoding="utf-8")
        out = self.log.open("ab")
        self.process = subprocess.Popen(
            [str(HASS), "-c", str(self.config), "--skip-pip"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        out.close()
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=5) as http:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"hass exited with {self.process.returncode}:\n{self.tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    answer = await http.get(f"{self.url}/api/onboarding")
                    if answer.status_code in (200, 401):
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"hass did not answer within {timeout:g} s:\n{self.tail()}")
                await asyncio.sleep(0.2)
        await self._wait_entities(deadline)

    async def _wait_entities(self, deadline: float) -> None:
        """Until the demo's lights are there (its platforms load after the HTTP server)."""
        if not self.token:
            return
        while time.monotonic() < deadline:
            states = await self.rest("GET", "/api/states")
            if any(s["entity_id"] == "light.living_room_rgbww_lights" for s in states):
                return
            await asyncio.sleep(0.2)
        raise RuntimeError("the demo entities did not appear")

    async def stop(self) -> None:
        """SIGTERM, then wait (SIGKILL after 30 s)."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(proc.wait, 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait, 10)

    def tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    # ------------------------------------------------------------------ onboarding

    async def onboard(self) -> str:
        """Create the owner through the onboarding API and return a long-lived access token."""
        client_id = f"{self.url}/"
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(f"{self.url}/api/onboarding/users", json={
                "client_id": client_id, "name": "Owner", "username": "owner", "password": "correct horse battery",
                "language": "en",
            })
            answer.raise_for_status()
            code = answer.json()["auth_code"]
            answer = await http.post(f"{self.url}/auth/token", data={
                "grant_type": "authorization_code", "code": code, "client_id": client_id,
            })
            answer.raise_for_status()
            access = answer.json()["access_token"]
        result = await self.ws([{"type": "auth/long_lived_access_token", "client_name": "HomeAgent", "lifespan": 3650}],
                               token=access)
        self.token = str(result[0])
        return self.token

    async def ws(self, commands: list[dict[str, Any]], *, token: str = "") -> list[Any]:
        """Run WebSocket commands in order; their results (raises on an error)."""
        out: list[Any] = []
        async with websockets.connect(self.ws_url, max_size=None) as sock:
            assert json.loads(await sock.recv())["type"] == "auth_required"
            await sock.send(json.dumps({"type": "auth", "access_token": token or self.token}))
            answer = json.loads(await sock.recv())
            if answer["type"] != "auth_ok":
                raise RuntimeError(f"auth failed: {answer}")
            for number, command in enumerate(commands, 1):
                await sock.send(json.dumps({"id": number, **command}))
                while True:
                    message = json.loads(await sock.recv())
                    if message.get("id") == number and message.get("type") == "result":
                        break
                if not message["success"]:
                    raise RuntimeError(f"{command['type']}: {message['error']}")
                out.append(message["result"])
        return out

    async def rest(self, method: str, path: str, body: Any = None) -> Any:
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.request(method, f"{self.url}{path}", json=body,
                                        headers={"Authorization": f"Bearer {self.token}"})
            answer.raise_for_status()
            return answer.json()

    async def state(self, entity_id: str) -> dict[str, Any]:
        return dict(await self.rest("GET", f"/api/states/{entity_id}"))

    async def wait_state(self, entity_id: str, state: str, timeout: float = 20.0) -> dict[str, Any]:
        """Until ``entity_id`` is in ``state`` (bounded)."""
        async with asyncio.timeout(timeout):
            while True:
                current = await self.state(entity_id)
                if current["state"] == state:
                    return current
                await asyncio.sleep(0.1)

    async def furnish(self) -> None:
        """Set up areas (with Chinese aliases) and place the demo entities, as an owner would."""
        existing = (await self.ws([{"type": "config/area_registry/list"}]))[0]
        have = {a["name"]: a["area_id"] for a in existing}
        commands = [
            {"type": "config/area_registry/update", "area_id": have[name], "aliases": aliases}
            if name in have else {"type": "config/area_registry/create", "name": name, "aliases": aliases}
            for name, aliases in AREAS.items()
        ]
        created = await self.ws(commands) if commands else []
        have.update({a["name"]: a["area_id"] for a in created})
        await self.ws([
            {"type": "config/entity_registry/update", "entity_id": entity_id, "area_id": have[area], "aliases": aliases}
            for entity_id, (area, aliases) in PLACEMENT.items()
        ])


@contextlib.asynccontextmanager
async def running_home_assistant(config: Path) -> AsyncIterator[HomeAssistant]:
    """A started, onboarded and furnished Home Assistant; stopped at the end."""
    ha = HomeAssistant(config, free_port())
    try:
        await ha.start()
        await ha.onboard()
        await ha._wait_entities(time.monotonic() + 120)
        await ha.furnish()
        yield ha
    finally:
        await ha.stop()
