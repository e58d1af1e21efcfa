"""The home as the agent sees it: exposed entities with their names, aliases, areas and state.

Built from Home Assistant's states and its area, device and entity registries, and kept current
by ``state_changed`` events. Exposure works like Assist's: only exposed entities are visible to
any tool. The owner exposes whole domains (default: lights, switches, climate, covers, media
players, sensors and binary sensors), whole areas, or single entities, and may hide single
entities. Sensitive entities (locks, alarm panels, cameras, garage doors and gates) are
controlled only through ``home_secure_call``, which the person policy lets an adult ask the
owner for and refuses a child.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_DOMAINS",
    "READ_ONLY_DOMAINS",
    "SENSITIVE_COVER_CLASSES",
    "SENSITIVE_DOMAINS",
    "Catalog",
    "Exposure",
    "HomeEntity",
]

DEFAULT_DOMAINS = ("light", "switch", "climate", "cover", "media_player", "sensor", "binary_sensor")
SENSITIVE_DOMAINS = ("lock", "alarm_control_panel", "camera")
SENSITIVE_COVER_CLASSES = ("garage", "gate", "door")
READ_ONLY_DOMAINS = ("sensor", "binary_sensor", "weather", "air_quality", "device_tracker", "person", "sun")

#: Attributes worth telling the model, in this order.
_SHOWN = (
    "unit_of_measurement", "device_class", "brightness", "color_temp_kelvin", "hvac_mode", "hvac_action",
    "current_temperature", "temperature", "target_temp_low", "target_temp_high", "current_humidity", "humidity",
    "fan_mode", "preset_mode", "current_position", "media_title", "media_artist", "volume_level", "source",
    "percentage",
)


@dataclass
class HomeEntity:
    """One entity, with what people may call it."""

    entity_id: str
    name: str
    state: str = "unknown"
    attributes: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    area: str = ""
    area_aliases: tuple[str, ...] = ()
    device: str = ""
    last_changed: str = ""

    @property
    def domain(self) -> str:
        return self.entity_id.split(".", 1)[0]

    @property
    def device_class(self) -> str:
        return str(self.attributes.get("device_class") or "")

    @property
    def sensitive(self) -> bool:
        return self.domain in SENSITIVE_DOMAINS or (
            self.domain == "cover" and self.device_class in SENSITIVE_COVER_CLASSES
        )

    def summary(self) -> dict[str, Any]:
        """What a tool answers about this entity."""
        out: dict[str, Any] = {"entity_id": self.entity_id, "name": self.name, "state": self.state}
        if self.area:
            out["area"] = self.area
        shown = {k: self.attributes[k] for k in _SHOWN if self.attributes.get(k) not in (None, "", [])}
        if shown:
            out["attributes"] = shown
        if self.last_changed:
            out["last_changed"] = self.last_changed
        if self.sensitive:
            out["sensitive"] = True
        return out


@dataclass(frozen=True)
class Exposure:
    """What the owner exposes (``plugin.homeassistant.expose_*`` / ``hide_entities``)."""

    domains: frozenset[str] = frozenset(DEFAULT_DOMAINS)
    areas: frozenset[str] = frozenset()
    entities: frozenset[str] = frozenset()
    hidden: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, domains: str, areas: str, entities: str, hidden: str) -> Exposure:
        return cls(_words(domains), frozenset(a.casefold() for a in _words(areas)), _words(entities), _words(hidden))

    def exposes(self, entity: HomeEntity) -> bool:
        if entity.entity_id in self.hidden:
            return False
        if entity.entity_id in self.entities or entity.domain in self.domains:
            return True
        names = {entity.area.casefold(), *(a.casefold() for a in entity.area_aliases)} - {""}
        return bool(names & self.areas)


def _words(text: str) -> frozenset[str]:
    return frozenset(w.strip() for w in str(text or "").replace("\n", ",").split(",") if w.strip())


class Catalog:
    """Every entity Home Assistant reported, and the exposed ones."""

    def __init__(self, exposure: Exposure, extra_aliases: Mapping[str, Iterable[str]] | None = None) -> None:
        self.exposure = exposure
        self.extra_aliases = {k: tuple(v) for k, v in (extra_aliases or {}).items()}
        self.entities: dict[str, HomeEntity] = {}
        self.areas: dict[str, tuple[str, ...]] = {}  # area name -> aliases
        self.skipped: set[str] = set()  # known to the registry, but disabled or hidden by the owner

    def load(
        self,
        states: list[dict[str, Any]],
        areas: list[dict[str, Any]],
        devices: list[dict[str, Any]],
        registry: list[dict[str, Any]],
    ) -> None:
        """Rebuild from ``get_states`` and the registries (``registry``: extended entries, with aliases)."""
        area_of = {a["area_id"]: (str(a.get("name") or ""), tuple(a.get("aliases") or ())) for a in areas}
        self.areas = dict(area_of.values())
        device_of = {
            d["id"]: (str(d.get("name_by_user") or d.get("name") or ""), d.get("area_id")) for d in devices
        }
        entries = {e["entity_id"]: e for e in registry}
        entities: dict[str, HomeEntity] = {}
        skipped: set[str] = set()
        for state in states:
            entity_id = str(state.get("entity_id") or "")
            if "." not in entity_id:
                continue
            entry = entries.get(entity_id, {})
            if entry.get("disabled_by") or entry.get("hidden_by"):
                skipped.add(entity_id)
                continue
            attributes = dict(state.get("attributes") or {})
            device_name, device_area = device_of.get(entry.get("device_id") or "", ("", None))
            area_id = entry.get("area_id") or device_area
            area, area_aliases = area_of.get(area_id, ("", ())) if area_id else ("", ())
            name = str(entry.get("name") or attributes.get("friendly_name") or entity_id.split(".", 1)[1])
            aliases = tuple(entry.get("aliases") or ()) + self.extra_aliases.get(entity_id, ())
            entities[entity_id] = HomeEntity(
                entity_id, name, str(state.get("state", "unknown")), attributes, aliases, area, area_aliases,
                device_name, str(state.get("last_changed") or ""),
            )
        self.entities = entities
        self.skipped = skipped

    def knows(self, entity_id: str) -> bool:
        """Whether the last load saw ``entity_id`` (kept or deliberately left out)."""
        return entity_id in self.entities or entity_id in self.skipped

    def update(self, new_state: Mapping[str, Any] | None, entity_id: str) -> HomeEntity | None:
        """Apply one ``state_changed``; the entity as it is now (None: gone, hidden or not loaded yet).

        An entity the last load did not see is not added here: its area, aliases and whether the
        owner hid it are in the registries, so the plugin reloads them (:meth:`knows`).
        """
        entity = self.entities.get(entity_id)
        if new_state is None:
            self.entities.pop(entity_id, None)
            return None
        if entity is None:
            return None
        entity.state = str(new_state.get("state", "unknown"))
        entity.attributes = dict(new_state.get("attributes") or {})
        entity.last_changed = str(new_state.get("last_changed") or entity.last_changed)
        return entity

    def exposed(self) -> list[HomeEntity]:
        return [e for e in self.entities.values() if self.exposure.exposes(e)]

    def get(self, entity_id: str) -> HomeEntity | None:
        entity = self.entities.get(entity_id)
        return entity if entity is not None and self.exposure.exposes(entity) else None
