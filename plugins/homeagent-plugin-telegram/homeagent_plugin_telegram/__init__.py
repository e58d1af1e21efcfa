"""Telegram for HomeAgent, by long polling the Bot API."""

from __future__ import annotations

from homeagent_plugin_telegram.plugin import TelegramPlugin, make_plugin

__all__ = ["TelegramPlugin", "make_plugin"]
