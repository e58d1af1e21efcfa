"""QQ for HomeAgent through OneBot v11 (NapCat, Lagrange, go-cqhttp...)."""

from __future__ import annotations

from homeagent_plugin_onebot.plugin import OneBotPlugin, make_plugin

__all__ = ["OneBotPlugin", "make_plugin"]
