"""RuleDistiller: patterns, persisted raw records, batches, retention, no double distillation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from homeagent_core.memory.distill import RuleDistiller, extract_triples
from homeagent_core.memory.graph.store import GraphStore


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我叫小王，住在杭州。", [("叫", "小王"), ("住在", "杭州")]),
        ("我喜欢吃火锅和唱歌", [("喜欢", "吃火锅")]),
        ("我今年25岁了", [("年龄", "25岁")]),
        ("我的工作是程序员", [("工作是", "程序员")]),
        ("My name is Alice and I live in Paris.", [("叫", "Alice"), ("住在", "Paris")]),
        ("I love jazz music. I'm 30 years old.", [("喜欢", "jazz music"), ("年龄", "30岁")]),
        ("my job is a nurse", [("工作是", "nurse")]),
        ("今天天气不错", []),
    ],
)
def test_patterns_extract_personal_facts(text: str, expected: list[tuple[str, str]]) -> None:
    triples = extract_triples(text)
    assert [(t.relation, t.object) for t in triples] == expected
    assert all(t.subject == "用户" and t.sentence_text == text.strip() for t in triples)


@pytest.mark.parametrize(
    "text",
    [
        "我住在哪里？",
        "我住在哪",
        "我住在北京吗？",
        "我是不是住在北京",
        "我叫小王吗",
        "我喜欢什么",
        "如果我住在北京，我会很开心",
        "假如我叫小明",
        "我希望我住在海边",
        "我叫不出他的名字",
        "我喜欢的不是猫",
        "我没有说我喜欢猫",
        "Do I live in Paris?",
        "Is my name Alice?",
        "If I live in Paris, I will walk to work",
        "Suppose my name is Alice.",
        "I don't think I live in Paris",
        "My name is not Bob",
    ],
)
def test_questions_hypotheticals_and_negations_are_not_facts(text: str) -> None:
    assert extract_triples(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我叫小王，住在杭州。你住在哪里？", [("叫", "小王"), ("住在", "杭州")]),
        ("我住在杭州，不住在北京", [("住在", "杭州")]),
        ("不过我住在杭州", [("住在", "杭州")]),
        ("如果下雨就算了。我喜欢猫", [("喜欢", "猫")]),
        ("My name is Alice. Do I like jazz?", [("叫", "Alice")]),
    ],
)
def test_a_statement_next_to_a_question_or_negation_still_counts(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(t.relation, t.object) for t in extract_triples(text)] == expected


def test_a_question_adds_no_relation_to_the_graph(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> None:
    graph = open_graph(tmp_path / "graph.db")
    distiller = RuleDistiller(tmp_path / "raw", graph)
    distiller.add("我住在哪里？")
    distiller.add("我住在杭州")
    report = distiller.distill_once()
    assert (report.records, report.triples) == (2, 1)
    assert sorted(graph.cache.ids_by_name) == ["杭州", "用户"]
    graph.close()


def test_records_are_persisted_atomically_and_distilled_in_batches(
    tmp_path: Path, open_graph: Callable[..., GraphStore]
) -> None:
    graph = open_graph(tmp_path / "graph.db")
    raw = tmp_path / "raw"
    distiller = RuleDistiller(raw, graph, batch_size=2)
    for text in ["我叫小王", "我住在杭州", "今天\t下雨\n了", "我的工作是医生"]:
        distiller.add(text, session="s")
    assert distiller.flush() == 4
    assert [p.name.endswith(".tsv") for p in raw.iterdir()] == [True]
    report = distiller.distill_once()
    assert (report.records, report.triples) == (2, 2)
    assert len(RuleDistiller(raw, graph)) == 2  # what is left on disk after the batch
    assert distiller.distill_once().records == 2
    assert list(raw.iterdir()) == []  # fully distilled files are removed
    names = sorted(graph.cache.ids_by_name)
    assert names == ["医生", "小王", "杭州", "用户"]
    graph.close()


def test_a_restart_never_distills_a_record_twice(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> None:
    graph = open_graph(tmp_path / "graph.db")
    raw = tmp_path / "raw"
    first = RuleDistiller(raw, graph)
    first.add("我叫小王")
    first.distill_once()
    first.add("我住在杭州")
    first.flush()  # persisted but not yet distilled when the process "dies"
    second = RuleDistiller(raw, graph)
    assert len(second) == 1
    second.distill_once()
    third = RuleDistiller(raw, graph)
    assert len(third) == 0 and third.distill_once().records == 0
    assert graph.cache.entity("小王").mention_count == 1
    assert graph.cache.entity("用户").mention_count == 2
    graph.close()


def test_unflushed_records_are_not_acknowledged_and_leftover_tmp_files_are_ignored(
    tmp_path: Path,
) -> None:
    graph = GraphStore(tmp_path / "graph.db")
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "raw_1.tsv.tmp").write_text("half a write", encoding="utf-8")
    d = RuleDistiller(raw, graph)
    d.add("我叫小王")
    assert len(RuleDistiller(raw, graph)) == 0
    assert not (raw / "raw_1.tsv.tmp").exists()
    graph.close()


def test_records_older_than_retention_are_dropped(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> None:
    graph = open_graph(tmp_path / "graph.db")
    now = [1_000_000.0]
    d = RuleDistiller(tmp_path / "raw", graph, retention_s=100, clock=lambda: now[0])
    d.add("我叫小王", ts=now[0] - 500)
    d.add("我住在杭州")
    report = d.distill_once()
    assert (report.expired, report.records) == (1, 1)
    assert graph.cache.entity("小王") is None and graph.cache.entity("杭州") is not None
    graph.close()


def test_startup_loads_only_the_newest_records(tmp_path: Path) -> None:
    graph = GraphStore(tmp_path / "graph.db")
    d = RuleDistiller(tmp_path / "raw", graph)
    for i in range(10):
        d.add(f"记录{i}", ts=1000.0 + i)
    d.flush()
    again = RuleDistiller(tmp_path / "raw", graph, max_load=3, retention_s=1e12)
    assert [r.text for r in again._queue] == ["记录7", "记录8", "记录9"]
    graph.close()


def test_a_batch_replayed_after_a_crash_before_the_raw_rewrite_counts_mentions_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_graph: Callable[..., GraphStore]
) -> None:
    graph = open_graph(tmp_path / "graph.db")
    raw = tmp_path / "raw"
    first = RuleDistiller(raw, graph)
    first.add("我叫小王", session="s")
    first.add("我住在杭州", session="s")
    first.flush()

    def crash(ids: set[str]) -> None:
        raise OSError("disk went away before the raw files were rewritten")

    monkeypatch.setattr(first, "_remove", crash)
    with pytest.raises(OSError, match="disk went away"):
        first.distill_once()
    assert graph.cache.entity("用户").mention_count == 2  # the graph side was committed
    second = RuleDistiller(raw, graph)  # the restart: the records are still on disk
    assert len(second) == 2
    report = second.distill_once()
    assert (report.records, report.replayed, report.triples) == (2, 2, 0)
    assert graph.cache.entity("用户").mention_count == 2
    assert graph.cache.entity("小王").mention_count == 1
    assert len(RuleDistiller(raw, graph)) == 0
    graph.close()
