"""The words of a time expression, Chinese or English, read into a :class:`Spec` (what was said).

:mod:`homeagent_core.builtin.when` places a ``Spec`` on the calendar; this module only reads:
Chinese numerals (两, 十, 百) to digits, then the expression token by token, each token a
pattern for one thing people say (a day, a weekday, a date, a part of the day, a time, a span,
a repeat). A part no pattern reads raises :class:`WhenError`, quoting it and asking back.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from dateutil.relativedelta import relativedelta

__all__ = ["EXAMPLES", "Spec", "WhenError", "read_words"]

#: Shown in every "what did you mean" message.
EXAMPLES = "明天早上7点, 下周三下午3点半, 12月24日晚上8点, 每周一早上8点, in 2 hours, next Friday 9am, 2026-12-24T20:00"


class WhenError(ValueError):
    """A time expression that cannot be read; the message says what and asks what was meant."""


@dataclass
class Spec:
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
    second: int = 0  # only an ISO 8601 first time carries seconds
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
_ZH_UNIT = r"(年|个月|周|个星期|星期|个礼拜|礼拜|天|日|个小时|小时|个钟头|钟头|刻钟|分钟|分|秒钟|秒)"
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


def _zh_unit(spec: Spec, amount: float, unit: str) -> None:
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
        "刻钟": relativedelta(minutes=round(amount * 15)),
    }[unit]
    spec.offset = (spec.offset or relativedelta()) + delta
    spec.exact_offset = spec.exact_offset or unit in ("小时", "钟头", "刻钟", "分钟", "分", "秒钟", "秒")


def _zh_duration(spec: Spec, text: str) -> bool:
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
    ("week_range", re.compile(r"(?:每个?)?(?:周|星期|礼拜)([1-7日天])(?:到|至|-|~)(?:周|星期|礼拜)?([1-7日天])")),
    ("every_week", re.compile(r"每个?(?:周|星期|礼拜)((?:(?:周|星期|礼拜)?[1-7日天][、,和及与]?)+)")),
    ("month_last", re.compile(r"每个?月(?:的)?最后1天")),
    ("every_month", re.compile(r"每个?月(?:的)?(\d{1,2})(?:日|号)")),
    ("every_year", re.compile(r"每年(?:的)?(\d{1,2})月(\d{1,2})(?:日|号)?")),
    ("every_day", re.compile(r"每(?:天|日)")),
    ("every_unit", re.compile(r"每个?(年|月|周|星期|礼拜)")),
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


def _day_range(first: int, last: int) -> list[int]:
    """周一到周五 / Monday to Friday: the days from ``first`` to ``last``, wrapping past Sunday."""
    return [(first + n) % 7 for n in range((last - first) % 7 + 1)]


def _zh_days(text: str) -> list[int]:
    return [_zh_weekday(t) for t in re.findall(r"[1-7日天]", text)]


def _apply_zh(spec: Spec, kind: str, m: re.Match[str]) -> None:
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
    elif kind == "week_range":
        spec.freq, spec.byday = "WEEKLY", _day_range(_zh_weekday(g[0]), _zh_weekday(g[1]))
    elif kind == "month_last":
        spec.freq, spec.bymonthday = "MONTHLY", -1
    elif kind == "every_week":
        spec.freq, spec.byday = "WEEKLY", _zh_days(g[0])
    elif kind == "every_month":
        spec.freq, spec.bymonthday = "MONTHLY", int(g[0])
    elif kind == "every_year":
        spec.freq, spec.bymonth, spec.bymonthday = "YEARLY", int(g[0]), int(g[1])
    elif kind == "every_day":
        spec.freq = "DAILY"
    elif kind == "every_unit":  # the day comes from the first time
        spec.freq = {"年": "YEARLY", "月": "MONTHLY"}.get(g[0], "WEEKLY")
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


def _set(spec: Spec, name: str, value: object, said: str) -> None:
    if getattr(spec, name) not in (None, "") and name != "period":
        raise WhenError(
            f"{said!r} says the {'time' if name == 'hour' else 'day'} a second time; which one do you mean? e.g. "
            + EXAMPLES
        )
    if name == "period" and spec.period and spec.period != value:
        raise WhenError(f"{said!r} names a second part of the day; which one do you mean?")
    setattr(spec, name, value)
    spec.parts.append(said)


def _read_zh(text: str) -> Spec:
    spec = Spec()
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
    spec: Spec,
    text: str,
    tokens: list[tuple[str, re.Pattern[str]]],
    apply: Callable[[Spec, str, re.Match[str]], None],
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
    ("week_range", re.compile(rf"(?:every\s+)?({_DAY_NAMES})\s*(?:to|through|thru|-)\s*({_DAY_NAMES})\b")),
    ("every_week", re.compile(rf"(?:every|each)\s+(?:week\s+on\s+)?{_DAY_LIST}")),
    (
        "month_last",
        re.compile(
            r"(?:on\s+)?the\s+last\s+day\s+of\s+(?:every|each|the)\s+month|(?:every\s+month|monthly)\s+on\s+the\s+last\s+day"
        ),
    ),
    (
        "every_month",
        re.compile(rf"(?:every\s+month|monthly)\s+on\s+the\s+{_ORD}|on\s+the\s+{_ORD}\s+of\s+every\s+month"),
    ),
    ("every_year", re.compile(rf"(?:every\s+year|yearly|annually)\s+on\s+({_MONTH_NAMES})\.?\s+{_ORD}")),
    ("every_day", re.compile(r"every\s+day\b|daily\b|each\s+day\b")),
    ("every_unit", re.compile(r"(?:every\s+)?(year|month|week)\b|(yearly|annually|monthly|weekly)\b")),
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


def _apply_en(spec: Spec, kind: str, m: re.Match[str]) -> None:
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
    elif kind == "week_range":
        spec.freq, spec.byday = "WEEKLY", _day_range(_EN_DAYS[g[0]], _EN_DAYS[g[1]])
    elif kind == "month_last":
        spec.freq, spec.bymonthday = "MONTHLY", -1
    elif kind == "every_week":
        spec.freq, spec.byday = "WEEKLY", _en_days(m.group())
    elif kind == "every_month":
        spec.freq, spec.bymonthday = "MONTHLY", int(g[0] or g[1])
    elif kind == "every_year":
        spec.freq, spec.bymonth, spec.bymonthday = "YEARLY", _EN_MONTHS[g[0]], int(g[1])
    elif kind == "every_day":
        spec.freq = "DAILY"
    elif kind == "every_unit":  # the day comes from the first time
        word = (g[0] or g[1]).removesuffix("ly")
        spec.freq = {"year": "YEARLY", "annual": "YEARLY", "month": "MONTHLY"}.get(word, "WEEKLY")
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


def _read_en(text: str) -> Spec:
    spec = Spec()
    _consume(spec, text, _EN_TOKENS, _apply_en)
    return spec


def read_words(said: str) -> Spec:
    """What ``said`` says (Chinese when it holds a CJK character, English otherwise)."""
    normalized = _normalize(said)
    if re.search(r"[\u4e00-\u9fff]", normalized):
        return _read_zh(normalized)
    return _read_en(normalized)
