"""MQTT for HomeAgent: subscribed topics as watches and inputs, a guarded publish, discovery names."""

from __future__ import annotations

from homeagent_plugin_mqtt.plugin import MqttPlugin, make_plugin

__all__ = ["MqttPlugin", "make_plugin"]
