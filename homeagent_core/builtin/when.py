"""Times as people say them, in Chinese and English, read into an instant and an optional RRULE.

:func:`parse_when` takes what someone said ("明天早上7点", "下周三下午三点半", "in 2 hours",
"next Friday 9am", "每个工作日7点", "every other Tuesday", an ISO 8601 timestamp), a fixed
``now`` and the household's time zone, and returns a :class:`When`: the first due instant (an
aware datetime) and, for a repeating one, an RFC 5545 RRULE evaluated in local wall-clock time
(python-dateutil), so "every day at 8" stays at 8 across daylight-saving changes.

Conventions (documented in docs/REMINDERS.md):

- a day without a time of day means 09:00; a part of the day without an hour its usual hour
  (早上 08:00, 上午 09:00, 中午 12:00, 下午 15:00, 傍晚 18:00, 晚上 20:00; morning 08:00,
  noon 12:00, afternoon 15:00, evening 19:00, night/tonight 21:00);
- an hour without a part of the day is on the 24-hour clock; a time alone is its next
  occurrence (today, or tomorrow when it has passed); a date without a year is its next
  occurrence; a weekday alone is the coming one, "下周X"/"next X" the one in next week
  (weeks start on Monday), "下下周X" the one after;
- "每隔N周" (every N+1 weeks, "每隔一周" = every other week), "每N周" (every N weeks);
- a local time that does not exist (skipped by a daylight-saving change) is refused for a
  one-off reminder and moved forward by the gap for a repeating one; a time that exists twice
  means the first of the two.

Anything it cannot read raises :class:`WhenError`, whose message quotes the part it could not
read and asks what was meant; it never guesses.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

from dateutil.parser import isoparse
from dateutil.relativedelta import relativedelta
from dateutil.rrule import rrulestr

__all__ = ["EXAMPLES", "When", "WhenError", "localize", "next_occurrence", "parse_when"]

#: Shown in every "what did you mean" message.
EXAMPLES = "明天早上7点, 下周三下午3点半, 12月24日晚上8点, 每周一早上8点, in 2 hours, next Friday 9am, 2026-12-24T20:00"

_UTC = ZoneInfo("UTC")
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


class WhenError(ValueError):
    """A time expression that cannot be read; the message says what and asks what was meant."""


@dataclass(frozen=True)
class When:
    """The first due instant and, for a repeating reminder, its rule.

    ``rrule`` is an RFC 5545 RRULE value (``FREQ=WEEKLY;BYDAY=MO``) evaluated from ``start``
    (the first instant's local wall time, naive) in the household's zone; "" for a one-off.
    """

    at: datetime
    rrule: str = ""
    start: datetime | None = None


@dataclass
class _Spec:
    """What one expression said, before it is placed on the calendar."""

    offset: relativedelta | None = None
    exact_offset: bool = False  # "in 2 hours": keep the minutes and seconds of now
    day: int | None = None  # days from today
    week: tuple[int | None, int] | None = None  # (weeks ahead or None for "the coming", weekday)
    this_week: bool = False
    year: int | None = None
    month: int | None = None
    month_ahead: int = 0
    mday: int | None = None
    period: str = ""
    hour: int | None = None
    minute: int = 0
    bare_hour: bool = False  # "3点" / "at 3": no part of the day, no minutes on a clock face
    freq: str = ""
    interval: int = 1
    byday: list[int] = field(default_factory=list)
    bymonthday: int | None = None
    bymonth: int | None = None
    parts: list[str] = field(default_factory=list)

    def has_date(self) -> bool:
        return any(x is not None for x in (self.day, self.week, self.mday, self.offset))


# ---------------------------------------------------------------------------- numbers

_CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CN_NUMBER = re.compile(r"[零〇一二两三四五六七八九十百]+")


def _cn_value(text: str) -> int:
    if "十" not in text and "百" not in text:
        return int("".join(str(_CN_DIGITS[c]) for c in text))
    total, current = 0, 0
    for char in text:
        if char == "百":
            total += (current or 1) * 100
            current = 0
        elif char == "十":
            total += (current or 1) * 10
            current = 0
        else:
            current = _CN_DIGITS[char]
    return total + current


def _normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).strip().lower()
    text = text.replace("：", ":").replace("，", ",")
    return _CN_NUMBER.sub(lambda m: str(_cn_value(m.group())), text)


# ---------------------------------------------------------------------------- Chinese

_ZH_WEEKDAY = r"([1-7]|日|天)"
_ZH_UNIT = r"(年|个月|周|个星期|星期|个礼拜|礼拜|天|日|个小时|小时|个钟头|钟头|分钟|分|秒钟|秒)"
_ZH_PERIODS = {
    "凌晨": "early",
    "清晨": "morning",
    "早上": "morning",
    "早晨": "morning",
    "早": "morning",
    "上午": "forenoon",
    "中午": "noon",
    "午后": "afternoon",
    "下午": "afternoon",
    "傍晚": "dusk",
    "晚上": "evening",
    "夜里": "evening",
    "夜晚": "evening",
    "晚": "evening",
    "半夜": "late",
    "深夜": "late",
}
_ZH_DAYS = {
    "今天": (0, ""),
    "今日": (0, ""),
    "今晚": (0, "evening"),
    "今早": (0, "morning"),
    "明天": (1, ""),
    "明日": (1, ""),
    "明晚": (1, "evening"),
    "明早": (1, "morning"),
    "大后天": (3, ""),
    "后天": (2, ""),
}


def _zh_weekday(token: str) -> int:
    return 6 if token in ("日", "天", "7") else int(token) - 1


def _zh_unit(spec: _Spec, amount: float, unit: str) -> None:
    unit = unit.removeprefix("个")
    whole = int(amount)
    delta = {
        "年": relativedelta(years=whole, months=round((amount - whole) * 12)),
        "月": relativedelta(months=whole, days=round((amount - whole) * 30)),
        "周": relativedelta(days=round(amount * 7)),
        "星期": relativedelta(days=round(amount * 7)),
        "礼拜": relativedelta(days=round(amount * 7)),
        "天": relativedelta(hours=round(amount * 24)),
        "日": relativedelta(hours=round(amount * 24)),
        "小时": relativedelta(minutes=round(amount * 60)),
        "钟头": relativedelta(minutes=round(amount * 60)),
        "分钟": relativedelta(seconds=round(amount * 60)),
        "分": relativedelta(seconds=round(amount * 60)),
        "秒钟": relativedelta(seconds=round(amount)),
        "秒": relativedelta(seconds=round(amount)),
    }[unit]
    spec.offset = (spec.offset or relativedelta()) + delta
    spec.exact_offset = spec.exact_offset or unit in ("小时", "钟头", "分钟", "分", "秒钟", "秒")


def _zh_duration(spec: _Spec, text: str) -> bool:
    """``3天后``, ``1个半小时后``, ``半小时后``, ``2小时30分钟后``; True when it read ``text``."""
    pos = 0
    part = re.compile(r"(?:(\d+(?:\.\d+)?)(个)?(半)?|半个?)" + _ZH_UNIT + r"(半)?")
    found = []
    while (m := part.match(text, pos)) is not None:
        amount = float(m.group(1)) if m.group(1) else 0.5
        if m.group(3) or m.group(5):
            amount += 0.5
        found.append((amount, m.group(4)))
        pos = m.end()
    if not found or text[pos:] not in ("后", "以后", "之后", "过后"):
        return False
    for amount, unit in found:
        _zh_unit(spec, amount, unit)
    spec.parts.append(text)
    return True


_ZH_TOKENS: list[tuple[str, re.Pattern[str]]] = [
    (
        "every_other_week",
        re.compile(r"(?:每隔|隔)(\d+)?个?(?:周|星期|礼拜)(?:的)?((?:(?:周|星期|礼拜)?[1-7日天][、,和及与]?)*)"),
    ),
    ("every_n", re.compile(r"每隔(\d+)个?(天|日|小时|钟头|分钟|个月|月)")),
    ("every_n_plain", re.compile(r"每(\d+)个?(天|日|周|星期|礼拜|小时|钟头|分钟|个月|月)")),
    ("weekdays", re.compile(r"(?:每个?)?工作日")),
    ("weekend", re.compile(r"每个?周末")),
    ("every_week", re.compile(r"每个?(?:周|星期|礼拜)((?:(?:周|星期|礼拜)?[1-7日天][、,和及与]?)+)")),
    ("every_month", re.compile(r"每个?月(?:的)?(\d{1,2})(?:日|号)")),
    ("every_year", re.compile(r"每年(?:的)?(\d{1,2})月(\d{1,2})(?:日|号)?")),
    ("every_day", re.compile(r"每(?:天|日)")),
    ("every_hour", re.compile(r"每个?(?:小时|钟头)")),
    ("day", re.compile("|".join(_ZH_DAYS))),
    ("next_month_day", re.compile(r"(下下|下)个?月(?:的)?(\d{1,2})(?:日|号)")),
    ("date", re.compile(r"(?:(\d{4})年|(明|今)年)?(\d{1,2})月(\d{1,2})(?:日|号)?")),
    ("mday", re.compile(r"(\d{1,2})(?:日|号)")),
    ("week", re.compile(r"(这|本|下下|下)?个?(?:周|星期|礼拜)" + _ZH_WEEKDAY)),
    ("period", re.compile("|".join(sorted(_ZH_PERIODS, key=len, reverse=True)))),
    ("clock", re.compile(r"(\d{1,2}):(\d{2})")),
    ("time", re.compile(r"(\d{1,2})(?:点钟?|时)(?:(\d)刻|(\d{1,2})分?|(半)|(整))?")),
    ("filler", re.compile(r"[,\s的在于到]+|左右|提醒我?|的时候")),
]


def _zh_days(text: str) -> list[int]:
    return [_zh_weekday(t) for t in re.findall(r"[1-7日天]", text)]


def _apply_zh(spec: _Spec, kind: str, m: re.Match[str]) -> None:
    g = m.groups()
    if kind == "every_other_week":
        spec.freq, spec.interval = "WEEKLY", int(g[0] or 1) + 1
        spec.byday = _zh_days(g[1] or "")
    elif kind == "every_n":
        unit = g[1].removeprefix("个")
        spec.freq = {
            "天": "DAILY",
            "日": "DAILY",
            "小时": "HOURLY",
            "钟头": "HOURLY",
            "分钟": "MINUTELY",
            "月": "MONTHLY",
        }[unit]
        # 每隔30分钟 is every 30 minutes; 每隔一天 / 每隔一个月 is every other day / month
        spec.interval = int(g[0]) + (0 if spec.freq in ("HOURLY", "MINUTELY") else 1)
    elif kind == "every_n_plain":
        unit = g[1].removeprefix("个")
        spec.freq = {
            "天": "DAILY",
            "日": "DAILY",
            "周": "WEEKLY",
            "星期": "WEEKLY",
            "礼拜": "WEEKLY",
            "小时": "HOURLY",
            "钟头": "HOURLY",
            "分钟": "MINUTELY",
            "月": "MONTHLY",
        }[unit]
        spec.interval = int(g[0])
    elif kind == "weekdays":
        spec.freq, spec.byday = "WEEKLY", [0, 1, 2, 3, 4]
    elif kind == "weekend":
        spec.freq, spec.byday = "WEEKLY", [5, 6]
    elif kind == "every_week":
        spec.freq, spec.byday = "WEEKLY", _zh_days(g[0])
    elif kind == "every_month":
        spec.freq, spec.bymonthday = "MONTHLY", int(g[0])
    elif kind == "every_year":
        spec.freq, spec.bymonth, spec.bymonthday = "YEARLY", int(g[0]), int(g[1])
    elif kind == "every_day":
        spec.freq = "DAILY"
    elif kind == "every_hour":
        spec.freq = "HOURLY"
    elif kind == "day":
        _set(spec, "day", _ZH_DAYS[m.group()][0], m.group())
        if _ZH_DAYS[m.group()][1]:
            _set(spec, "period", _ZH_DAYS[m.group()][1], m.group())
    elif kind == "next_month_day":
        spec.month_ahead = 2 if g[0] == "下下" else 1
        _set(spec, "mday", int(g[1]), m.group())
    elif kind == "date":
        if g[0]:
            spec.year = int(g[0])
        elif g[1]:
            spec.year = -1 if g[1] == "明" else 0  # resolved against now
        spec.month = int(g[2])
        _set(spec, "mday", int(g[3]), m.group())
    elif kind == "mday":
        _set(spec, "mday", int(g[0]), m.group())
    elif kind == "week":
        ahead = {"下": 1, "下下": 2, "这": 0, "本": 0}.get(g[0] or "")
        spec.this_week = g[0] in ("这", "本")
        _set(spec, "week", (ahead, _zh_weekday(g[1])), m.group())
    elif kind == "period":
        _set(spec, "period", _ZH_PERIODS[m.group()], m.group())
    elif kind == "clock":
        _set(spec, "hour", int(g[0]), m.group())
        spec.minute = int(g[1])
    elif kind == "time":
        _set(spec, "hour", int(g[0]), m.group())
        spec.minute = int(g[1]) * 15 if g[1] else int(g[2]) if g[2] else 30 if g[3] else 0
        spec.bare_hour = True


def _set(spec: _Spec, name: str, value: object, said: str) -> None:
    if getattr(spec, name) not in (None, "") and name != "period":
        raise WhenError(
            f"{said!r} says the {'time' if name == 'hour' else 'day'} a second time; which one do you mean? e.g. "
            + EXAMPLES
        )
    if name == "period" and spec.period and spec.period != value:
        raise WhenError(f"{said!r} names a second part of the day; which one do you mean?")
    setattr(spec, name, value)
    spec.parts.append(said)


def _read_zh(text: str) -> _Spec:
    spec = _Spec()
    compact = re.sub(r"\s+", "", text)
    if _zh_duration(spec, compact):
        return spec
    # "三天后早上8点": a day-count followed by a time of day
    head = re.match(r"(\d+)个?(天|日|周|星期|礼拜|个月)(?:后|以后|之后)", compact)
    if head:
        unit = head.group(2)
        amount = int(head.group(1))
        spec.offset = (
            relativedelta(months=amount)
            if unit == "个月"
            else relativedelta(days=amount * (7 if unit in ("周", "星期", "礼拜") else 1))
        )
        spec.parts.append(head.group())
        compact = compact[head.end() :]
    _consume(spec, compact, _ZH_TOKENS, _apply_zh)
    return spec


def _consume(
    spec: _Spec,
    text: str,
    tokens: list[tuple[str, re.Pattern[str]]],
    apply: Callable[[_Spec, str, re.Match[str]], None],
) -> None:
    pos = 0
    while pos < len(text):
        for kind, pattern in tokens:
            m = pattern.match(text, pos)
            if m is not None and m.end() > pos:
                if kind != "filler":
                    apply(spec, kind, m)
                pos = m.end()
                break
        else:
            rest = text[pos:]
            raise WhenError(f"I cannot read {rest!r} in {text.strip()!r}; what time do you mean? e.g. {EXAMPLES}")


# ---------------------------------------------------------------------------- English

_EN_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
    "forty-five": 45,
    "half an": 0.5,
    "half a": 0.5,
}
_EN_DAYS = {
    "monday": 0,
    "mon": 0,
    "tuesday": 1,
    "tue": 1,
    "tues": 1,
    "wednesday": 2,
    "wed": 2,
    "thursday": 3,
    "thu": 3,
    "thurs": 3,
    "friday": 4,
    "fri": 4,
    "saturday": 5,
    "sat": 5,
    "sunday": 6,
    "sun": 6,
}
_EN_MONTHS = {
    "january": 1,
    "jan": 1,
    "february": 2,
    "feb": 2,
    "march": 3,
    "mar": 3,
    "april": 4,
    "apr": 4,
    "may": 5,
    "june": 6,
    "jun": 6,
    "july": 7,
    "jul": 7,
    "august": 8,
    "aug": 8,
    "september": 9,
    "sep": 9,
    "sept": 9,
    "october": 10,
    "oct": 10,
    "november": 11,
    "nov": 11,
    "december": 12,
    "dec": 12,
}
_EN_PERIODS = {
    "morning": "morning",
    "noon": "noon",
    "midday": "noon",
    "afternoon": "afternoon",
    "evening": "en_evening",
    "night": "night",
    "tonight": "night",
    "midnight": "midnight",
}
_NUM = r"(\d+(?:\.\d+)?|\b(?:" + "|".join(sorted(_EN_NUMBERS, key=len, reverse=True)) + r")\b)"
_EN_UNIT = r"(minutes?|mins?|m|hours?|hrs?|h|days?|d|weeks?|w|months?|years?|seconds?|secs?|s)(?![a-z])"
_DAY_NAMES = "|".join(sorted(_EN_DAYS, key=len, reverse=True))
_MONTH_NAMES = "|".join(sorted(_EN_MONTHS, key=len, reverse=True))
_ORD = r"(\d{1,2})(?:st|nd|rd|th)?"
_DAY_LIST = rf"((?:(?:{_DAY_NAMES})s?\b(?:\s*(?:,|and|&)\s*)?)+)"

_EN_TOKENS: list[tuple[str, re.Pattern[str]]] = [
    ("duration", re.compile(rf"(?:in\s+)?((?:{_NUM}\s*{_EN_UNIT}(?:\s*(?:,|and)\s*)?)+)(?:\s+(?:from now|later))?")),
    ("every_other", re.compile(rf"every\s+other\s+(?:week\s+(?:on\s+)?)?{_DAY_LIST}")),
    ("every_other_unit", re.compile(r"every\s+other\s+(day|week|month)\b")),
    ("every_n", re.compile(r"every\s+(\d+)\s+(minutes?|hours?|days?|weeks?|months?)\b")),
    ("weekdays", re.compile(r"(?:every\s+)?weekdays?\b|every\s+working\s+day")),
    ("weekend", re.compile(r"(?:every\s+)?weekends?\b")),
    ("every_week", re.compile(rf"(?:every|each)\s+(?:week\s+on\s+)?{_DAY_LIST}")),
    (
        "every_month",
        re.compile(rf"(?:every\s+month|monthly)\s+on\s+the\s+{_ORD}|on\s+the\s+{_ORD}\s+of\s+every\s+month"),
    ),
    ("every_year", re.compile(rf"(?:every\s+year|yearly|annually)\s+on\s+({_MONTH_NAMES})\.?\s+{_ORD}")),
    ("every_day", re.compile(r"every\s+day\b|daily\b|each\s+day\b")),
    ("every_hour", re.compile(r"every\s+hour\b|hourly\b")),
    ("day", re.compile(r"(?:the\s+)?day\s+after\s+tomorrow\b|today\b|tomorrow\b|tmr\b")),
    ("week", re.compile(rf"(?:(this|next|coming)\s+)?({_DAY_NAMES})\b")),
    ("month_date", re.compile(rf"({_MONTH_NAMES})\.?\s+{_ORD}\b(?:,?\s+(\d{{4}}))?")),
    ("date_month", re.compile(rf"(?:the\s+)?{_ORD}\s+(?:of\s+)?({_MONTH_NAMES})\b(?:,?\s+(\d{{4}}))?")),
    ("mday", re.compile(rf"the\s+{_ORD}\b")),
    ("clock", re.compile(r"(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)|(\d{1,2}):(\d{2})|(\d{1,2})\s*o'?clock")),
    ("at_hour", re.compile(r"at\s+(\d{1,2})\b(?!:)")),
    (
        "period",
        re.compile(r"(?:(?:this|in\s+the|at)\s+)?(morning|noon|midday|afternoon|evening|night|tonight|midnight)\b"),
    ),
    ("filler", re.compile(r"[\s,]+|at\b|on\b|by\b|remind\s+me\b")),
]


def _en_number(text: str) -> float:
    return float(_EN_NUMBERS[text]) if text in _EN_NUMBERS else float(text)


def _en_days(text: str) -> list[int]:
    return [_EN_DAYS[d] for d in re.findall(rf"{_DAY_NAMES}", text)]


def _apply_en(spec: _Spec, kind: str, m: re.Match[str]) -> None:
    g = m.groups()
    if kind == "duration":
        for amount, unit in re.findall(rf"{_NUM}\s*{_EN_UNIT}", g[0]):
            key = {
                "m": "分钟",
                "min": "分钟",
                "mins": "分钟",
                "minute": "分钟",
                "minutes": "分钟",
                "h": "小时",
                "hr": "小时",
                "hrs": "小时",
                "hour": "小时",
                "hours": "小时",
                "d": "天",
                "day": "天",
                "days": "天",
                "w": "周",
                "week": "周",
                "weeks": "周",
                "month": "个月",
                "months": "个月",
                "year": "年",
                "years": "年",
                "s": "秒",
                "sec": "秒",
                "secs": "秒",
                "second": "秒",
                "seconds": "秒",
            }[unit]
            _zh_unit(spec, _en_number(amount), key)
        spec.parts.append(m.group())
    elif kind == "every_other":
        spec.freq, spec.interval, spec.byday = "WEEKLY", 2, _en_days(g[0])
    elif kind == "every_other_unit":
        spec.freq, spec.interval = {"day": "DAILY", "week": "WEEKLY", "month": "MONTHLY"}[g[0]], 2
    elif kind == "every_n":
        unit = g[1].rstrip("s")
        spec.freq = {"minute": "MINUTELY", "hour": "HOURLY", "day": "DAILY", "week": "WEEKLY", "month": "MONTHLY"}[unit]
        spec.interval = int(g[0])
    elif kind == "weekdays":
        spec.freq, spec.byday = "WEEKLY", [0, 1, 2, 3, 4]
    elif kind == "weekend":
        spec.freq, spec.byday = "WEEKLY", [5, 6]
    elif kind == "every_week":
        spec.freq, spec.byday = "WEEKLY", _en_days(m.group())
    elif kind == "every_month":
        spec.freq, spec.bymonthday = "MONTHLY", int(g[0] or g[1])
    elif kind == "every_year":
        spec.freq, spec.bymonth, spec.bymonthday = "YEARLY", _EN_MONTHS[g[0]], int(g[1])
    elif kind == "every_day":
        spec.freq = "DAILY"
    elif kind == "every_hour":
        spec.freq = "HOURLY"
    elif kind == "day":
        said = m.group()
        _set(spec, "day", 0 if said == "today" else 1 if said in ("tomorrow", "tmr") else 2, said)
    elif kind == "week":
        ahead = {"next": 1, "this": 0}.get(g[0] or "")
        spec.this_week = g[0] == "this"
        _set(spec, "week", (ahead, _EN_DAYS[g[1]]), m.group())
    elif kind == "month_date":
        spec.month = _EN_MONTHS[g[0]]
        spec.year = int(g[2]) if g[2] else None
        _set(spec, "mday", int(g[1]), m.group())
    elif kind == "date_month":
        spec.month = _EN_MONTHS[g[1]]
        spec.year = int(g[2]) if g[2] else None
        _set(spec, "mday", int(g[0]), m.group())
    elif kind == "mday":
        _set(spec, "mday", int(g[0]), m.group())
    elif kind == "clock":
        if g[0] is not None:
            _set(spec, "hour", int(g[0]), m.group())
            spec.minute = int(g[1] or 0)
            _set(spec, "period", "am" if g[2].startswith("a") else "pm", m.group())
        elif g[3] is not None:
            _set(spec, "hour", int(g[3]), m.group())
            spec.minute = int(g[4])
        else:
            _set(spec, "hour", int(g[5]), m.group())
            spec.bare_hour = True
    elif kind == "at_hour":
        _set(spec, "hour", int(g[0]), m.group())
        spec.bare_hour = True
    elif kind == "period":
        word = g[0]
        if word == "tonight":
            _set(spec, "day", 0, m.group())
        _set(spec, "period", _EN_PERIODS[word], m.group())


def _read_en(text: str) -> _Spec:
    spec = _Spec()
    _consume(spec, text, _EN_TOKENS, _apply_en)
    return spec


# ---------------------------------------------------------------------------- placing on the calendar

_DEFAULT_HOUR = {
    "early": None,
    "morning": 8,
    "forenoon": 9,
    "noon": 12,
    "afternoon": 15,
    "dusk": 18,
    "evening": 20,
    "en_evening": 19,
    "night": 21,
    "late": 23,
    "midnight": 0,
    "am": None,
    "pm": None,
}


def _hour_of_day(spec: _Spec, said: str) -> tuple[int, int, int]:
    """(hour 0-23, minute, days to add) from the hour, minute and part of the day."""
    period, hour, minute = spec.period, spec.hour, spec.minute
    if hour is None:
        if period == "midnight":
            return 0, 0, 1
        default = _DEFAULT_HOUR.get(period, 9)
        if default is None:
            raise WhenError(f"{said!r} names a part of the day but no hour; at what time? e.g. 凌晨5点")
        return default, 0, 0
    if minute >= 60:
        raise WhenError(f"{minute} is not a minute of the hour (0-59) in {said!r}; what time do you mean?")
    if hour > 24 or (hour == 24 and minute):
        raise WhenError(
            f"{hour} o'clock does not exist in {said!r}; hours run 0-23 (or 1-12 with 上午/下午, am/pm); "
            "which time do you mean?"
        )
    if not period and spec.bare_hour and 1 <= hour <= 5:
        raise WhenError(
            f"{said!r}: {hour} o'clock at night or in the afternoon? say 凌晨{hour}点 or 下午{hour}点, "
            f"{hour}am or {hour}pm, or {hour:02d}:{minute:02d} / {hour + 12}:{minute:02d}"
        )
    if period in ("am", "pm") and not 1 <= hour <= 12:
        raise WhenError(f"{said!r}: with am/pm the hour is 1-12; did you mean {hour}:{minute:02d}?")
    extra = 0
    if period in ("afternoon", "dusk", "pm", "en_evening", "evening", "night", "late") and hour < 12:
        if period in ("evening", "night", "late", "en_evening") and hour <= 4:
            extra = 1  # 晚上1点 / 1 at night: the small hours after that evening
        else:
            hour += 12
    elif period in ("evening", "night", "late", "en_evening") and hour == 12:
        hour, extra = 0, 1
    elif period == "noon" and hour <= 2:
        hour += 12
    elif period == "am" and hour == 12:
        hour = 0
    elif period in ("early", "morning", "forenoon") and hour > 12:
        raise WhenError(f"{said!r}: {hour} o'clock is not in the morning; which time do you mean?")
    if hour == 24:
        hour, extra = 0, extra + 1
    return hour, minute, extra


def _date_of(spec: _Spec, today: date, said: str) -> date | None:
    if spec.day is not None:
        return today + timedelta(days=spec.day)
    if spec.week is not None:
        ahead, weekday = spec.week
        monday = today - timedelta(days=today.weekday())
        if ahead is None:
            return today + timedelta(days=(weekday - today.weekday()) % 7)
        day = monday + timedelta(days=7 * ahead + weekday)
        if spec.this_week and day < today:
            raise WhenError(f"{said!r} has already passed this week; did you mean next week's?")
        return day
    if spec.mday is not None:
        year = today.year if spec.year in (None, 0) else today.year + 1 if spec.year == -1 else spec.year
        month = spec.month
        if month is None:
            shifted = today + relativedelta(months=spec.month_ahead)
            year, month = shifted.year, shifted.month
        if not 1 <= month <= 12:
            raise WhenError(f"{said!r}: there is no month {month}; which date do you mean?")
        try:
            return date(year, month, spec.mday)
        except ValueError:
            last = (date(year, month, 1) + relativedelta(months=1, days=-1)).day
            raise WhenError(
                f"{said!r} is not a date: month {month} of {year} has {last} days; which day do you mean?"
            ) from None
    return None


def localize(local: datetime, zone: tzinfo) -> tuple[datetime, bool]:
    """``local`` (naive wall time) in ``zone`` as an aware instant, and whether that wall time exists.

    A wall time skipped by a daylight-saving change maps to the instant the clocks jumped over it
    (02:30 on a spring-forward night becomes 03:30 summer time); one that occurs twice is the first.
    """
    aware = local.replace(tzinfo=zone, fold=0)
    instant = aware.astimezone(_UTC).astimezone(zone)
    return instant, instant.replace(tzinfo=None) == local


def next_occurrence(rule: str, start: datetime, after: datetime, zone: tzinfo) -> datetime | None:
    """The first instant of ``rule`` (from naive local ``start``) strictly after the aware ``after``."""
    local_after = after.astimezone(zone).replace(tzinfo=None)
    candidate: datetime | None = rrulestr(rule, dtstart=start).after(local_after, inc=False)
    while candidate is not None:
        instant, _ = localize(candidate, zone)
        if instant > after:
            return instant
        candidate = rrulestr(rule, dtstart=start).after(candidate, inc=False)
    return None


def _rule_text(spec: _Spec, hour: int, minute: int) -> str:
    parts = [f"FREQ={spec.freq}"]
    if spec.interval != 1:
        parts.append(f"INTERVAL={spec.interval}")
    if spec.bymonth is not None:
        parts.append(f"BYMONTH={spec.bymonth}")
    if spec.bymonthday is not None:
        parts.append(f"BYMONTHDAY={spec.bymonthday}")
    if spec.byday:
        parts.append("BYDAY=" + ",".join(_WEEKDAYS[d] for d in sorted(set(spec.byday))))
    if spec.freq in ("DAILY", "WEEKLY", "MONTHLY", "YEARLY"):
        parts.append(f"BYHOUR={hour};BYMINUTE={minute};BYSECOND=0")
    return ";".join(parts)


def _repeating(spec: _Spec, now: datetime, zone: ZoneInfo, said: str) -> When:
    if spec.bymonthday is not None and not 1 <= spec.bymonthday <= 31:
        raise WhenError(f"{said!r}: a month has no day {spec.bymonthday}; which day do you mean?")
    if spec.bymonth is not None:
        try:
            date(2024, spec.bymonth, spec.bymonthday or 1)
        except ValueError:
            raise WhenError(f"{said!r} is not a date in any year; which day do you mean?") from None
    if spec.freq in ("HOURLY", "MINUTELY") and spec.hour is None:
        local_now = now.astimezone(zone).replace(tzinfo=None, microsecond=0)
        rule = _rule_text(spec, 0, 0)
        start = local_now
        first = next_occurrence(rule, start, now, zone)
        assert first is not None
        return When(first, rule, start)
    if spec.freq == "WEEKLY" and not spec.byday and spec.week is not None:
        spec.byday = [spec.week[1]]
    hour, minute, extra = _hour_of_day(spec, said)
    if extra:
        raise WhenError(f"{said!r}: a repeating reminder past midnight; say the time on the 24-hour clock, e.g. 0:30")
    local_now = now.astimezone(zone).replace(tzinfo=None)
    first_day = _date_of(spec, local_now.date(), said) or local_now.date()
    start = datetime.combine(first_day, time(hour, minute))
    rule = _rule_text(spec, hour, minute)
    # the first matching instant at or after the start, then the rule runs from there (so
    # "every other Tuesday" starts with the coming Tuesday)
    single = rrulestr(re.sub(r";?INTERVAL=\d+", "", rule), dtstart=start - timedelta(seconds=1))
    seed_after = max(start - timedelta(seconds=1), local_now)
    seed = single.after(seed_after, inc=False)
    if seed is None:
        raise WhenError(f"{said!r} never comes; when do you mean?")
    first = next_occurrence(rule, seed, now - timedelta(microseconds=1), zone)
    if first is None or first <= now:
        raise WhenError(f"{said!r} never comes; when do you mean?")
    return When(first, rule, seed)


def parse_when(text: str, now: datetime, zone: ZoneInfo, *, repeat: str = "") -> When:
    """Read ``text`` (and an optional separate ``repeat``) said at ``now`` in ``zone``.

    Raises:
        WhenError: it cannot be read, names a day that does not exist or has passed, or a
            local time skipped by a daylight-saving change; the message asks what was meant.
    """
    if now.tzinfo is None:
        raise ValueError("now must be an aware datetime")
    said = " ".join(f"{text} {repeat}".split())
    if not said:
        raise WhenError(f"no time given; when should it be? e.g. {EXAMPLES}")
    iso = _iso(text.strip(), zone) if text.strip() and not repeat.strip() else None
    if iso is not None:
        if iso <= now:
            raise WhenError(
                f"{text.strip()!r} has already passed (it is {now.astimezone(zone).isoformat()}); when do you mean?"
            )
        return When(iso)
    spec = _read(said)
    if spec.freq:
        if spec.offset is not None:
            raise WhenError(f"{said!r} mixes a delay with a repeat; say when it repeats, e.g. 每天早上8点")
        return _repeating(spec, now, zone, said)
    if not spec.parts:
        raise WhenError(f"{said!r} has no day or time in it; when should it be? e.g. {EXAMPLES}")
    return When(_one_off(spec, now, zone, said))


def _read(said: str) -> _Spec:
    normalized = _normalize(said)
    if re.search(r"[\u4e00-\u9fff]", normalized):
        return _read_zh(normalized)
    return _read_en(normalized)


def _one_off(spec: _Spec, now: datetime, zone: ZoneInfo, said: str) -> datetime:
    local_now = now.astimezone(zone).replace(tzinfo=None)
    if spec.offset is not None and spec.hour is None and not spec.period and spec.exact_offset:
        later: datetime = now.astimezone(_UTC) + spec.offset  # a delay: elapsed time, not wall time
        return later.astimezone(zone)
    if spec.offset is not None:
        base = local_now + spec.offset
        if spec.has_date() and (spec.day is not None or spec.week is not None or spec.mday is not None):
            raise WhenError(f"{said!r} names a day twice; which day do you mean?")
        if spec.hour is None and not spec.period:
            local, exists = base.replace(microsecond=0), True
            instant, exists = localize(local, zone)
            return instant
        hour, minute, extra = _hour_of_day(spec, said)
        local = datetime.combine(base.date() + timedelta(days=extra), time(hour, minute))
    else:
        day = _date_of(spec, local_now.date(), said)
        hour, minute, extra = _hour_of_day(spec, said)
        if day is None:
            day = local_now.date()
            if datetime.combine(day + timedelta(days=extra), time(hour, minute)) <= local_now:
                day += timedelta(days=1)  # a time alone: its next occurrence
        elif spec.week is not None and spec.week[0] is None:
            if datetime.combine(day + timedelta(days=extra), time(hour, minute)) <= local_now:
                day += timedelta(days=7)  # "周三" said on Wednesday after the time: next Wednesday
        elif (
            spec.mday is not None
            and spec.year in (None, 0)
            and spec.month_ahead == 0
            and datetime.combine(day + timedelta(days=extra), time(hour, minute)) <= local_now
        ):
            if spec.month is None:
                day = _date_of(_with(spec, month_ahead=1), local_now.date(), said) or day
            elif spec.year is None:
                day = _date_of(_with(spec, year=local_now.year + 1), local_now.date(), said) or day
        local = datetime.combine(day + timedelta(days=extra), time(hour, minute))
    instant, exists = localize(local, zone)
    if not exists:
        raise WhenError(
            f"{said!r} is {local:%Y-%m-%d %H:%M}, a time that does not exist in {zone.key}: the clocks jump "
            f"forward over it that night; did you mean {instant.replace(tzinfo=None):%H:%M}?"
        )
    if instant <= now:
        raise WhenError(f"{said!r} ({instant.isoformat()}) has already passed; when do you mean?")
    return instant


def _with(spec: _Spec, **changes: object) -> _Spec:
    copy = _Spec(**{k: getattr(spec, k) for k in spec.__dataclass_fields__})
    for key, value in changes.items():
        setattr(copy, key, value)
    return copy


def _iso(text: str, zone: ZoneInfo) -> datetime | None:
    if not re.fullmatch(r"\d{4}-?\d{2}-?\d{2}([t ]\S.*)?", text.lower()):
        return None
    try:
        value = isoparse(text.replace(" ", "T", 1))
    except ValueError as exc:
        raise WhenError(
            f"{text!r} looks like ISO 8601 but is not a valid time ({exc}); which time do you mean?"
        ) from None
    if value.tzinfo is None:
        if len(text) <= 10:
            value = value.replace(hour=9)
        instant, exists = localize(value, zone)
        if not exists:
            raise WhenError(
                f"{text!r} does not exist in {zone.key} (the clocks jump over it); "
                f"did you mean {instant.replace(tzinfo=None):%H:%M}?"
            )
        return instant
    aware: datetime = value.astimezone(zone)
    return aware
