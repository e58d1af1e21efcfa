from __future__ import annotations

import random

import pytest

from homeagent_core.lexical.buckets import char_ngrams
from homeagent_core.memory.documents.store import Document, DocumentStore, format_related
from homeagent_sdk.errors import UsageError
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.visibility import EVERYONE

TURNS = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: That's great! I painted a sunrise over the lake last week.",
    "Caroline: The transgender stories there were really inspiring.",
    "Melanie: My kids loved the camping trip to the mountains.",
    "Caroline: I'm researching adoption agencies for the future.",
]


async def make_store(tmp_path, embedder=None, *, open_documents=DocumentStore, **kw) -> DocumentStore:
    store = open_documents(tmp_path / "documents.db", embedder, **kw)
    await store.add_many(
        [Document(content=t, source="chat", created_at=1000.0 + i) for i, t in enumerate(TURNS)]
    )
    return store


def test_char_ngrams_stay_inside_words_and_lowercase():
    grams = char_ngrams("Hi, Mel")
    assert " h" in grams and "hi " in grams and " mel" in grams and "mel " in grams
    assert not any("," in g for g in grams)
    assert "i m" not in grams


async def test_lexical_query_finds_partial_word_forms(tmp_path, open_documents):
    store = await make_store(tmp_path, neighbour_weight=0.0, open_documents=open_documents)
    hits = await store.query("When did Melanie paint?", 1, audience=EVERYONE)
    assert hits[0].document.content == TURNS[1]
    hits = await store.query("adoption agency research", 2, audience=EVERYONE)
    assert hits[0].document.content == TURNS[4]
    store.close()


async def test_dense_and_lexical_paths_are_fused(tmp_path, open_documents):
    store = await make_store(tmp_path, FakeEmbedder(64), neighbour_weight=0.0, open_documents=open_documents)
    assert store.stats()["dense_rows"] == len(TURNS)
    hits = await store.query("camping trip mountains", 3, audience=EVERYONE)
    assert hits[0].document.content == TURNS[3]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    store.close()


async def test_neighbouring_turns_share_part_of_a_match(tmp_path, open_documents):
    plain = await make_store(tmp_path / "a", neighbour_weight=0.0, open_documents=open_documents)
    linked = await make_store(tmp_path / "b", neighbour_weight=0.5, open_documents=open_documents)
    q = "sunrise lake"
    score_plain = {h.document.content: h.score for h in await plain.query(q, 5, audience=EVERYONE)}
    score_linked = {h.document.content: h.score for h in await linked.query(q, 5, audience=EVERYONE)}
    # each turn receives half of its neighbours' own scores, nothing from further away.
    for i, turn in enumerate(TURNS):
        neighbours = sum(score_plain.get(TURNS[j], 0.0) for j in (i - 1, i + 1) if 0 <= j < len(TURNS))
        expected = score_plain.get(turn, 0.0) + 0.5 * neighbours
        assert score_linked.get(turn, 0.0) == pytest.approx(expected, rel=1e-5)
    assert score_linked[TURNS[2]] > score_plain.get(TURNS[2], 0.0)
    plain.close()
    linked.close()


async def test_documents_of_other_sources_or_far_apart_are_not_neighbours(tmp_path, open_documents):
    store = open_documents(tmp_path / "d.db", neighbour_weight=0.5, neighbour_window=60)
    await store.add_many(
        [
            Document(content="zebra stripes are unique", source="a", created_at=0),
            Document(content="unrelated words here", source="b", created_at=1),
            Document(content="other words again", source="a", created_at=10_000),
        ]
    )
    hits = await store.query("zebra", 5, audience=EVERYONE)
    assert [h.document.content for h in hits] == ["zebra stripes are unique"]
    store.close()


async def test_query_results_and_timestamps_survive_a_restart(tmp_path, open_documents):
    store = await make_store(tmp_path, FakeEmbedder(64), open_documents=open_documents)
    before = [(h.document.id, round(h.score, 5)) for h in await store.query("support group", 3, touch=False,
        audience=EVERYONE)]
    store.close()
    reopened = open_documents(tmp_path / "documents.db", FakeEmbedder(64))
    after = [(h.document.id, round(h.score, 5)) for h in await reopened.query("support group", 3, touch=False,
        audience=EVERYONE)]
    assert after == before
    assert sorted(d.created_at for d in reopened.all()) == [1000.0 + i for i in range(5)]
    reopened.close()


async def test_store_reopened_without_snapshot_after_a_crash_rebuilds_the_index(tmp_path):
    store = await make_store(tmp_path)
    store.flush()
    extra = await store.add("Melanie: pottery class made a bowl", source="chat", created_at=2000)
    store.delete([store.all()[0].id])
    before = [h.document.id for h in await store.query("pottery bowl support", 5, touch=False, audience=EVERYONE)]
    # no close(): the snapshot is older than the database, as after kill -9
    store._sql.db.close()
    reopened = DocumentStore(tmp_path / "documents.db")
    after = [h.document.id for h in await reopened.query("pottery bowl support", 5, touch=False, audience=EVERYONE)]
    assert after == before and extra.id in after
    reopened._sql.db.close()
    (tmp_path / "documents.db.lex").unlink()
    rebuilt = DocumentStore(tmp_path / "documents.db")
    assert [h.document.id for h in await rebuilt.query("pottery bowl support", 5, touch=False,
        audience=EVERYONE)] == before
    rebuilt.close()


async def test_delete_removes_a_document_from_both_paths(tmp_path, open_documents):
    store = await make_store(tmp_path, FakeEmbedder(64), open_documents=open_documents)
    target = next(d for d in store.all() if "camping" in d.content)
    assert store.delete([target.id]) == 1
    assert target.id not in store
    hits = await store.query("camping trip mountains", 5, audience=EVERYONE)
    assert target.id not in {h.document.id for h in hits}
    assert store.stats()["dense_rows"] == len(TURNS) - 1
    store.close()


