"""Home Assistant for HomeAgent: the home's devices as tools, with the people model's rights."""

from __future__ import annotations

from homeagent_plugin_homeassistant.plugin import HomeAssistantPlugin, make_plugin

__all__ = ["HomeAssistantPlugin", "make_plugin"]
