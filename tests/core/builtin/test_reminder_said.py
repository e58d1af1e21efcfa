"""One sentence into when and what (the web UI's reminder box), and RRULEs said in words."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from homeagent_core.builtin.reminder_said import rule_in_words, split_said
from homeagent_core.builtin.when import WhenError

ZONE = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 12, 7, 8, 0, tzinfo=ZONE)  # a Monday morning


@pytest.mark.parametrize(
    ("said", "when", "text", "due"),
    [
        ("明天早上7点 吃药", "明天早上7点", "吃药", "2026-12-08T07:00:00+08:00"),
        ("明天早上7点吃药", "明天早上7点", "吃药", "2026-12-08T07:00:00+08:00"),
        ("明天早上7点 3片药", "明天早上7点", "3片药", "2026-12-08T07:00:00+08:00"),
        ("每个工作日早上7点提醒我叫孩子起床", "每个工作日早上7点", "叫孩子起床", "2026-12-08T07:00:00+08:00"),
        ("周六下午3点提醒我去游泳", "周六下午3点", "去游泳", "2026-12-12T15:00:00+08:00"),
        ("提醒我 后天晚上 倒垃圾", "后天晚上", "倒垃圾", "2026-12-09T20:00:00+08:00"),
        ("tomorrow 9am call mum", "tomorrow 9am", "call mum", "2026-12-08T09:00:00+08:00"),
        ("remind me to call mum tomorrow at 9am", "tomorrow at 9am", "call mum", "2026-12-08T09:00:00+08:00"),
        ("water the plants next Friday 9am", "next Friday 9am", "water the plants", "2026-12-18T09:00:00+08:00"),
        ("in 2 hours take the tea out", "in 2 hours", "take the tea out", "2026-12-07T10:00:00+08:00"),
    ],
)
def test_a_sentence_is_read_into_when_and_what(said: str, when: str, text: str, due: str) -> None:
    found = split_said(said, NOW, ZONE)
    assert (found.when_text, found.text, found.when.at.isoformat()) == (when, text, due)


def test_a_repeat_in_the_sentence_is_kept() -> None:
    found = split_said("每周一三五晚上8点 倒垃圾", NOW, ZONE)
    assert found.when.rrule == "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=20;BYMINUTE=0;BYSECOND=0"
    assert found.text == "倒垃圾"


@pytest.mark.parametrize(
    ("said", "question"),
    [
        ("下下下周八 吃药", "what time do you mean?"),
        ("吃药", "what time do you mean?"),
        ("明天早上7点", "what should the reminder say?"),
        ("明天早上7点提醒我", "what should the reminder say?"),
        ("   ", "say when and what"),
        ("x" * 600, "in under 500"),
    ],
)
def test_what_it_cannot_read_is_asked_back(said: str, question: str) -> None:
    with pytest.raises(WhenError, match=question.replace("?", r"\?")):
        split_said(said, NOW, ZONE)


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ("", ""),
        ("FREQ=DAILY;BYHOUR=8;BYMINUTE=0;BYSECOND=0", "每天 08:00 · every day at 08:00"),
        ("FREQ=DAILY;INTERVAL=2;BYHOUR=8;BYMINUTE=0", "每2天 08:00 · every 2 days at 08:00"),
        ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=0", "每个工作日 07:00 · every weekday at 07:00"),
        ("FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=10;BYMINUTE=0", "每个周末 10:00 · every weekend at 10:00"),
        ("FREQ=WEEKLY;BYDAY=SA;BYHOUR=15;BYMINUTE=0", "每周六 15:00 · every Saturday at 15:00"),
        ("FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=30", "每隔一周周二 09:30 · every other Tuesday at 09:30"),
        ("FREQ=WEEKLY;INTERVAL=3;BYDAY=MO;BYHOUR=9;BYMINUTE=0", "每3周周一 09:00 · every 3 weeks on Monday at 09:00"),
        ("FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0", "每月1号 09:00 · every month on the 1st at 09:00"),
        ("FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=9;BYMINUTE=0", "每月最后一天 09:00 · the last day of every month at 09:00"),
        ("FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=24;BYHOUR=20;BYMINUTE=0",
         "每年12月24日 20:00 · every year on December 24 at 20:00"),
        ("FREQ=HOURLY;INTERVAL=2", "每2小时 · every 2 hours"),
        ("FREQ=MINUTELY;INTERVAL=1", "每分钟 · every minute"),
        ("FREQ=SECONDLY", "FREQ=SECONDLY"),
    ],
)
def test_rules_in_words(rule: str, words: str) -> None:
    assert rule_in_words(rule) == words
