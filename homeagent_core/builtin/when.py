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
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

from dateutil.parser import isoparse
from dateutil.relativedelta import relativedelta
from dateutil.rrule import rrulestr

from homeagent_core.builtin.when_words import EXAMPLES, Spec, WhenError, read_words

__all__ = ["EXAMPLES", "When", "WhenError", "localize", "next_occurrence", "parse_when"]

_UTC = ZoneInfo("UTC")
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


@dataclass(frozen=True)
class When:
    """The first due instant and, for a repeating reminder, its rule.

    ``rrule`` is an RFC 5545 RRULE value (``FREQ=WEEKLY;BYDAY=MO``) evaluated from ``start``
    (the first instant's local wall time, naive) in the household's zone; "" for a one-off.
    """

    at: datetime
    rrule: str = ""
    start: datetime | None = None


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


def _hour_of_day(spec: Spec, said: str) -> tuple[int, int, int]:
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


def _date_of(spec: Spec, today: date, said: str) -> date | None:
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


def _rule_text(spec: Spec, hour: int, minute: int) -> str:
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
        parts.append(f"BYHOUR={hour};BYMINUTE={minute};BYSECOND={spec.second}")
    return ";".join(parts)


def _repeating(spec: Spec, now: datetime, zone: ZoneInfo, said: str) -> When:
    if spec.bymonthday is not None and not (1 <= spec.bymonthday <= 31 or spec.bymonthday == -1):
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
        raise WhenError(f"{said!r}: a repeating reminder past midnight; at what time on the 24-hour clock, e.g. 0:30?")
    local_now = now.astimezone(zone).replace(tzinfo=None)
    first_day = _date_of(spec, local_now.date(), said) or local_now.date()
    # a bare 每周 / 每月 / 每年 repeats on the first time's weekday / day / date, said in the rule
    if spec.freq == "WEEKLY" and not spec.byday:
        spec.byday = [first_day.weekday()]
    elif spec.freq == "MONTHLY" and spec.bymonthday is None:
        spec.bymonthday = first_day.day
    elif spec.freq == "YEARLY" and spec.bymonth is None:
        spec.bymonth, spec.bymonthday = first_day.month, first_day.day
    start = datetime.combine(first_day, time(hour, minute, spec.second))
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
    iso = _iso(text.strip(), zone) if text.strip() else None
    if iso is not None and not repeat.strip():
        if iso <= now:
            raise WhenError(
                f"{text.strip()!r} has already passed (it is {now.astimezone(zone).isoformat()}); when do you mean?"
            )
        return When(iso)
    spec = Spec()
    if iso is not None:  # an ISO first time and a repeat: the repeat runs from that day and time
        local = iso.astimezone(zone)
        spec.year, spec.month, spec.mday = local.year, local.month, local.day
        spec.hour, spec.minute, spec.second = local.hour, local.minute, local.second
        spec.parts.append(text.strip())
    elif text.strip():
        spec = read_words(text)
    if repeat.strip():
        _add_repeat(spec, read_words(repeat), repeat.strip())
    if spec.freq:
        if spec.offset is not None:
            raise WhenError(f"{said!r} mixes a delay with a repeat; when should it repeat? e.g. 每天早上8点")
        return _repeating(spec, now, zone, said)
    if not spec.parts:
        raise WhenError(f"{said!r} has no day or time in it; when should it be? e.g. {EXAMPLES}")
    return When(_one_off(spec, now, zone, said))


def _add_repeat(spec: Spec, rule: Spec, said: str) -> None:
    """Merge a separately given ``repeat`` (its rule, and its time of day if ``when`` has none) into ``spec``."""
    if not rule.freq:
        raise WhenError(
            f"repeat {said!r} does not say how often; how often should it repeat? "
            "e.g. 每天, 每周一, 每个工作日, every other Tuesday"
        )
    if spec.freq:
        raise WhenError(f"both when and repeat say how it repeats ({said!r}); which one do you mean?")
    spec.freq, spec.interval, spec.byday = rule.freq, rule.interval, rule.byday
    spec.bymonthday, spec.bymonth = rule.bymonthday, rule.bymonth
    if spec.hour is None and rule.hour is not None:
        spec.hour, spec.minute, spec.bare_hour = rule.hour, rule.minute, rule.bare_hour
    if not spec.period and rule.period:
        spec.period = rule.period
    if spec.week is None and rule.week is not None and not spec.byday:
        spec.week = rule.week


def _one_off(spec: Spec, now: datetime, zone: ZoneInfo, said: str) -> datetime:
    local_now = now.astimezone(zone).replace(tzinfo=None)
    if spec.offset is not None:
        if spec.day is not None or spec.week is not None or spec.mday is not None:
            raise WhenError(f"{said!r} names a day twice; which day do you mean?")
        if spec.exact_offset and (spec.hour is not None or spec.period):
            raise WhenError(f"{said!r} says both a delay and a time of day; which one do you mean?")
        if spec.exact_offset:
            later: datetime = now.astimezone(_UTC) + spec.offset  # a delay: elapsed time, not wall time
            return later.astimezone(zone)
        base = local_now + spec.offset
        if spec.hour is None and not spec.period:
            instant, _ = localize(base.replace(microsecond=0), zone)
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


def _with(spec: Spec, **changes: object) -> Spec:
    copy = Spec(**{k: getattr(spec, k) for k in spec.__dataclass_fields__})
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
