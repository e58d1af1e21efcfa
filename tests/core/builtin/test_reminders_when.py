"""The time-expression reader against a table of what people say, with the instants they mean.

Every row is read at a fixed "now" in a fixed zone:

- ``SH``: Wednesday 2026-12-02 10:15 in Asia/Shanghai (no daylight saving);
- ``SPRING``: Friday 2027-03-26 10:00 in Europe/Berlin, two days before the clocks jump from
  02:00 to 03:00 (Sunday 2027-03-28);
- ``AUTUMN``: Friday 2027-10-29 10:00 in Europe/Berlin, two days before 02:00-03:00 happens
  twice (Sunday 2027-10-31).

A row expects either the first due instant (ISO 8601 with offset) and the RRULE ("" for a
one-off), or ``ERR`` and a piece of the question the reader asks back.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from homeagent_core.builtin.when import WhenError, next_occurrence, parse_when

SHANGHAI = ZoneInfo("Asia/Shanghai")
BERLIN = ZoneInfo("Europe/Berlin")
NOWS = {
    "SH": datetime(2026, 12, 2, 10, 15, tzinfo=SHANGHAI),
    "SPRING": datetime(2027, 3, 26, 10, 0, tzinfo=BERLIN),
    "AUTUMN": datetime(2027, 10, 29, 10, 0, tzinfo=BERLIN),
}
ERR = "error"
H = ";BYSECOND=0"

# (now, when, repeat, expected instant or ERR, expected RRULE or the error's text)
ZH: list[tuple[str, str, str, str, str]] = [
    ("SH", "明天早上7点", "", "2026-12-03T07:00:00+08:00", ""),
    ("SH", "明天早上七点", "", "2026-12-03T07:00:00+08:00", ""),
    ("SH", "下周三下午三点半", "", "2026-12-09T15:30:00+08:00", ""),
    ("SH", "后天晚上", "", "2026-12-04T20:00:00+08:00", ""),
    ("SH", "三个月后", "", "2027-03-02T10:15:00+08:00", ""),
    ("SH", "12月24日晚上8点", "", "2026-12-24T20:00:00+08:00", ""),
    ("SH", "十二月二十四日晚上八点", "", "2026-12-24T20:00:00+08:00", ""),
    ("SH", "今天下午3点", "", "2026-12-02T15:00:00+08:00", ""),
    ("SH", "今晚八点", "", "2026-12-02T20:00:00+08:00", ""),
    ("SH", "今晚", "", "2026-12-02T20:00:00+08:00", ""),
    ("SH", "明晚9点", "", "2026-12-03T21:00:00+08:00", ""),
    ("SH", "明早", "", "2026-12-03T08:00:00+08:00", ""),
    ("SH", "明天", "", "2026-12-03T09:00:00+08:00", ""),
    ("SH", "后天", "", "2026-12-04T09:00:00+08:00", ""),
    ("SH", "大后天中午12点", "", "2026-12-05T12:00:00+08:00", ""),
    ("SH", "大后天中午1点", "", "2026-12-05T13:00:00+08:00", ""),
    ("SH", "明天上午十点", "", "2026-12-03T10:00:00+08:00", ""),
    ("SH", "明天中午", "", "2026-12-03T12:00:00+08:00", ""),
    ("SH", "明天下午", "", "2026-12-03T15:00:00+08:00", ""),
    ("SH", "明天傍晚", "", "2026-12-03T18:00:00+08:00", ""),
    ("SH", "明天凌晨3点", "", "2026-12-03T03:00:00+08:00", ""),
    ("SH", "明天晚上12点", "", "2026-12-04T00:00:00+08:00", ""),
    ("SH", "明天晚上11点45分", "", "2026-12-03T23:45:00+08:00", ""),
    ("SH", "明天早上8点一刻", "", "2026-12-03T08:15:00+08:00", ""),
    ("SH", "明天8点三刻", "", "2026-12-03T08:45:00+08:00", ""),
    ("SH", "明天8点半", "", "2026-12-03T08:30:00+08:00", ""),
    ("SH", "明天8:30", "", "2026-12-03T08:30:00+08:00", ""),
    ("SH", "明天 20:05", "", "2026-12-03T20:05:00+08:00", ""),
    ("SH", "明天14点", "", "2026-12-03T14:00:00+08:00", ""),
    ("SH", "明天下午两点", "", "2026-12-03T14:00:00+08:00", ""),
    ("SH", "明天十点钟", "", "2026-12-03T10:00:00+08:00", ""),
    ("SH", "明日9时", "", "2026-12-03T09:00:00+08:00", ""),
    ("SH", "周五下午两点一刻", "", "2026-12-04T14:15:00+08:00", ""),
    ("SH", "周五", "", "2026-12-04T09:00:00+08:00", ""),
    ("SH", "星期五晚上", "", "2026-12-04T20:00:00+08:00", ""),
    ("SH", "礼拜五上午", "", "2026-12-04T09:00:00+08:00", ""),
    ("SH", "周三", "", "2026-12-09T09:00:00+08:00", ""),
    ("SH", "周三下午", "", "2026-12-02T15:00:00+08:00", ""),
    ("SH", "这周五", "", "2026-12-04T09:00:00+08:00", ""),
    ("SH", "下周一", "", "2026-12-07T09:00:00+08:00", ""),
    ("SH", "下周日", "", "2026-12-13T09:00:00+08:00", ""),
    ("SH", "下星期天晚上8点", "", "2026-12-13T20:00:00+08:00", ""),
    ("SH", "下下周一上午十点", "", "2026-12-14T10:00:00+08:00", ""),
    ("SH", "下下周五", "", "2026-12-18T09:00:00+08:00", ""),
    ("SH", "周日", "", "2026-12-06T09:00:00+08:00", ""),
    ("SH", "12月24日", "", "2026-12-24T09:00:00+08:00", ""),
    ("SH", "12月24号", "", "2026-12-24T09:00:00+08:00", ""),
    ("SH", "1月1日", "", "2027-01-01T09:00:00+08:00", ""),
    ("SH", "明年1月1日", "", "2027-01-01T09:00:00+08:00", ""),
    ("SH", "2027年2月14日晚上7点", "", "2027-02-14T19:00:00+08:00", ""),
    ("SH", "12月1日", "", "2027-12-01T09:00:00+08:00", ""),
    ("SH", "25号", "", "2026-12-25T09:00:00+08:00", ""),
    ("SH", "1号", "", "2027-01-01T09:00:00+08:00", ""),
    ("SH", "下个月5号", "", "2027-01-05T09:00:00+08:00", ""),
    ("SH", "下个月1号早上8点", "", "2027-01-01T08:00:00+08:00", ""),
    ("SH", "3天后", "", "2026-12-05T10:15:00+08:00", ""),
    ("SH", "三天后早上8点", "", "2026-12-05T08:00:00+08:00", ""),
    ("SH", "一周后", "", "2026-12-09T10:15:00+08:00", ""),
    ("SH", "两个星期后", "", "2026-12-16T10:15:00+08:00", ""),
    ("SH", "半小时后", "", "2026-12-02T10:45:00+08:00", ""),
    ("SH", "一个半小时后", "", "2026-12-02T11:45:00+08:00", ""),
    ("SH", "两小时三十分钟后", "", "2026-12-02T12:45:00+08:00", ""),
    ("SH", "十分钟后", "", "2026-12-02T10:25:00+08:00", ""),
    ("SH", "2小时后", "", "2026-12-02T12:15:00+08:00", ""),
    ("SH", "45分钟以后", "", "2026-12-02T11:00:00+08:00", ""),
    ("SH", "一年后", "", "2027-12-02T10:15:00+08:00", ""),
    ("SH", "半年后", "", "2027-06-02T10:15:00+08:00", ""),
    ("SH", "5秒后", "", "2026-12-02T10:15:05+08:00", ""),
    ("SH", "晚上8点", "", "2026-12-02T20:00:00+08:00", ""),
    ("SH", "8点", "", "2026-12-03T08:00:00+08:00", ""),
    ("SH", "11点", "", "2026-12-02T11:00:00+08:00", ""),
    ("SH", "下午三点", "", "2026-12-02T15:00:00+08:00", ""),
    ("SH", "中午", "", "2026-12-02T12:00:00+08:00", ""),
    ("SH", "每周一早上八点", "", "2026-12-07T08:00:00+08:00", "FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=0" + H),
    (
        "SH",
        "每个工作日7点",
        "",
        "2026-12-03T07:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=0" + H,
    ),
    (
        "SH",
        "工作日早上7点",
        "",
        "2026-12-03T07:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=0" + H,
    ),
    ("SH", "每个月1号", "", "2027-01-01T09:00:00+08:00", "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0" + H),
    ("SH", "每天早上7点", "", "2026-12-03T07:00:00+08:00", "FREQ=DAILY;BYHOUR=7;BYMINUTE=0" + H),
    ("SH", "每天晚上9点半", "", "2026-12-02T21:30:00+08:00", "FREQ=DAILY;BYHOUR=21;BYMINUTE=30" + H),
    ("SH", "每周三下午3点", "", "2026-12-02T15:00:00+08:00", "FREQ=WEEKLY;BYDAY=WE;BYHOUR=15;BYMINUTE=0" + H),
    ("SH", "每周一三五早上6点", "", "2026-12-04T06:00:00+08:00", "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=6;BYMINUTE=0" + H),
    ("SH", "每星期天上午10点", "", "2026-12-06T10:00:00+08:00", "FREQ=WEEKLY;BYDAY=SU;BYHOUR=10;BYMINUTE=0" + H),
    ("SH", "每个周末早上9点", "", "2026-12-05T09:00:00+08:00", "FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=9;BYMINUTE=0" + H),
    ("SH", "每月15号晚上8点", "", "2026-12-15T20:00:00+08:00", "FREQ=MONTHLY;BYMONTHDAY=15;BYHOUR=20;BYMINUTE=0" + H),
    (
        "SH",
        "每年12月24日",
        "",
        "2026-12-24T09:00:00+08:00",
        "FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=24;BYHOUR=9;BYMINUTE=0" + H,
    ),
    (
        "SH",
        "每隔一周周二晚上7点",
        "",
        "2026-12-08T19:00:00+08:00",
        "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=19;BYMINUTE=0" + H,
    ),
    ("SH", "每两周周五", "", "2026-12-04T09:00:00+08:00", "FREQ=WEEKLY;INTERVAL=2;BYDAY=FR;BYHOUR=9;BYMINUTE=0" + H),
    ("SH", "每隔一天", "", "2026-12-03T09:00:00+08:00", "FREQ=DAILY;INTERVAL=2;BYHOUR=9;BYMINUTE=0" + H),
    ("SH", "每小时", "", "2026-12-02T11:15:00+08:00", "FREQ=HOURLY"),
    ("SH", "每隔30分钟", "", "2026-12-02T10:45:00+08:00", "FREQ=MINUTELY;INTERVAL=30"),
    ("SH", "明天早上7点", "每天", "2026-12-03T07:00:00+08:00", "FREQ=DAILY;BYHOUR=7;BYMINUTE=0" + H),
    (
        "SH",
        "7点",
        "每个工作日",
        "2026-12-03T07:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=0" + H,
    ),
    ("SH", "", "每周一早上八点", "2026-12-07T08:00:00+08:00", "FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=0" + H),
    (
        "SH",
        "2026-12-24T20:00:00+08:00",
        "每年",
        "2026-12-24T20:00:00+08:00",
        "FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=24;BYHOUR=20;BYMINUTE=0" + H,
    ),
    ("SH", "下周一早上9点", "每周", "2026-12-07T09:00:00+08:00", "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0" + H),
    ("SH", "25号", "每月", "2026-12-25T09:00:00+08:00", "FREQ=MONTHLY;BYMONTHDAY=25;BYHOUR=9;BYMINUTE=0" + H),
    ("SH", "每月", "", "2027-01-02T09:00:00+08:00", "FREQ=MONTHLY;BYMONTHDAY=2;BYHOUR=9;BYMINUTE=0" + H),
    (
        "SH",
        "7am",
        "每个工作日",
        "2026-12-03T07:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=0" + H,
    ),
    ("SH", "一刻钟后", "", "2026-12-02T10:30:00+08:00", ""),
    (
        "SH",
        "周一到周五早上7点",
        "",
        "2026-12-03T07:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=0" + H,
    ),
    (
        "SH",
        "每周一至周五8点",
        "",
        "2026-12-03T08:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=0" + H,
    ),
    ("SH", "每月最后一天", "", "2026-12-31T09:00:00+08:00", "FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=9;BYMINUTE=0" + H),
    ("SH", "今天早上8点", "", ERR, "has already passed"),
    ("SH", "过两天", "", ERR, "I cannot read '过2天'"),
    ("SH", "三天后明天", "", ERR, "names a day twice"),
    ("SH", "1小时后早上8点", "", ERR, "what time do you mean?"),
    ("SH", "明天早上7点", "明天", ERR, "does not say how often"),
    ("SH", "每周一", "每天", ERR, "which one do you mean?"),
    ("SH", "半小时后", "每天", ERR, "mixes a delay with a repeat"),
    ("SH", "下下下周八", "", ERR, "what time do you mean?"),
    ("SH", "2月30日", "", ERR, "has 28 days"),
    ("SH", "13月1日", "", ERR, "no month 13"),
    ("SH", "明天25点", "", ERR, "hours run 0-23"),
    ("SH", "明天几点", "", ERR, "I cannot read '几点'"),
    ("SH", "上午15点", "", ERR, "not in the morning"),
    ("SH", "明天明天", "", ERR, "a second time"),
    ("SH", "明天两点", "", ERR, "凌晨2点 or 下午2点"),
    ("SH", "凌晨", "", ERR, "at what time?"),
    ("SH", "本周一", "", ERR, "already passed"),
    ("SH", "明天8点61分", "", ERR, "not a minute"),
    ("SH", "每个月32号", "", ERR, "no day 32"),
    ("SH", "每年2月30日", "", ERR, "not a date in any year"),
    ("SH", "随便什么时候", "", ERR, "what time do you mean?"),
    ("SPRING", "后天凌晨2点半", "", ERR, "does not exist in Europe/Berlin"),
    ("SPRING", "后天早上8点", "", "2027-03-28T08:00:00+02:00", ""),
    ("SPRING", "两天后", "", "2027-03-28T10:00:00+02:00", ""),
    ("SPRING", "48小时后", "", "2027-03-28T11:00:00+02:00", ""),
    ("SPRING", "每天早上8点", "", "2027-03-27T08:00:00+01:00", "FREQ=DAILY;BYHOUR=8;BYMINUTE=0" + H),
    ("SPRING", "每天凌晨2点半", "", "2027-03-27T02:30:00+01:00", "FREQ=DAILY;BYHOUR=2;BYMINUTE=30" + H),
    ("AUTUMN", "10月31日凌晨2点半", "", "2027-10-31T02:30:00+02:00", ""),
    ("AUTUMN", "后天早上8点", "", "2027-10-31T08:00:00+01:00", ""),
    ("AUTUMN", "48小时后", "", "2027-10-31T09:00:00+01:00", ""),
]

EN: list[tuple[str, str, str, str, str]] = [
    ("SH", "in 2 hours", "", "2026-12-02T12:15:00+08:00", ""),
    ("SH", "in 30 minutes", "", "2026-12-02T10:45:00+08:00", ""),
    ("SH", "in an hour", "", "2026-12-02T11:15:00+08:00", ""),
    ("SH", "in half an hour", "", "2026-12-02T10:45:00+08:00", ""),
    ("SH", "in 1 hour and 30 minutes", "", "2026-12-02T11:45:00+08:00", ""),
    ("SH", "in 1h30m", "", "2026-12-02T11:45:00+08:00", ""),
    ("SH", "in 90 seconds", "", "2026-12-02T10:16:30+08:00", ""),
    ("SH", "in 3 days", "", "2026-12-05T10:15:00+08:00", ""),
    ("SH", "in 2 weeks", "", "2026-12-16T10:15:00+08:00", ""),
    ("SH", "in three months", "", "2027-03-02T10:15:00+08:00", ""),
    ("SH", "2 hours from now", "", "2026-12-02T12:15:00+08:00", ""),
    ("SH", "In 10 Minutes", "", "2026-12-02T10:25:00+08:00", ""),
    ("SH", "next Friday 9am", "", "2026-12-11T09:00:00+08:00", ""),
    ("SH", "friday 9am", "", "2026-12-04T09:00:00+08:00", ""),
    ("SH", "this friday 6pm", "", "2026-12-04T18:00:00+08:00", ""),
    ("SH", "on Friday at 3pm", "", "2026-12-04T15:00:00+08:00", ""),
    ("SH", "next monday", "", "2026-12-07T09:00:00+08:00", ""),
    ("SH", "next sunday at noon", "", "2026-12-13T12:00:00+08:00", ""),
    ("SH", "wednesday", "", "2026-12-09T09:00:00+08:00", ""),
    ("SH", "wednesday 5pm", "", "2026-12-02T17:00:00+08:00", ""),
    ("SH", "Sat 10:30am", "", "2026-12-05T10:30:00+08:00", ""),
    ("SH", "tomorrow", "", "2026-12-03T09:00:00+08:00", ""),
    ("SH", "tomorrow evening", "", "2026-12-03T19:00:00+08:00", ""),
    ("SH", "tomorrow morning", "", "2026-12-03T08:00:00+08:00", ""),
    ("SH", "tomorrow afternoon", "", "2026-12-03T15:00:00+08:00", ""),
    ("SH", "tomorrow night", "", "2026-12-03T21:00:00+08:00", ""),
    ("SH", "tomorrow at 7:30", "", "2026-12-03T07:30:00+08:00", ""),
    ("SH", "tomorrow 7:30pm", "", "2026-12-03T19:30:00+08:00", ""),
    ("SH", "tomorrow at noon", "", "2026-12-03T12:00:00+08:00", ""),
    ("SH", "tomorrow at 6", "", "2026-12-03T06:00:00+08:00", ""),
    ("SH", "12pm tomorrow", "", "2026-12-03T12:00:00+08:00", ""),
    ("SH", "12am tomorrow", "", "2026-12-03T00:00:00+08:00", ""),
    ("SH", "tonight", "", "2026-12-02T21:00:00+08:00", ""),
    ("SH", "tonight at 11", "", "2026-12-02T23:00:00+08:00", ""),
    ("SH", "this evening", "", "2026-12-02T19:00:00+08:00", ""),
    ("SH", "this afternoon", "", "2026-12-02T15:00:00+08:00", ""),
    ("SH", "today at 5pm", "", "2026-12-02T17:00:00+08:00", ""),
    ("SH", "at 5pm", "", "2026-12-02T17:00:00+08:00", ""),
    ("SH", "5pm", "", "2026-12-02T17:00:00+08:00", ""),
    ("SH", "5 p.m.", "", "2026-12-02T17:00:00+08:00", ""),
    ("SH", "17:00", "", "2026-12-02T17:00:00+08:00", ""),
    ("SH", "9am", "", "2026-12-03T09:00:00+08:00", ""),
    ("SH", "8 o'clock", "", "2026-12-03T08:00:00+08:00", ""),
    ("SH", "midnight", "", "2026-12-03T00:00:00+08:00", ""),
    ("SH", "the day after tomorrow at 3pm", "", "2026-12-04T15:00:00+08:00", ""),
    ("SH", "day after tomorrow", "", "2026-12-04T09:00:00+08:00", ""),
    ("SH", "Dec 24 8pm", "", "2026-12-24T20:00:00+08:00", ""),
    ("SH", "December 24 at 8pm", "", "2026-12-24T20:00:00+08:00", ""),
    ("SH", "24 December 2027 10:00", "", "2027-12-24T10:00:00+08:00", ""),
    ("SH", "the 25th", "", "2026-12-25T09:00:00+08:00", ""),
    ("SH", "jan 1", "", "2027-01-01T09:00:00+08:00", ""),
    ("SH", "Feb 14, 2027 7pm", "", "2027-02-14T19:00:00+08:00", ""),
    ("SH", "2026-12-24T20:00:00+08:00", "", "2026-12-24T20:00:00+08:00", ""),
    ("SH", "2026-12-24T12:00:00Z", "", "2026-12-24T20:00:00+08:00", ""),
    ("SH", "2026-12-24 20:00", "", "2026-12-24T20:00:00+08:00", ""),
    ("SH", "2026-12-24", "", "2026-12-24T09:00:00+08:00", ""),
    ("SH", "20261224T2000", "", "2026-12-24T20:00:00+08:00", ""),
    ("SH", "every day at 7am", "", "2026-12-03T07:00:00+08:00", "FREQ=DAILY;BYHOUR=7;BYMINUTE=0" + H),
    ("SH", "daily at 9pm", "", "2026-12-02T21:00:00+08:00", "FREQ=DAILY;BYHOUR=21;BYMINUTE=0" + H),
    (
        "SH",
        "every weekday at 7:30",
        "",
        "2026-12-03T07:30:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=30" + H,
    ),
    (
        "SH",
        "every weekday at 7",
        "",
        "2026-12-03T07:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=0" + H,
    ),
    ("SH", "every monday at 8am", "", "2026-12-07T08:00:00+08:00", "FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=0" + H),
    (
        "SH",
        "every monday and wednesday at 6pm",
        "",
        "2026-12-02T18:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=18;BYMINUTE=0" + H,
    ),
    (
        "SH",
        "every other Tuesday",
        "",
        "2026-12-08T09:00:00+08:00",
        "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0" + H,
    ),
    (
        "SH",
        "every other tuesday at 7pm",
        "",
        "2026-12-08T19:00:00+08:00",
        "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=19;BYMINUTE=0" + H,
    ),
    (
        "SH",
        "every month on the 1st",
        "",
        "2027-01-01T09:00:00+08:00",
        "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0" + H,
    ),
    (
        "SH",
        "on the 15th of every month",
        "",
        "2026-12-15T09:00:00+08:00",
        "FREQ=MONTHLY;BYMONTHDAY=15;BYHOUR=9;BYMINUTE=0" + H,
    ),
    (
        "SH",
        "every year on dec 24",
        "",
        "2026-12-24T09:00:00+08:00",
        "FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=24;BYHOUR=9;BYMINUTE=0" + H,
    ),
    (
        "SH",
        "every weekend at 10am",
        "",
        "2026-12-05T10:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=10;BYMINUTE=0" + H,
    ),
    ("SH", "every 2 hours", "", "2026-12-02T12:15:00+08:00", "FREQ=HOURLY;INTERVAL=2"),
    ("SH", "every hour", "", "2026-12-02T11:15:00+08:00", "FREQ=HOURLY"),
    ("SH", "every 3 days at 8am", "", "2026-12-03T08:00:00+08:00", "FREQ=DAILY;INTERVAL=3;BYHOUR=8;BYMINUTE=0" + H),
    ("SH", "every other day at 9pm", "", "2026-12-02T21:00:00+08:00", "FREQ=DAILY;INTERVAL=2;BYHOUR=21;BYMINUTE=0" + H),
    (
        "SH",
        "8am",
        "every weekday",
        "2026-12-03T08:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=0" + H,
    ),
    ("SH", "friday 6pm", "weekly", "2026-12-04T18:00:00+08:00", "FREQ=WEEKLY;BYDAY=FR;BYHOUR=18;BYMINUTE=0" + H),
    ("SH", "every week", "", "2026-12-09T09:00:00+08:00", "FREQ=WEEKLY;BYDAY=WE;BYHOUR=9;BYMINUTE=0" + H),
    (
        "SH",
        "2026-12-24T20:00:00+08:00",
        "yearly",
        "2026-12-24T20:00:00+08:00",
        "FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=24;BYHOUR=20;BYMINUTE=0" + H,
    ),
    (
        "SH",
        "monday to friday at 7am",
        "",
        "2026-12-03T07:00:00+08:00",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=0" + H,
    ),
    ("SH", "mon-fri 8am", "", "2026-12-03T08:00:00+08:00", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=0" + H),
    (
        "SH",
        "the last day of every month",
        "",
        "2026-12-31T09:00:00+08:00",
        "FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=9;BYMINUTE=0" + H,
    ),
    ("SH", "3/12", "", ERR, "what time do you mean?"),
    ("SH", "in 2 hours tomorrow", "", ERR, "names a day twice"),
    ("SH", "in 2 hours at 5pm", "", ERR, "both a delay and a time of day"),
    ("SH", "tomorrow 10", "", ERR, "I cannot read '10'"),
    ("SH", "tomorrow 9am", "tomorrow", ERR, "does not say how often"),
    ("SH", "soon", "", ERR, "I cannot read 'soon'"),
    ("SH", "yesterday", "", ERR, "what time do you mean?"),
    ("SH", "next week", "", ERR, "what time do you mean?"),
    ("SH", "at 25:00", "", ERR, "25 o'clock does not exist"),
    ("SH", "13pm", "", ERR, "with am/pm the hour is 1-12"),
    ("SH", "feb 30", "", ERR, "has 28 days"),
    ("SH", "tomorrow at 3", "", ERR, "3am or 3pm"),
    ("SH", "2020-01-01T09:00:00+08:00", "", ERR, "already passed"),
    ("SH", "2026-13-01", "", ERR, "not a valid time"),
    ("SH", "", "", ERR, "no time given"),
    ("SH", "tomorrow tomorrow", "", ERR, "a second time"),
    ("SPRING", "2027-03-28 02:30", "", ERR, "did you mean 03:30?"),
    ("SPRING", "the day after tomorrow at 2:30am", "", ERR, "does not exist in Europe/Berlin"),
    ("SPRING", "in 48 hours", "", "2027-03-28T11:00:00+02:00", ""),
    ("SPRING", "sunday 9am", "", "2027-03-28T09:00:00+02:00", ""),
    ("SPRING", "every day at 2:30am", "", "2027-03-27T02:30:00+01:00", "FREQ=DAILY;BYHOUR=2;BYMINUTE=30" + H),
    ("AUTUMN", "2027-10-31 02:30", "", "2027-10-31T02:30:00+02:00", ""),
    (
        "AUTUMN",
        "every sunday at 2:30am",
        "",
        "2027-10-31T02:30:00+02:00",
        "FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=30" + H,
    ),
    ("AUTUMN", "next monday 9am", "", "2027-11-01T09:00:00+01:00", ""),
]

ROWS = ZH + EN


def _read(now: str, when: str, repeat: str) -> tuple[str, str]:
    at = NOWS[now]
    zone = at.tzinfo
    assert isinstance(zone, ZoneInfo)
    parsed = parse_when(when, at, zone, repeat=repeat)
    return parsed.at.isoformat(), parsed.rrule


def test_the_table_is_big_enough_and_half_chinese() -> None:
    assert len(ROWS) >= 150
    chinese = [r for r in ROWS if any("\u4e00" <= c <= "\u9fff" for c in r[1] + r[2])]
    assert len(chinese) * 2 >= len(ROWS)


@pytest.mark.parametrize(("now", "when", "repeat", "instant", "rule"), ROWS, ids=[f"{r[1]}|{r[2]}" for r in ROWS])
def test_each_expression_means_its_instant(now: str, when: str, repeat: str, instant: str, rule: str) -> None:
    if instant == ERR:
        with pytest.raises(WhenError) as raised:
            _read(now, when, repeat)
        assert rule in str(raised.value)
        assert "?" in str(raised.value), "the error must ask back"
    else:
        assert _read(now, when, repeat) == (instant, rule)


def test_the_reader_scores_every_row() -> None:
    """The measure: how many of the table's rows the reader gets exactly right (all of them)."""
    right = 0
    for now, when, repeat, instant, rule in ROWS:
        try:
            got = _read(now, when, repeat)
        except WhenError as exc:
            right += instant == ERR and rule in str(exc)
        else:
            right += got == (instant, rule)
    assert right == len(ROWS)


