"""Durations as people write them in settings: ``30s``, ``5m``, ``2h``, ``1h30m``, ``500ms``."""

from __future__ import annotations

import re

__all__ = ["format_duration", "parse_duration"]

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """Seconds in ``text``; a bare number means seconds.

    Raises:
        ValueError: ``text`` is not a duration (the message shows the accepted forms).
    """
    cleaned = text.strip().lower().replace(" ", "")
    if not cleaned:
        raise ValueError("empty duration; write e.g. 30s, 5m, 2h or 1h30m")
    try:
        seconds = float(cleaned)
    except ValueError:
        pos, seconds = 0, 0.0
        for match in _PART.finditer(cleaned):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos != len(cleaned) or pos == 0:
            raise ValueError(f"invalid duration {text!r}; write e.g. 30s, 5m, 2h or 1h30m") from None
    if seconds < 0:
        raise ValueError(f"invalid duration {text!r}: negative")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest exact spelling of ``seconds`` (``90`` → ``1m30s``)."""
    if seconds != int(seconds):
        return f"{round(seconds * 1000)}ms"
    rest, parts = int(seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts) or "0s"
