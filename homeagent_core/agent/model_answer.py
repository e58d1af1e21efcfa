"""The model's answer as the turn needs it: streamed tool-call fragments folded into calls,
their arguments decoded the way the adapters do, the assistant message that records them, and
usage summed over the rounds of a turn."""

from __future__ import annotations

import json
import logging
from typing import Any

from homeagent_sdk.types import ToolCall

__all__ = ["add_usage", "assistant_message", "decode_arguments", "merge_fragment", "tool_call"]

log = logging.getLogger(__name__)


def merge_fragment(slots: dict[int, dict[str, Any]], fragment: dict[str, Any]) -> None:
    """Fold one streamed tool-call fragment: flat or OpenAI-nested, arguments as text or object."""
    fn = fragment["function"] if isinstance(fragment.get("function"), dict) else {}
    index = fragment.get("stream_index", fragment.get("index", 0))
    slot = slots.get(index)
    if slot is None:
        slot = slots[index] = {"id": "", "name": "", "raw": [], "arguments": None}
    if fragment.get("id"):
        slot["id"] = fragment["id"]
    if fragment.get("name") or fn.get("name"):
        slot["name"] = fragment.get("name") or fn["name"]
    raw = fragment.get("raw_arguments", fn.get("arguments"))
    if isinstance(raw, dict):
        slot["arguments"] = raw
    elif raw:
        slot["raw"].append(raw if isinstance(raw, str) else json.dumps(raw))
    elif isinstance(fragment.get("arguments"), dict):
        slot["arguments"] = fragment["arguments"]
    elif isinstance(fragment.get("arguments"), str):
        slot["raw"].append(fragment["arguments"])


def decode_arguments(raw: str) -> dict[str, Any]:
    """Normalise streamed arguments as the adapters do: object, ``{"value": x}`` or ``{"raw": s}``."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        log.warning("tool call arguments are not valid JSON: %.200s", raw)
        return {"raw": raw}
    return value if isinstance(value, dict) else {"value": value}


def tool_call(raw: dict[str, Any], rounds: int, index: int) -> ToolCall:
    arguments = raw.get("arguments")
    if isinstance(arguments, str):
        arguments = decode_arguments(arguments)
    elif not isinstance(arguments, dict):
        arguments = {} if arguments is None else {"value": arguments}
    return ToolCall(raw.get("id") or f"call_{rounds + 1}_{index}", raw["name"], arguments)


def assistant_message(text: str, reasoning: str, calls: list[ToolCall]) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
            }
            for c in calls
        ],
    }
    if reasoning:
        message["reasoning_content"] = reasoning
    return message


def add_usage(total: dict[str, Any], usage: dict[str, Any]) -> None:
    for key, value in usage.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value
        elif key not in total:
            total[key] = value
