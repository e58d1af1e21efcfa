"""Repeated messages in the document store: one place for a text, the copies listed with it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from homeagent_core.memory.documents.ranking import collapse_repeats
from homeagent_core.memory.documents.store import Document, DocumentStore
from homeagent_sdk.visibility import EVERYONE

_FILLER = [
    "今天下班路上买了一袋苹果。",
    "周末打算去图书馆还书。",
    "晚饭做了番茄炒蛋，味道还行。",
    "早上地铁特别挤，差点迟到。",
    "最近在看一部讲历史的纪录片。",
    "阳台上的绿萝又长出了新叶子。",
]


def _docs(texts: list[str]) -> list[Document]:
    return [Document(content=t, source="chat", created_at=1000.0 * (i + 1)) for i, t in enumerate(texts)]


async def test_repeated_messages_take_one_place_and_the_answer_gets_in(tmp_path: Path) -> None:
    repeats = ["王芳的名字就是王芳。", "王芳的名字就是王芳！", "王芳的名字就是王芳", "王芳的名字就是王芳。"]
    answer = "王芳是我的上司，她今年44岁。"
    docs = _docs([*repeats, *_FILLER, answer])
    store = DocumentStore(tmp_path / "docs.db", None)
    try:
        await store.add_many(docs)
        hits = await store.query("王芳的年龄是多少？", 2, touch=False, audience=EVERYONE)
        ids = [h.document.id for h in hits]
        assert ids[0] in {d.id for d in docs[:4]}, [h.document.content for h in hits]
        # the other copies of the same message are listed with its place, oldest first
        assert hits[0].duplicates == tuple(d.id for d in docs[:4] if d.id != ids[0])
        assert ids[1] == docs[-1].id, [h.document.content for h in hits]
        assert hits[1].duplicates == ()
    finally:
        store.close()


async def test_copies_in_a_reopened_store_and_new_ones_collapse_alike(tmp_path: Path) -> None:
    """The copies read back from the snapshot and one added after reopening share a fingerprint."""
    path = tmp_path / "docs.db"
    first = _docs(["小李下周三去杭州出差。", *_FILLER, "小李下周三去杭州出差。"])
    store = DocumentStore(path, None)
    await store.add_many(first)
    store.close()
    store = DocumentStore(path, None)
    try:
        late = Document(content="小李下周三去杭州出差！", source="chat", created_at=99_000.0)
        await store.add_many([late])
        hits = await store.query("小李什么时候去杭州？", 3, touch=False, audience=EVERYONE)
        copies = [first[0].id, first[-1].id, late.id]
        assert hits[0].document.id in copies
        assert hits[0].duplicates == tuple(c for c in copies if c != hits[0].document.id)
        assert "杭州" not in "".join(h.document.content for h in hits[1:])
    finally:
        store.close()


async def test_more_copies_than_the_pool_still_leave_distinct_places(tmp_path: Path) -> None:
    texts = ["提醒我明天给妈妈打电话。"] * 60 + ["妈妈的电话号码换成了新的。", "明天上午有个会。"]
    store = DocumentStore(tmp_path / "docs.db", None)
    try:
        docs = _docs(texts)
        await store.add_many(docs)
        hits = await store.query("明天给妈妈打电话", 3, touch=False, audience=EVERYONE)
        assert len({h.document.content for h in hits}) == 3, [h.document.content for h in hits]
        copies = [h for h in hits if h.document.content == texts[0]]
        assert len(copies) == 1 and copies[0].duplicates
        # the copies listed are those the query ranked (its pool), each one a copy
        listed = {d.id for d in docs[:60]} & set(copies[0].duplicates)
        assert listed == set(copies[0].duplicates)
        assert {h.document.id for h in hits if h not in copies} == {docs[-2].id, docs[-1].id}
    finally:
        store.close()


def test_an_entry_without_terms_is_never_a_repeat() -> None:
    pool = [(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6), (5, 0.5)]
    kept, twins = collapse_repeats(pool, [b"a", b"", b"a", b"", b"b"], 3)
    assert kept == [(1, 0.9), (2, 0.8), (4, 0.6)]
    assert twins == {1: [3]}


def _bench() -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    import bench_memory_zh

    return bench_memory_zh


async def test_the_bench_reads_the_converted_format_and_drops_equivalent_items(tmp_path: Path) -> None:
    """A made-up haystack in the converted format: the equivalent copy of the answer leaves the
    ranking, and the place it held stands for the evidence copy collapsed into it."""
    bench = _bench()
    texts = ["张伟的生日是五月三号。", *_FILLER, "张伟的生日是五月三号。", "张伟喜欢打羽毛球。"]
    items = [{"id": f"m{i}", "speaker": "我", "text": t, "timestamp": 1000.0 * (i + 1)} for i, t in enumerate(texts)]
    question = {"question": "张伟的生日是哪天？", "category": "simple", "evidence": ["m7"], "equivalent": ["m0"]}
    data = {"id": "user_x", "items": items, "questions": [question]}
    turns, questions = bench.load(data)
    assert turns[0] == ("m0", "我: 张伟的生日是五月三号。", 1000.0) and questions == [question]
    rows, latencies = await bench.run_conversation(data, None, tmp_path)
    assert len(latencies) == 1
    assert rows["store"][0]["retrieved"][0] == "m7"
    assert "m0" not in rows["store"][0]["retrieved"]
    assert "m0" not in rows["bm25-bigram"][0]["retrieved"] and "m7" in rows["bm25-bigram"][0]["retrieved"]
    # one place for both copies (m0 leaves it, m7 stays), then the other turn that names 张伟
    assert rows["bm25-bigram-collapsed"][0]["retrieved"] == ["m7", "m8"]
