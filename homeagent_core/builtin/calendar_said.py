"""Times, days and windows as people say them to the calendar tools, read in the household's zone.

:func:`list_window` is ``calendar_list``'s window (a day, a week or weekend, a time of day);
:func:`read_occurrence` names one occurrence of a series (an instant as ``calendar_list`` shows
it, a day, a week); :func:`read_when` and :func:`read_duration` read a new start and a length.
Everything is read with :func:`homeagent_core.builtin.when.parse_when`; what cannot be read is a
:class:`~homeagent_sdk.ToolError` that asks what was meant.
"""

from __future__ import annotations

import contextlib
import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from homeagent_core.builtin.when import WhenError, localize, parse_when
from homeagent_core.durations import parse_duration
from homeagent_sdk import ToolError

__all__ = [
    "RELATIVE",
    "WEEKS",
    "list_window",
    "midnight",
    "next_midnight",
    "read_bound",
    "read_duration",
    "read_occurrence",
    "read_when",
]

def list_window(from_: str, to: str, now: datetime, zone: ZoneInfo) -> tuple[datetime, datetime]:
    """The window ``calendar_list`` reads: ``from``/``to`` as said (a day, a week, a time of day), checked."""
    week = WEEKS.get(" ".join(from_.lower().split()))
    start = read_bound(from_, now, zone, "from")[0] if from_.strip() else now
    if week is not None and not to.strip():
        monday = midnight(now) - timedelta(days=now.weekday())
        start = max(midnight(monday + timedelta(days=week[0])), midnight(now))
        end = midnight(monday + timedelta(days=week[0] + week[1]))
    elif to.strip():
        end, end_is_day = read_bound(to, now, zone, "to")
        if end_is_day:
            end = next_midnight(end, zone)
    elif from_.strip():  # a day, or a time of day: until that day's end
        end = next_midnight(start, zone)
    else:
        end = start + timedelta(days=7)
    if end <= start:
        raise ToolError(f"to ({end.isoformat()}) is not after from ({start.isoformat()}); which window is meant?")
    if end - start > timedelta(days=366):
        raise ToolError("the window is longer than a year; ask for a shorter one")
    return start, end


_TIME_OF_DAY = re.compile(
    r"\d\s*[:：点點时時]|\d\s*(am|pm|h\b)|[零一二两三四五六七八九十]+\s*[点點]|早上|早晨|午|晚|夜|凌晨|"
    r"morning|noon|afternoon|evening|night|tonight|小时|分钟|hour|minute|T\d",
    re.IGNORECASE,
)
_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: Windows said as a week or a weekend: (first day, days) relative to this week's Monday.
WEEKS: dict[str, tuple[int, int]] = {
    "这周": (0, 7), "本周": (0, 7), "这个星期": (0, 7), "this week": (0, 7),
    "下周": (7, 7), "下个星期": (7, 7), "next week": (7, 7),
    "周末": (5, 2), "这周末": (5, 2), "本周末": (5, 2), "this weekend": (5, 2), "weekend": (5, 2),
    "下周末": (12, 2), "next weekend": (12, 2),
}
#: A time said relative to today (not to the occurrence's own day) when moving one occurrence.
RELATIVE = re.compile(
    r"今天|明天|后天|大后天|今晚|明晚|昨|[这本下上]个?(周|星期|礼拜|月)|[后以之]后|\d\s*(分钟|小时|天)|"
    r"today|tonight|tomorrow|yesterday|\b(this|next|last|coming)\b|\bin\s+\d|\d{4}-\d{2}-\d{2}|月.*[日号]",
    re.IGNORECASE,
)


