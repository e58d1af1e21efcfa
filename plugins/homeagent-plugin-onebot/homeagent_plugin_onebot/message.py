"""OneBot v11 messages: segment arrays and CQ-code strings, both directions.

A message is either an array of segments ``{"type": "text", "data": {"text": "hi"}}`` or a
string with CQ codes ``hi[CQ:image,file=a.jpg,url=https://...]``. In CQ strings, text escapes
``&`` ``[`` ``]`` as ``&amp;`` ``&#91;`` ``&#93;``; parameter values also escape ``,`` as ``&#44;``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Parsed", "Segment", "cq_escape", "cq_unescape", "parse_cq", "parse_message", "render_segments"]

Segment = dict[str, Any]

_CQ = re.compile(r"\[CQ:([A-Za-z0-9_.-]+)((?:,[^,\]=]+=[^,\]]*)*)\]")


def cq_escape(text: str, *, param: bool = False) -> str:
    """Escape text (or, with ``param``, a parameter value) for a CQ string."""
    out = text.replace("&", "&amp;").replace("[", "&#91;").replace("]", "&#93;")
    return out.replace(",", "&#44;") if param else out


def cq_unescape(text: str) -> str:
    return text.replace("&#44;", ",").replace("&#91;", "[").replace("&#93;", "]").replace("&amp;", "&")


def parse_cq(message: str) -> list[Segment]:
    """A CQ-code string as a segment array."""
    segments: list[Segment] = []
    pos = 0
    for match in _CQ.finditer(message):
        if match.start() > pos:
            segments.append({"type": "text", "data": {"text": cq_unescape(message[pos : match.start()])}})
        data: dict[str, str] = {}
        for pair in match.group(2).split(",")[1:]:
            key, _, value = pair.partition("=")
            data[key] = cq_unescape(value)
        segments.append({"type": match.group(1), "data": data})
        pos = match.end()
    if pos < len(message):
        segments.append({"type": "text", "data": {"text": cq_unescape(message[pos:])}})
    return segments


@dataclass
class Parsed:
    """What a received message says, for the bridge.

    ``media`` holds ``(kind, data)`` of image / record / file / video segments (``data`` is the
    segment's ``data``: ``file``, ``url``, ``name``...); ``at_me`` is an @ of ``self_id``;
    ``reply_to`` the id of the message it answers; ``unknown`` the segment types not understood.
    """

    text: str = ""
    media: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    at_me: bool = False
    reply_to: str = ""
    unknown: list[str] = field(default_factory=list)
    malformed: int = 0


def parse_message(message: Any, self_id: str = "") -> Parsed:
    """Read a message (segment array or CQ string); never raises on odd input.

    Malformed segments are counted and skipped; unknown types become ``[type]`` in the text.
    """
    if isinstance(message, str):
        segments: list[Any] = parse_cq(message)
    elif isinstance(message, list):
        segments = message
    else:
        return Parsed(malformed=1)
    parsed = Parsed()
    texts: list[str] = []
    for seg in segments:
        if not isinstance(seg, dict) or not isinstance(seg.get("type"), str):
            parsed.malformed += 1
            continue
        kind = seg["type"]
        data = seg.get("data")
        if not isinstance(data, dict):
            data = {}
        if kind == "text":
            texts.append(str(data.get("text", "")))
        elif kind == "at":
            target = str(data.get("qq", ""))
            if self_id and target == str(self_id):
                parsed.at_me = True
            elif target == "all":
                texts.append("@全体成员 ")
            else:
                texts.append(f"@{data.get('name') or target} ")
        elif kind == "reply":
            parsed.reply_to = str(data.get("id", ""))
        elif kind == "face":
            texts.append("[表情]")
        elif kind in ("image", "record", "file", "video"):
            parsed.media.append((kind, data))
        else:
            parsed.unknown.append(kind)
            texts.append(f"[{kind}]")
    parsed.text = "".join(texts).strip()
    return parsed


def render_segments(segments: list[Segment]) -> str:
    """A segment array as a CQ string (for logs and implementations that want strings)."""
    out: list[str] = []
    for seg in segments:
        data = seg.get("data") or {}
        if seg.get("type") == "text":
            out.append(cq_escape(str(data.get("text", ""))))
        else:
            params = "".join(f",{k}={cq_escape(str(v), param=True)}" for k, v in data.items())
            out.append(f"[CQ:{seg.get('type')}{params}]")
    return "".join(out)