def test_a_daily_rule_keeps_its_wall_time_across_the_spring_and_autumn_changes() -> None:
    first = parse_when("每天早上8点", NOWS["SPRING"], BERLIN)
    assert first.start is not None
    times = [first.at]
    for _ in range(3):
        nxt = next_occurrence(first.rrule, first.start, times[-1], BERLIN)
        assert nxt is not None
        times.append(nxt)
    assert [t.isoformat() for t in times] == [
        "2027-03-27T08:00:00+01:00",
        "2027-03-28T08:00:00+02:00",
        "2027-03-29T08:00:00+02:00",
        "2027-03-30T08:00:00+02:00",
    ]
    utc = [t.astimezone(ZoneInfo("UTC")) for t in times]
    assert utc[2] - utc[1] == timedelta(hours=24) and utc[1] - utc[0] == timedelta(hours=23)


def test_a_repeating_time_inside_the_gap_moves_forward_by_the_gap_and_a_doubled_one_comes_once() -> None:
    gap = parse_when("每天凌晨2点半", NOWS["SPRING"], BERLIN)
    assert gap.start is not None
    second = next_occurrence(gap.rrule, gap.start, gap.at, BERLIN)
    assert second is not None and second.isoformat() == "2027-03-28T03:30:00+02:00"
    third = next_occurrence(gap.rrule, gap.start, second, BERLIN)
    assert third is not None and third.isoformat() == "2027-03-29T02:30:00+02:00"

    doubled = parse_when("every sunday at 2:30am", NOWS["AUTUMN"], BERLIN)
    assert doubled.start is not None
    following = next_occurrence(doubled.rrule, doubled.start, doubled.at, BERLIN)
    assert following is not None and following.isoformat() == "2027-11-07T02:30:00+01:00"


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_when("明天", datetime(2026, 12, 2, 10, 15), SHANGHAI)
