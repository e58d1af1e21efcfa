"""Heartbeat loops and the archive / merge / review jobs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.heartbeat import (
    ArchiveJob,
    Heartbeat,
    HeartbeatLedger,
    MergeJob,
    ReviewJob,
    read_heartbeat_ledger,
)
from homeagent_sdk.types import Doc, Triple


async def test_a_heartbeat_runs_repeatedly_and_stops_at_once() -> None:
    calls: list[int] = []

    async def job() -> int:
        calls.append(1)
        return len(calls)

    beat = Heartbeat("tick", 0.01, job)
    beat.start()
    await beat.wait_runs(3, timeout=5)
    await beat.stop()
    assert not beat.running and beat.last_result >= 3
    done = len(calls)
    beat.trigger()  # stopped: nothing runs any more
    assert len(calls) == done


async def test_trigger_runs_now_and_interval_changes_apply_to_the_current_wait() -> None:
    beat = Heartbeat("slow", 3600, lambda: "sync job ran in a thread")
    beat.start()
    beat.trigger()
    await beat.wait_runs(1, timeout=5)
    assert beat.last_result == "sync job ran in a thread"
    beat.set_interval(0.01)
    await beat.wait_runs(2, timeout=5)
    await beat.aclose()


async def test_a_failing_job_is_counted_and_the_loop_goes_on() -> None:
    async def boom() -> None:
        raise RuntimeError("disk on fire")

    beat = Heartbeat("boom", 0.01, boom)
    beat.start()
    await beat.wait_runs(2, timeout=5)
    await beat.stop()
    assert beat.failures >= 2 and beat.last_error == "RuntimeError: disk on fire"


async def test_a_failing_heartbeat_stays_in_its_ledger_until_it_succeeds(tmp_path: Path) -> None:
    path = tmp_path / "heartbeats.json"
    broken = True

    def refresh() -> int:
        if broken:
            raise ModuleNotFoundError("No module named 'scipy'")
        return 3

    beat = Heartbeat("analytics", 3600, refresh, ledger=HeartbeatLedger(path))
    await beat.run_once()
    entry = read_heartbeat_ledger(path)["analytics"]
    assert entry["ok"] is False and entry["error"] == "ModuleNotFoundError: No module named 'scipy'"
    written = path.stat().st_mtime_ns, path.read_text(encoding="utf-8")
    await beat.run_once()  # the same failure again: the file is not rewritten
    assert (path.stat().st_mtime_ns, path.read_text(encoding="utf-8")) == written
    assert read_heartbeat_ledger(path)["analytics"]["since"] == entry["since"]
    # a restarted daemon reads the ledger back, and a success clears the failure
    broken = False
    again = Heartbeat("analytics", 3600, refresh, ledger=HeartbeatLedger(path))
    assert await again.run_once() == 3
    assert read_heartbeat_ledger(path)["analytics"] == {"ok": True, "error": "", "since": again.last_run_at}


def test_an_unreadable_ledger_reads_as_empty(tmp_path: Path) -> None:
    (tmp_path / "heartbeats.json").write_text("{not json", encoding="utf-8")
    assert read_heartbeat_ledger(tmp_path / "heartbeats.json") == {}
    assert read_heartbeat_ledger(tmp_path / "missing.json") == {}


async def test_stop_cancels_a_run_that_outlives_the_grace_period() -> None:
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    beat = Heartbeat("hang", 3600, hang, run_at_start=True)
    beat.start()
    await asyncio.wait_for(started.wait(), 5)
    await beat.stop(grace_s=0.05)
    assert not beat.running


def test_a_non_positive_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s must be > 0"):
        Heartbeat("bad", 0, lambda: None)


class Documents:
    """An in-memory document store speaking the ColdDocuments protocol."""

    def __init__(self, docs: list[Doc]) -> None:
        self.docs = {d.id: d for d in docs}

    async def cold_documents(self, older_than_s: float, max_reads: int, limit: int) -> list[Doc]:
        assert (older_than_s, max_reads) == (72 * 3600, 2)
        return list(self.docs.values())[:limit]

    async def remove_document(self, doc_id: str) -> None:
        del self.docs[doc_id]

    async def defer_document(self, doc_id: str) -> None:
        self.deferred = [*getattr(self, "deferred", []), doc_id]


class LLM:
    def __init__(self, answer: str) -> None:
        self.answer, self.prompts = answer, []

    async def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answer


@pytest.fixture
def graph(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> GraphStore:
    g = open_graph(tmp_path / "graph.db")
    yield g
    g.close()


async def test_archive_turns_cold_documents_into_triples_and_removes_them(graph: GraphStore) -> None:
    docs = Documents([Doc("d1", "旅行", "小王上个月去了西湖，他很喜欢龙井茶。")])
    llm = LLM(
        '好的：[{"subject": "小王", "relation": "去过", "object": "西湖"},'
        ' {"subject": "小王", "relation": "喜欢", "object": "龙井茶"}]'
    )
    report = await ArchiveJob(graph, docs, llm)()
    assert report == {"documents": 1, "triples": 2, "unparsed": 0}
    assert "小王上个月去了西湖" in llm.prompts[0]
    rel = graph.recall(["龙井茶"]).relations[0]
    assert rel.sentence.startswith("小王上个月") and rel.session == "archive:d1"
    assert docs.docs == {}
    assert await ArchiveJob(graph, docs, llm)() == {"documents": 0, "triples": 0, "unparsed": 0}
    assert len(llm.prompts) == 1  # nothing cold: no LLM call


async def test_archive_keeps_a_document_when_the_answer_is_not_json(graph: GraphStore) -> None:
    docs = Documents([Doc("d1", "t", "内容")])
    report = await ArchiveJob(graph, docs, LLM("抱歉，我不知道"))()
    assert report["unparsed"] == 1 and "d1" in docs.docs and docs.deferred == ["d1"]


async def test_an_unparsed_archive_answer_defers_the_document_so_other_cold_documents_get_their_turn(
    graph: GraphStore, tmp_path: Path
) -> None:
    import time
    from types import SimpleNamespace

    from homeagent_core.memory.documents.store import DocumentStore
    from homeagent_core.memory.plugin import _ColdDocs

    store = DocumentStore(tmp_path / "documents.db")
    old = time.time() - 80 * 3600
    stubborn = [await store.add(f"难以提炼的文档 {i}", created_at=old - i) for i in range(3)]
    fresh = await store.add("小王上个月去了西湖", created_at=old + 1)
    llm = LLM("抱歉，我不知道")
    job = ArchiveJob(graph, _ColdDocs(SimpleNamespace(documents=store)), llm, batch=3)  # type: ignore[arg-type]
    assert (await job())["unparsed"] == 3  # the three oldest: none parses
    llm.answer = '[{"subject": "小王", "relation": "去过", "object": "西湖"}]'
    report = await job()
    assert report == {"documents": 1, "triples": 1, "unparsed": 0}  # the next cold one is not starved
    assert fresh.id not in store and all(d.id in store for d in stubborn)  # kept, not lost
    assert {store.get(d.id).access_count for d in stubborn} == {1}  # type: ignore[union-attr]
    assert await job() == {"documents": 0, "triples": 0, "unparsed": 0}
    assert len(llm.prompts) == 4  # deferred documents wait for the next cold period
    store.close()


async def test_merge_proposes_similar_names_once_through_the_self_input_queue(
    graph: GraphStore,
) -> None:
    graph.commit(
        [
            Triple("张三丰老师", "教", "太极拳"),
            Triple("张三丰老师傅", "住在", "武当山"),
            Triple("Alice", "likes", "tea"),
        ]
    )
    sent: list[str] = []

    async def submit(text: str) -> None:
        sent.append(text)

    job = MergeJob(graph, submit)
    assert await job() == 1
    assert "张三丰老师 ↔ 张三丰老师傅（名称相似度 0.80）" in sent[0] and "memory_merge" in sent[0]
    assert await job() == 0 and len(sent) == 1


async def test_review_applies_verdicts_and_does_not_ask_again(graph: GraphStore) -> None:
    graph.commit([Triple("小王", "住在", "杭州", sentence_text="小王住在杭州")])
    graph.commit([Triple("小王", "讨厌", "咖啡", sentence_text="小王喜欢咖啡")])
    graph.commit([Triple("小王", "养了", "猫咪", sentence_text="小王说他从没养过猫")])
    graph.commit([Triple("小李", "认识", "小王")])  # no sentence: nothing to check against
    answer = json.dumps(
        [
            {"id": 1, "verdict": "keep"},
            {"id": 2, "verdict": "fix", "relation": "喜欢"},
            {"id": 3, "verdict": "drop"},
        ]
    )
    llm = LLM(answer)
    job = ReviewJob(graph, llm)
    assert await job() == {"reviewed": 3, "dropped": 1, "fixed": 1, "unanswered": 0, "given_up": 0}
    assert "小王 -讨厌-> 咖啡 | 原句: 小王喜欢咖啡" in llm.prompts[0]
    rels = {(r.type, r.target) for r in graph.recall(["小王"]).relations}
    assert rels == {("住在", "杭州"), ("喜欢", "咖啡"), ("认识", "小王")}
    assert await job() == {"reviewed": 0, "dropped": 0, "fixed": 0, "unanswered": 0, "given_up": 0}
    assert len(llm.prompts) == 1
    assert graph.cache.snapshot() == graph.sql_snapshot()


def _unreviewed(graph: GraphStore) -> set[str]:
    rows = graph.read(
        lambda c: c.execute(
            "SELECT r.type FROM relations r WHERE r.reviewed_at IS NULL OR r.reviewed_at < r.updated_at"
        ).fetchall()
    )
    return {r[0] for r in rows}


async def test_review_answer_that_does_not_parse_reviews_nothing_and_is_retried_a_bounded_number_of_times(
    graph: GraphStore, caplog: pytest.LogCaptureFixture
) -> None:
    graph.commit([Triple("小王", "住在", "杭州", sentence_text="小王住在杭州")])
    graph.commit([Triple("小王", "喜欢", "咖啡", sentence_text="小王喜欢咖啡")])
    llm = LLM("抱歉，我现在无法判断。")
    job = ReviewJob(graph, llm, max_attempts=3)
    first = await job()
    assert first == {"reviewed": 0, "dropped": 0, "fixed": 0, "unanswered": 2, "given_up": 0}
    assert _unreviewed(graph) == {"住在", "喜欢"}  # unparsed means unreviewed
    assert (await job())["unanswered"] == 2 and len(llm.prompts) == 2  # asked again
    third = await job()
    assert third["given_up"] == 2 and "stay as they are, unreviewed" in caplog.text
    assert await job() == {"reviewed": 0, "dropped": 0, "fixed": 0, "unanswered": 0, "given_up": 0}
    assert len(llm.prompts) == 3  # bounded: no fourth question about the same batch
    assert _unreviewed(graph) == {"住在", "喜欢"}

    # A relation that changes is due again, with a fresh budget of attempts.
    graph._clock = lambda: 4_000_000_000.0
    graph.commit([Triple("小王", "住在", "杭州", sentence_text="小王住在杭州")])
    llm.answer = json.dumps([{"id": 1, "verdict": "keep"}])
    assert (await job())["reviewed"] == 1
    assert "小王 -住在-> 杭州" in llm.prompts[-1] and "咖啡" not in llm.prompts[-1]
    assert _unreviewed(graph) == {"喜欢"}
    assert graph.cache.snapshot() == graph.sql_snapshot()


async def test_review_marks_only_the_relations_the_answer_gave_a_verdict(graph: GraphStore) -> None:
    graph.commit([Triple("小王", "住在", "杭州", sentence_text="小王住在杭州")])
    graph.commit([Triple("小王", "喜欢", "咖啡", sentence_text="小王喜欢咖啡")])
    graph.commit([Triple("小王", "养了", "猫咪", sentence_text="小王养了一只猫")])
    llm = LLM(json.dumps([{"id": 1, "verdict": "keep"}, {"id": 3, "verdict": "maybe"}]))
    report = await ReviewJob(graph, llm)()
    assert report == {"reviewed": 1, "dropped": 0, "fixed": 0, "unanswered": 2, "given_up": 0}
    assert _unreviewed(graph) == {"喜欢", "养了"}