async def test_consume_returns_and_deletes_the_hits(tmp_path, open_documents):
    store = await make_store(tmp_path, open_documents=open_documents)
    hits = await store.consume("adoption agencies", 1, audience=EVERYONE)
    assert hits[0].document.content == TURNS[4]
    assert len(store) == len(TURNS) - 1
    assert store.get(hits[0].document.id) is None
    store.close()


async def test_find_cold_lists_old_rarely_read_documents(tmp_path, open_documents):
    store = await make_store(tmp_path, open_documents=open_documents)
    for _ in range(3):
        await store.query("adoption agencies", 1, audience=EVERYONE)
    cold = store.find_cold(older_than=3600, now=1000.0 + 4 + 3600 * 2)
    contents = {d.content for d in cold}
    assert TURNS[0] in contents and TURNS[4] not in contents
    store.close()


async def test_vectors_of_another_space_are_reembedded(tmp_path, open_documents):
    store = await make_store(tmp_path, FakeEmbedder(32, name="old"), open_documents=open_documents)
    store.close()
    new = open_documents(tmp_path / "documents.db", FakeEmbedder(64, name="new"))
    assert new.stale_count == len(TURNS) and new.stats()["dense_rows"] == 0
    assert await new.reembed_stale() == len(TURNS)
    assert new.stats()["dense_rows"] == len(TURNS)
    new.close()
    again = open_documents(tmp_path / "documents.db", FakeEmbedder(64, name="new"))
    assert again.stale_count == 0
    again.close()


async def test_empty_documents_and_duplicate_ids_are_rejected(tmp_path, open_documents):
    store = open_documents(tmp_path / "d.db")
    with pytest.raises(UsageError, match="non-empty"):
        await store.add("   ")
    doc = await store.add("hello")
    with pytest.raises(UsageError, match="already exists"):
        await store.add_many([Document(content="x", id=doc.id)])
    store.close()
    with pytest.raises(UsageError, match="closed"):
        await store.add("after close")


def test_related_block_is_empty_without_hits():
    assert format_related([]) == ""


async def test_ranking_a_pool_of_the_best_gives_what_smoothing_every_score_gives(tmp_path, open_documents, monkeypatch):
    """Past ``SMOOTH_POOL`` documents only the best are smoothed, when that provably changes nothing."""
    from homeagent_core.memory.documents import ranking as doc_ranking
    from homeagent_core.memory.documents import time_order

    store = open_documents(tmp_path / "d.db", FakeEmbedder(32), neighbour_weight=0.3)
    rng = random.Random(4)
    words = [
        "paint", "lake", "camping", "adoption", "sunrise", "mountain", "support", "kids", "group", "trip",
        "stories", "research", "garden", "piano", "recipe", "dog", "marathon", "library", "concert", "beach",
        "pottery", "novel", "bicycle", "museum",
    ]
    docs = [
        Document(
            content=f"{rng.choice(['Caroline', 'Melanie'])}: " + " ".join(rng.choices(words, k=rng.randint(4, 12))),
            source=f"chat{i // 50}",
            created_at=1000.0 + i,
        )
        for i in range(1500)
    ]
    await store.add_many(docs)
    queries = ["sunrise over the lake", "camping trip with the kids", "adoption research", "support group stories"]
    pooled = [[(h.document.id, h.score) for h in await store.query(q, 8, audience=EVERYONE)] for q in queries]
    calls = []
    real = time_order.TimeOrder.top_smoothed

    def counted(self, *args, **kwargs):
        calls.append(found := real(self, *args, **kwargs))
        return found

    monkeypatch.setattr(time_order.TimeOrder, "top_smoothed", counted)
    assert [[(h.document.id, h.score) for h in await store.query(q, 8, audience=EVERYONE)] for q in queries] == pooled
    assert any(c is not None for c in calls)  # the pool answered at least once...
    monkeypatch.setattr(doc_ranking, "SMOOTH_POOL", 10**9)  # ...and smoothing everything agrees
    assert [[(h.document.id, h.score) for h in await store.query(q, 8, audience=EVERYONE)] for q in queries] == pooled
    store.close()


async def test_a_dense_leg_on_its_own_thread_ranks_exactly_as_one_run_in_line(tmp_path, monkeypatch):
    """Large stores score the dense leg beside the lexical one; the fused scores are the same bits."""
    import threading

    from homeagent_core.memory.documents import ranking as doc_ranking

    store = DocumentStore(tmp_path / "d.db", FakeEmbedder(32), neighbour_weight=0.3)
    rng = random.Random(9)
    words = [
        "paint", "lake", "camping", "adoption", "sunrise", "mountain", "support", "kids", "group", "trip",
        "stories", "research",
    ]
    await store.add_many(
        [
            Document(content=" ".join(rng.choices(words, k=rng.randint(3, 9))), source="chat", created_at=1000.0 + i)
            for i in range(400)
        ]
    )
    queries = ["sunrise over the lake", "camping trip with the kids", "adoption research"]
    inline = [[(h.document.id, h.score) for h in await store.query(q, 6, audience=EVERYONE)] for q in queries]
    threads: set[str] = set()
    real = doc_ranking._dense_leg

    def leg(*args, **kwargs):
        threads.add(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(doc_ranking, "_dense_leg", leg)
    monkeypatch.setattr(doc_ranking, "PARALLEL_MIN", 1)
    assert [[(h.document.id, h.score) for h in await store.query(q, 6, audience=EVERYONE)] for q in queries] == inline
    assert threads and all(name.startswith("homeagent-query") for name in threads)
    store.close()