def read_bound(text: str, now: datetime, zone: ZoneInfo, which: str) -> tuple[datetime, bool]:
    """A window bound and whether it names a whole day (then it is that day's local midnight)."""
    said = text.strip()
    week = WEEKS.get(" ".join(said.lower().split()))
    if week is not None:
        monday = midnight(now) - timedelta(days=now.weekday())
        return max(midnight(monday + timedelta(days=week[0])), midnight(now)), True
    if _ISO_DAY.match(said):
        try:
            day = datetime.fromisoformat(said)
        except ValueError:
            raise ToolError(f"{which}: {said!r} is not a date; which day is meant?") from None
        return day.replace(tzinfo=zone), True
    is_day = _TIME_OF_DAY.search(said) is None
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        # a day is read from today's midnight, so "今天"/"today" is not "already passed"
        at = parse_when(said, day_start if is_day else now, zone).at
    except WhenError as exc:
        if is_day:
            with contextlib.suppress(WhenError):
                return parse_when(said, now, zone).at, False
        raise ToolError(f"{which}: {exc}") from None
    if is_day:
        return at.replace(hour=0, minute=0, second=0, microsecond=0), True
    return at, False


def read_when(when: str, now: datetime, zone: ZoneInfo) -> datetime:
    try:
        return parse_when(str(when), now, zone).at
    except WhenError as exc:
        raise ToolError(str(exc)) from None


def read_occurrence(said: str, now: datetime, zone: ZoneInfo) -> tuple[datetime, datetime, bool]:
    """The window ``[start, end)`` an occurrence is named by: an instant (``start == end``), a day or a week.

    The flag is true for a time of day said in words (周四下午, Thursday 5pm): when no occurrence
    starts at that very instant, that day's only occurrence is meant.
    """
    text = said.strip()
    if not text:
        raise ToolError("occurrence is empty; which occurrence is meant (e.g. 这周四, 2026-12-24)?")
    week = WEEKS.get(" ".join(text.lower().split()))
    if week is not None:
        monday = midnight(now) - timedelta(days=now.weekday())
        return midnight(monday + timedelta(days=week[0])), midnight(monday + timedelta(days=week[0] + week[1])), False
    if re.match(r"^\d{4}-\d{2}-\d{2}[T ]\d", text):  # a start as calendar_list shows it; may be past
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ToolError(f"occurrence: {text!r} is not a date and time; give it as calendar_list shows it") from None
        if moment.tzinfo is None:
            moment = localize(moment, zone)[0]
        return moment, moment, False
    if _ISO_DAY.match(text):
        try:
            day = datetime.fromisoformat(text)
        except ValueError:
            raise ToolError(f"occurrence: {text!r} is not a date; which day is meant?") from None
        start = day.replace(tzinfo=zone)
        return start, next_midnight(start, zone), False
    at, is_day = read_bound(text, now, zone, "occurrence")
    return (at, next_midnight(at, zone), False) if is_day else (at, at, True)


def midnight(moment: datetime) -> datetime:
    """Local midnight of ``moment``'s day (in its own zone, DST-correct)."""
    zone = moment.tzinfo
    return datetime(moment.year, moment.month, moment.day, tzinfo=zone)


def next_midnight(moment: datetime, zone: ZoneInfo) -> datetime:
    local = moment.astimezone(zone)
    day = local.date() + timedelta(days=1)
    return datetime(day.year, day.month, day.day, tzinfo=zone)


def read_duration(text: str) -> timedelta:
    said = text.strip()
    try:
        seconds = parse_duration(said)
    except ValueError:
        seconds = _spoken_span(said)
    if seconds <= 0 or seconds > 366 * 86400:
        raise ToolError(f"duration {said!r} must be more than 0 and at most a year; how long is the event?")
    return timedelta(seconds=seconds)


def _spoken_span(said: str) -> float:
    """A span said in words ("半小时", "2小时", "90 minutes"), read by the reminders parser as "<span>后"."""
    reference = datetime(2001, 1, 1, tzinfo=ZoneInfo("UTC"))
    for attempt in (f"{said}后", f"in {said}"):
        with contextlib.suppress(WhenError):
            return (parse_when(attempt, reference, ZoneInfo("UTC")).at - reference).total_seconds()
    raise ToolError(f"duration {said!r} cannot be read; say e.g. 1h, 30m, 1h30m, 半小时 or 2小时")
