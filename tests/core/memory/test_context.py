from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from homeagent_core.memory.context import ContextEvent, RelevanceContext, ToolOutput, text_for_vector
from homeagent_core.memory.documents.store import DocumentStore
from homeagent_sdk.errors import UsageError
from homeagent_sdk.testing import FakeEmbedder


def test_vector_text_follows_the_three_branch_rule():
    assert text_for_vector(ContextEvent(input="q", response="a", kind="user")) == "q"
    assert text_for_vector(ContextEvent(input="q", response="a", kind="agent")) == "a"
    assert text_for_vector(ContextEvent(input="q", response="a", kind="cold_storage")) == "q a"


def test_no_memory_cleaners_and_tool_outputs_shape_the_vector_text():
    event = ContextEvent(
        input="  hello\n\n world  ",
        tool_outputs=[
            ToolOutput("weather", "sunny  25C"),
            ToolOutput("secret", "token=abc", no_memory=True),
            ToolOutput("qq", "[CQ:at] hi", cleaner=lambda s: s.replace("[CQ:at]", "")),
        ],
    )
    assert text_for_vector(event) == "hello world sunny 25C hi"
    assert text_for_vector(event, channel_cleaner=str.upper).startswith("HELLO WORLD")
    assert text_for_vector(event, channel_no_memory=True) == ""
    assert text_for_vector(ContextEvent(input="x", no_memory=True)) == ""


def test_unknown_event_kind_is_rejected():
    with pytest.raises(UsageError, match="kind"):
        ContextEvent(input="x", kind="robot")


async def test_no_memory_event_keeps_its_text_but_gets_no_vector():
    ctx = RelevanceContext(embedder=FakeEmbedder(32))
    event = await ctx.append(ContextEvent(input="private", no_memory=True))
    assert event.vector is None and event.input == "private"
    event = await ctx.append(ContextEvent(input="public"))
    assert event.vector is not None and event.fingerprint == ctx.embedder.info.fingerprint


async def test_events_are_kept_in_timestamp_order():
    ctx = RelevanceContext()
    await ctx.append(ContextEvent(input="b", timestamp=20))
    await ctx.append(ContextEvent(input="a", timestamp=10))
    await ctx.append(ContextEvent(input="c", timestamp=30))
    assert [e.input for e in ctx.events] == ["a", "b", "c"]
    assert [e.input for e in ctx.timeline(max_chars=2)] == ["b", "c"]


async def _filled(open_documents, tmp_path, embedder, sources=None) -> tuple[RelevanceContext, DocumentStore]:
    store = open_documents(tmp_path / "documents.db")
    ctx = RelevanceContext(embedder=embedder, documents=store, max_context_size=14, protected=10)
    topics = ["猫咪 吃 鱼", "股票 市场 下跌", "猫咪 睡觉", "天气 晴朗", "猫咪 玩 毛线", "足球 比赛"]
    for i in range(20):
        source = sources[i] if sources else "webui"
        await ctx.append(ContextEvent(input=f"{topics[i % 6]} {i}", source=source, timestamp=100.0 + i))
    return ctx, store


@pytest.mark.parametrize("embedder", [None, FakeEmbedder(64)], ids=["lexical", "dense"])
async def test_prune_keeps_newest_ten_and_the_most_relevant_rest(tmp_path, embedder, open_documents):
    ctx, store = await _filled(open_documents, tmp_path, embedder)
    pruned = await ctx.prune("猫咪")
    kept = ctx.events
    assert len(kept) == 14 and len(pruned) == 6
    assert [e.timestamp for e in kept[-10:]] == [110.0 + i for i in range(10)]
    older = kept[:-10]
    assert all("猫咪" in e.input for e in older)
    assert [e.timestamp for e in kept] == sorted(e.timestamp for e in kept)
    assert await ctx.prune("猫咪") == []
    store.close()


async def test_pruned_events_are_archived_with_original_timestamps(tmp_path, open_documents):
    ctx, store = await _filled(open_documents, tmp_path, FakeEmbedder(64))
    pruned = await ctx.prune("猫咪")
    docs = store.all()
    assert sorted((d.created_at, d.content) for d in docs) == sorted(
        (e.timestamp, e.input) for e in pruned
    )
    assert {d.source for d in docs} == {"context_archived"}
    assert {d.meta["source"] for d in docs} == {"webui"}
    store.close()


async def test_agentcli_and_terminal_events_are_not_archived(tmp_path, open_documents):
    sources = ["terminal", "agentcli", "webui", "webui"] * 5
    ctx, store = await _filled(open_documents, tmp_path, None, sources)
    pruned = await ctx.prune("猫咪")
    archived = {d.meta["event_id"] for d in store.all()}
    assert archived == {e.id for e in pruned if e.source == "webui"}
    assert any(e.source in ("terminal", "agentcli") for e in pruned)
    store.close()


