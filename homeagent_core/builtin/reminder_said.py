"""A reminder said in one breath ("明天早上7点 吃药", "tomorrow 9am call mum"), and a rule in words.

:func:`split_said` finds the time expression in what someone typed into one box and reads it
with the same parser as the ``reminder_set`` tool (:func:`homeagent_core.builtin.when.parse_when`);
the rest is what to remind of. It tries, in order: the words around "提醒我" / "remind me (to)";
the longest leading run of whole words that reads as a time; the longest trailing one; for
Chinese written without spaces, the longest leading (then trailing) run of characters. Nothing
that reads leaves the parser's own question (what was meant), never a guess.

:func:`rule_in_words` says an RFC 5545 rule as people would, in Chinese and English
("每个工作日 07:00 · every weekday at 07:00").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from homeagent_core.builtin.when import When, WhenError, parse_when

__all__ = ["Said", "rule_in_words", "split_said"]

_ASK = re.compile(r"(?:请)?(?:提醒我|提醒一下|叫我|remind me(?: to)?)", re.IGNORECASE)
_EDGE = " \t,，.。:：;；!！、"
_CJK = re.compile(r"[\u3400-\u9fff]")
_MAX_SAID = 500
HOW = "e.g. “明天早上7点 吃药”, “每个工作日早上7点提醒我叫孩子起床”, “tomorrow 9am call mum”"


@dataclass(frozen=True)
class Said:
    """What one sentence asked for: when (as read), the words that said it, and what to remind of."""

    when: When
    when_text: str
    text: str


def _try(when: str, now: datetime, zone: ZoneInfo) -> When | None:
    if not when.strip(_EDGE):
        return None
    try:
        return parse_when(when.strip(_EDGE), now, zone)
    except WhenError:
        return None


def _found(when: str, rest: str, now: datetime, zone: ZoneInfo) -> Said | None:
    text = _ASK.sub(" ", rest).strip(_EDGE)
    when = " ".join(_ASK.sub(" ", when).split()).strip(_EDGE)
    parsed = _try(when, now, zone) if text else None
    return Said(parsed, when, " ".join(text.split())) if parsed is not None else None


def _splits(said: str) -> list[tuple[str, str]]:
    """(time part, the rest) candidates, most likely first."""
    out: list[tuple[str, str]] = []
    ask = _ASK.search(said)
    if ask is not None:
        before, after = said[: ask.start()], said[ask.end() :]
        out += [(before, after), (after, before)]
    words = said.split(" ")
    for n in range(len(words) - 1, 0, -1):  # leading whole words, longest first
        out.append((" ".join(words[:n]), " ".join(words[n:])))
    for n in range(1, len(words)):  # trailing whole words, longest first
        out.append((" ".join(words[n:]), " ".join(words[:n])))
    cuts = [i for i in range(1, len(said)) if _CJK.match(said[i - 1]) or _CJK.match(said[i])]
    out += [(said[:i], said[i:]) for i in reversed(cuts)]
    out += [(said[i:], said[:i]) for i in cuts]
    return out


def split_said(said: str, now: datetime, zone: ZoneInfo) -> Said:
    """Read one sentence into when and what; :class:`WhenError` asks back when no time in it reads.

    Raises:
        WhenError: nothing said, no text besides the time, or no part of it reads as a time.
    """
    said = " ".join(str(said).split())
    if not said:
        raise WhenError(f"nothing was said; say when and what to remind of, {HOW}")
    if len(said) > _MAX_SAID:
        raise WhenError(f"that is {len(said)} characters; say when and what in under {_MAX_SAID}")
    if _try(_ASK.sub(" ", said), now, zone) is not None:
        raise WhenError(f"{said!r} says when but not what; what should the reminder say? {HOW}")
    for when, rest in _splits(said):
        found = _found(when, rest, now, zone)
        if found is not None:
            return found
    try:
        parse_when(_ASK.sub(" ", said).strip(_EDGE) or said, now, zone)
    except WhenError as exc:
        raise WhenError(f"I cannot tell when in {said!r}: {exc}") from None
    raise WhenError(f"I cannot tell when in {said!r}; when should it be? {HOW}")  # pragma: no cover


# ---------------------------------------------------------------------------- rules in words

_DAYS_ZH = ("一", "二", "三", "四", "五", "六", "日")
_DAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_CODES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_MONTHS_EN = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
              "October", "November", "December")


def _nth(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def rule_in_words(rule: str) -> str:
    """``FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=0`` → ``每个工作日 07:00 · every weekday at 07:00``.

    "" for a one-off; a rule it has no words for is returned as it is.
    """
    if not rule:
        return ""
    parts = dict(p.split("=", 1) for p in rule.split(";") if "=" in p)
    freq, every = parts.get("FREQ", ""), int(parts.get("INTERVAL", "1") or 1)
    clock = ""
    if "BYHOUR" in parts:
        clock = f"{int(parts['BYHOUR']):02d}:{int(parts.get('BYMINUTE', '0')):02d}"
    days = [_CODES.index(d) for d in parts.get("BYDAY", "").split(",") if d in _CODES]
    zh, en = "", ""
    if freq in ("MINUTELY", "HOURLY"):
        unit_zh, unit_en = ("分钟", "minute") if freq == "MINUTELY" else ("小时", "hour")
        return f"每{every}{unit_zh} · every {every} {unit_en}s" if every > 1 else f"每{unit_zh} · every {unit_en}"
    if freq == "DAILY":
        zh, en = ("每天", "every day") if every == 1 else (f"每{every}天", f"every {every} days")
    elif freq == "WEEKLY":
        if days == [0, 1, 2, 3, 4]:
            zh, en = "每个工作日", "every weekday"
        elif days == [5, 6]:
            zh, en = "每个周末", "every weekend"
        else:
            zh = "周" + "、".join(_DAYS_ZH[d] for d in days)
            en = ", ".join(_DAYS_EN[d] for d in days)
        if every == 1:
            zh, en = "每" + zh.removeprefix("每"), f"every {en.removeprefix('every ')}"
        elif every == 2:
            zh, en = "每隔一周" + zh.removeprefix("每个"), f"every other {en.removeprefix('every ')}"
        else:
            zh, en = f"每{every}周" + zh.removeprefix("每个"), f"every {every} weeks on {en.removeprefix('every ')}"
    elif freq == "MONTHLY" and "BYMONTHDAY" in parts:
        day = int(parts["BYMONTHDAY"])
        every_zh, every_en = ("每月", "every month") if every == 1 else (f"每{every}个月", f"every {every} months")
        if day == -1:
            zh, en = f"{every_zh}最后一天", f"the last day of {every_en}"
        else:
            zh, en = f"{every_zh}{day}号", f"{every_en} on the {_nth(day)}"
    elif freq == "YEARLY" and "BYMONTH" in parts and "BYMONTHDAY" in parts:
        month, day = int(parts["BYMONTH"]), int(parts["BYMONTHDAY"])
        zh, en = f"每年{month}月{day}日", f"every year on {_MONTHS_EN[month - 1]} {day}"
    else:
        return rule
    return f"{zh} {clock} · {en} at {clock}" if clock else f"{zh} · {en}"
