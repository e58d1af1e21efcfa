"""Options and error handling shared by every command (defined in :mod:`homeagent_core.commands`)."""

from __future__ import annotations

from homeagent_core.commands import DataOption, JsonOption, echo_json, fail, handle_errors

__all__ = ["DataOption", "JsonOption", "echo_json", "fail", "handle_errors"]