async def test_window_is_saved_after_the_debounce_and_reloaded(tmp_path):
    path = tmp_path / "memory" / "context.json"
    ctx = RelevanceContext(path, embedder=FakeEmbedder(32), debounce=0.05)
    await ctx.append(ContextEvent(input="我叫小王", source="webui", channel="webui", timestamp=1.0))
    await ctx.append(ContextEvent(response="你好", kind="agent", timestamp=2.0))
    assert ctx.save_pending
    async with asyncio.timeout(5):
        while ctx.save_pending or not path.exists():
            await asyncio.sleep(0.01)
    again = RelevanceContext(path, embedder=FakeEmbedder(32))
    assert [(e.input, e.response, e.kind) for e in again.events] == [
        ("我叫小王", "", "user"),
        ("", "你好", "agent"),
    ]
    assert again.events[0].vector is not None
    assert (again.events[0].vector == ctx.events[0].vector).all()


async def test_aclose_writes_pending_changes(tmp_path):
    path = tmp_path / "context.json"
    ctx = RelevanceContext(path, debounce=3600)
    await ctx.append(ContextEvent(input="remember me"))
    assert not path.exists()
    await ctx.aclose()
    assert [e.input for e in RelevanceContext(path).events] == ["remember me"]


def test_a_truncated_file_loads_every_complete_event(tmp_path, caplog):
    path = tmp_path / "context.json"
    ctx = RelevanceContext(path)
    ctx._events = [ContextEvent(input=f"event {i}", timestamp=float(i)) for i in range(5)]
    ctx.flush()
    raw = path.read_text()
    path.write_text(raw[: raw.index("event 4") - 20])
    loaded = RelevanceContext(path)
    assert [e.input for e in loaded.events] == [f"event {i}" for i in range(4)]
    assert "damaged" in caplog.text


def test_invalid_events_are_dropped_and_counted(tmp_path, caplog):
    path = tmp_path / "context.json"
    good = ContextEvent(input="ok", timestamp=1.0).to_dict()
    path.write_text(json.dumps({"version": 1, "events": [good, {"input": "no id"}, "junk"]}))
    loaded = RelevanceContext(path)
    assert [e.input for e in loaded.events] == ["ok"]
    assert loaded.dropped_on_load == 2
    assert "dropped event" in caplog.text


def test_lexical_pruning_scores_are_the_document_stores_bm25():
    from homeagent_core.memory.context import _lexical_similarities
    from homeagent_core.memory.documents.lexical.index import LexicalIndex

    texts = ["猫咪 吃 鱼", "", "the cat ate fish and the cat slept", "股票 市场 下跌", "cat"]
    reference = LexicalIndex(max_postings=None)
    for slot, text in enumerate(texts, start=1):
        reference.add(slot, text)
    expected = reference.scores("cat 猫咪")[1:6]
    got = _lexical_similarities("cat 猫咪", texts)
    assert got[1] == -1.0  # an empty event ranks last
    assert np.allclose(np.delete(got, 1), np.delete(expected, 1), rtol=1e-6)
    assert got[2] > got[3] and got[0] > got[3]


def test_lexical_pruning_scores_cost_the_events_not_an_index_per_prune():
    import tracemalloc

    from homeagent_core.memory.context import _lexical_similarities

    texts = [f"第 {i} 条消息：今天我们聊了天气和 the garden party number {i}" for i in range(25)]
    _lexical_similarities("garden 天气", texts)  # imports and caches outside the measurement
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        scores = _lexical_similarities("garden 天气", texts)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert len(scores) == 25 and (scores > 0).all()
    assert peak < 256 * 1024, f"scoring 25 events allocated {peak:,} bytes: an index over every bucket"


def test_lexical_pruning_counts_each_event_once_while_it_stays_in_the_window():
    from homeagent_core.memory.context import _lexical_similarities

    texts = ["the cat ate fish", "股票 市场 下跌", "a cat slept", ""]
    counted: dict = {}
    first = _lexical_similarities("cat 市场", texts, counted)
    assert set(counted) == set(texts)
    kept = {text: counted[text] for text in texts}
    # the next turn: one event left the window, one came in
    later = [*texts[1:], "猫咪 and the cat"]
    again = _lexical_similarities("cat 市场", later, counted)
    assert set(counted) == set(later)
    assert all(counted[text] is kept[text] for text in texts[1:])  # reused, not recounted
    assert np.array_equal(again, _lexical_similarities("cat 市场", later))
    assert np.array_equal(first, _lexical_similarities("cat 市场", texts))
