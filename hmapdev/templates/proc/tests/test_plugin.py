"""Tests of __plugin_name__ that run without a daemon."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from plugin import Plugin

from homeagent_sdk import StageContext


def test_greet_says_hello() -> None:
    assert asyncio.run(Plugin().__ident___greet("Ada")) == "Hello, Ada!"


def test_before_output_turns_wave_into_an_emoji() -> None:
    ctx = StageContext(final_text=":wave: hi")
    asyncio.run(Plugin().before_output(ctx))
    assert ctx.final_text == "👋 hi"


def test_send_appends_to_the_outbox(tmp_path: Path) -> None:
    plugin = Plugin()
    plugin.outbox = tmp_path / "outbox.txt"
    assert plugin.send("one", {}, "text")["status"] == "sent"
    assert plugin.outbox.read_text(encoding="utf-8") == "one\n"
