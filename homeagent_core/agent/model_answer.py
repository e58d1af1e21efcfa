"""The model's answer as the turn needs it: a whole answer or a stream read into one shape,
streamed tool-call fragments folded into calls, their arguments decoded the way the adapters do,
the assistant message that records them, and usage summed over the rounds of a turn.

:func:`read_answer` and :func:`read_stream` return ``{"content", "reasoning_content",
"tool_calls", "usage", "finish_reason"}``; they report text as it arrives through an ``emit``
callback (``emit("content_delta" | "reasoning_delta", text)``) and a restarted stream through
``reset``, so the turn decides where deltas go.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from homeagent_sdk.types import ToolCall

__all__ = [
    "add_usage", "assistant_message", "decode_arguments", "merge_fragment", "read_answer", "read_stream", "tool_call",
]

log = logging.getLogger(__name__)

#: Called with ``"content_delta"`` or ``"reasoning_delta"`` and the text that just arrived.
Emit = Callable[[str, str], None]


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


def read_answer(raw: dict[str, Any], rounds: int, emit: Emit) -> dict[str, Any]:
    """A provider's whole (unstreamed) answer in the turn's shape; its text is emitted at once."""
    content = raw.get("content") or ""
    reasoning = raw.get("reasoning_content") or ""
    if reasoning:
        emit("reasoning_delta", reasoning)
    if content:
        emit("content_delta", content)
    return {
        "content": content,
        "reasoning_content": reasoning,
        "tool_calls": [tool_call(c, rounds, i) for i, c in enumerate(raw.get("tool_calls") or ()) if c.get("name")],
        "usage": dict(raw.get("token_usage") or raw.get("usage") or {}),
        "finish_reason": raw.get("finish_reason") or "",
    }


async def read_stream(chunks: Any, rounds: int, emit: Emit, reset: Callable[[], None]) -> dict[str, Any]:
    """Read a provider's stream of chunks to its end into the turn's shape, emitting text as it comes.

    A chunk with ``reset`` (the provider restarted the answer) discards what was read so far and
    calls ``reset``; the stream is closed however reading ends.
    """
    content: list[str] = []
    reasoning: list[str] = []
    slots: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    finish = ""
    try:
        async for chunk in chunks:
            if chunk.get("reset"):
                content.clear()
                reasoning.clear()
                slots.clear()
                reset()
            text = chunk.get("content")
            if text:
                content.append(text)
                emit("content_delta", text)
            thought = chunk.get("reasoning_content")
            if thought:
                reasoning.append(thought)
                emit("reasoning_delta", thought)
            fragments = chunk.get("tool_calls")
            if fragments:
                for fragment in fragments:
                    merge_fragment(slots, fragment)
            if chunk.get("usage"):
                usage = dict(chunk["usage"])
            if chunk.get("finish_reason"):
                finish = chunk["finish_reason"]
            if chunk.get("done"):
                break
    finally:
        closer = getattr(chunks, "aclose", None)
        if closer is not None:
            await closer()
    calls = []
    for index in sorted(slots):
        slot = slots[index]
        if not slot["name"]:
            log.warning("streamed tool call without a name dropped (stream_index %s)", index)
            continue
        arguments = slot["arguments"] if slot["arguments"] is not None else decode_arguments("".join(slot["raw"]))
        calls.append(ToolCall(slot["id"] or f"call_{rounds + 1}_{index}", slot["name"], arguments))
    return {
        "content": "".join(content),
        "reasoning_content": "".join(reasoning),
        "tool_calls": calls,
        "usage": usage,
        "finish_reason": finish,
    }
