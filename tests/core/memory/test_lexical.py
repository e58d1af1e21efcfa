from __future__ import annotations

import dataclasses
import math
import random
import zlib

import numpy as np
import pytest

from homeagent_core.lexical.bm25 import score_texts
from homeagent_core.lexical.buckets import BUCKETS, char_ngrams, decode_many, decode_terms, encode_terms, term_counts
from homeagent_core.memory.documents.lexical import index as lexical
from homeagent_core.memory.documents.lexical.index import LexicalIndex
from homeagent_core.memory.documents.lexical.snapshot import (
    SnapshotArrays,
    read_snapshot,
    verify_arrays,
    write_snapshot,
)
from homeagent_core.memory.documents.lexical.snapshot import tmp_path as partial_path

_WORD_TEXT = (
    "alpha beta gamma delta paint painted sunrise lake camping adoption school melanie caroline "
    "小王 你好 museum pottery bowl guitar concert marathon yoga recipe dumplings"
)
WORDS = _WORD_TEXT.split()


def random_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 14))) for _ in range(count)]


def brute_force_bm25(texts: dict[int, str], query: str, k1: float = 1.2, b: float = 0.75) -> dict[int, float]:
    """Textbook BM25 over the same hashed grams, one document at a time."""
    docs = {slot: term_counts(text) for slot, text in texts.items()}
    n = len(docs)
    avgdl = sum(d[2] for d in docs.values()) / n
    wanted = set(term_counts(query)[0].tolist())
    sets = [set(d[0].tolist()) for d in docs.values()]
    df = {q: sum(q in terms for terms in sets) for q in wanted}
    out = {}
    for slot, (buckets, counts, length) in docs.items():
        score = 0.0
        for bucket, tf in zip(buckets.tolist(), counts.tolist(), strict=True):
            if bucket in wanted:
                idf = math.log1p((n - df[bucket] + 0.5) / (df[bucket] + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))
        out[slot] = score
    return out


def build_with_removals(monkeypatch, seed: int = 3) -> tuple[LexicalIndex, dict[int, str]]:
    monkeypatch.setattr(lexical, "DELTA_MAX", 400)  # many merges on a small index
    rng = random.Random(seed)
    index = LexicalIndex(max_postings=None)
    texts: dict[int, str] = {}
    slot = 0
    for text in random_texts(seed, 900):
        if texts and rng.random() < 0.15:
            victim = rng.choice(sorted(texts))
            index.remove(victim, term_counts(texts.pop(victim))[0])
        slot += rng.randint(1, 3)
        texts[slot] = text
        index.add(slot, text)
    return index, texts


def assert_matches(index: LexicalIndex, texts: dict[int, str], query: str) -> None:
    expected = brute_force_bm25(texts, query)
    index.word_norm = 0.0  # textbook BM25: every gram its own idf (word_weights is tested on its own)
    got = index.scores(query)
    for slot, value in expected.items():
        assert got[slot] == pytest.approx(value, rel=1e-4, abs=1e-5)
    dead = np.ones(len(got), dtype=bool)
    dead[list(texts)] = False
    assert not got[dead].any()


def test_char_ngrams_treat_a_cjk_run_as_one_word():
    assert "小王" in char_ngrams("见到小王") and " 见到小" in char_ngrams("见到小王")


@pytest.mark.parametrize("query", ["paint sunrise", "小王 museum camping", "alpha", "nothing-matches-zzz"])
def test_incremental_index_with_merges_and_removals_equals_textbook_bm25(monkeypatch, query):
    index, texts = build_with_removals(monkeypatch)
    assert index.delta_postings > 0 and index.base_watermark > 0  # both segments in use
    assert_matches(index, texts, query)
    index.merge()
    assert index.delta_postings == 0
    assert_matches(index, texts, query)


def test_bulk_build_scores_like_one_by_one_adds():
    texts = random_texts(5, 500)
    one_by_one = LexicalIndex()
    for slot, text in enumerate(texts, start=1):
        one_by_one.add(slot, text)
    blobs = [encode_terms(*term_counts(t)[:2]) for t in texts]
    terms, buckets, counts = decode_many(blobs)
    lengths = np.array([term_counts(t)[2] for t in texts])
    bulk = LexicalIndex.build(np.arange(1, 501), terms, buckets, counts, lengths)
    for query in ("pottery bowl", "melanie painted a sunrise", "你好"):
        assert np.allclose(bulk.scores(query), one_by_one.scores(query), rtol=1e-5)


def test_a_batch_of_documents_is_folded_into_the_base_once_and_scores_like_one_by_one_adds(monkeypatch):
    monkeypatch.setattr(lexical, "DELTA_MAX", 400)
    texts = random_texts(29, 500)
    single = LexicalIndex()
    for slot, text in enumerate(texts, start=1):
        single.add(slot, text)
    batch = LexicalIndex()
    merges = []
    original = LexicalIndex.merge
    monkeypatch.setattr(LexicalIndex, "merge", lambda self: (merges.append(1), original(self))[1])
    batch.add_many_terms(np.arange(1, 501, dtype=np.int64), [term_counts(t) for t in texts])
    assert len(merges) == 1 and batch.base_watermark == 500 and batch.delta_postings == 0
    for query in ("camping lake", "小王 你好", "pottery bowl guitar"):
        assert np.allclose(batch.scores(query), single.scores(query), rtol=1e-5)


def test_decode_many_equals_decoding_one_blob_at_a_time():
    blobs = [encode_terms(*term_counts(t)[:2]) for t in random_texts(9, 50)] + [b""]
    terms, buckets, counts = decode_many(blobs)
    singles = [decode_terms(b) for b in blobs]
    assert terms.tolist() == [len(s[0]) for s in singles]
    assert np.array_equal(buckets, np.concatenate([s[0] for s in singles]))
    assert np.array_equal(counts, np.concatenate([s[1] for s in singles]))
    with pytest.raises(ValueError, match="blob 1 has 7 bytes"):
        decode_many([b"", b"1234567"])


def test_slots_must_be_added_in_ascending_order():
    index = LexicalIndex()
    index.add(5, "hello")
    with pytest.raises(ValueError, match="not above the highest indexed slot 5"):
        index.add(5, "again")
    with pytest.raises(ValueError, match="ascend above"):
        index.add_bulk(np.array([3]), np.array([1]), np.array([7], np.uint32), np.array([1], np.uint16), np.array([1]))


def test_budgeted_scores_are_exact_for_the_best_documents_and_never_too_high():
    texts = {slot: text for slot, text in enumerate(random_texts(11, 3000), start=1)}
    texts[1500] = "pottery bowl guitar marathon dumplings yoga recipe"
    exact = LexicalIndex(max_postings=None)
    budget = LexicalIndex(max_postings=8000, rescore=100)
    for slot, text in texts.items():
        exact.add(slot, text)
        budget.add(slot, text)
    exact.merge()
    budget.merge()
    query = "pottery bowl for the guitar marathon"
    full, cheap = exact.scores(query), budget.scores(query)
    assert np.all(cheap <= full + 1e-4)  # a document outside the candidates keeps a partial score
    top = np.argsort(-cheap, kind="stable")[:100]
    assert np.allclose(cheap[top], full[top], rtol=1e-5)  # the best are rescored exactly
    assert set(np.argsort(-cheap)[:10].tolist()) == set(np.argsort(-full)[:10].tolist())
    assert 1500 in np.argsort(-full)[:10]
    # without rescoring the common buckets, the same documents score lower than exact BM25
    assert cheap[np.argsort(-cheap)[150:]].sum() < full[np.argsort(-cheap)[150:]].sum()
    # a named candidate gets its exact score even if the budgeted pass ranked it low
    low, other = (int(x) for x in np.argsort(-cheap)[-2:])
    assert cheap[low] < full[low] and cheap[other] < full[other]
    named = budget.scores(query, candidates=np.array([low]), expand=lambda c: np.array([other, 10**9]))
    assert named[low] == pytest.approx(full[low], rel=1e-5)
    assert named[other] == pytest.approx(full[other], rel=1e-5)  # added by expand


def test_candidate_lists_copied_as_runs_or_gathered_entry_by_entry_give_the_same_scores(monkeypatch):
    from homeagent_core.memory.documents.lexical import forward as lexical_forward

    texts = {slot: text for slot, text in enumerate(random_texts(29, 2500), start=1)}
    exact = LexicalIndex(max_postings=None)
    budget = LexicalIndex(max_postings=5000, rescore=80)
    for slot, text in texts.items():
        exact.add(slot, text)
        budget.add(slot, text)
    exact.merge()
    budget.merge()
    query = "pottery bowl for the guitar marathon at the lake"
    # runs of consecutive slots (a match and its neighbours) and lone slots
    picked = np.array([7, 8, 9, 10, 400, 1200, 1201, 2499, 2500], dtype=np.int64)
    got = {}
    for label, slices in (("runs", 0), ("entries", 10**9)):
        monkeypatch.setattr(lexical_forward, "RUN_SLICES", slices)
        got[label] = budget.scores(query, candidates=picked, expand=lambda c: c[c < 2500] + 1)
    assert np.array_equal(got["runs"], got["entries"])
    full = exact.scores(query)
    assert np.allclose(got["runs"][picked], full[picked], rtol=1e-5)
    assert np.allclose(got["runs"][picked[:-1] + 1], full[picked[:-1] + 1], rtol=1e-5)  # the expanded ones


def test_over_budget_buckets_are_rescored_from_forward_lists_on_both_sides_of_a_snapshot(tmp_path, monkeypatch):
    monkeypatch.setattr(lexical, "DELTA_MAX", 3000)
    texts = {slot: text for slot, text in enumerate(random_texts(23, 1600), start=1)}
    budget = LexicalIndex(max_postings=6000, rescore=60)
    for slot in range(1, 1001):
        budget.add(slot, texts[slot])
    path = tmp_path / "lex"
    budget.save(path, tag="t")
    snap = read_snapshot(path)
    assert snap.fwd_counts[1:].tolist() == [len(term_counts(texts[s])[0]) for s in range(1, 1001)]
    slots = np.arange(1, 1001, dtype=np.int64)
    lengths = np.array([term_counts(texts[s])[2] for s in range(1, 1001)])
    loaded = LexicalIndex.load(path, slots, lengths, tag="t", verify=False, max_postings=6000, rescore=60)
    assert loaded.unchecked is not None
    verify_arrays(loaded.unchecked)  # the caller's check (it also closes the file the check reads)
    exact = LexicalIndex(max_postings=None)
    for slot, text in texts.items():
        exact.add(slot, text)
        if slot > 1000:
            loaded.add(slot, text)  # forward lists in memory; some postings merged, the rest in the delta
    query = "pottery bowl for the guitar marathon yoga"
    full = exact.scores(query)
    picked = np.array([5, 999, 1003, 1400, 1599], dtype=np.int64)
    got = loaded.scores(query, candidates=picked)
    assert np.allclose(got[picked], full[picked], rtol=1e-5)
    top = np.argsort(-got, kind="stable")[:60]
    assert np.allclose(got[top], full[top], rtol=1e-5)
    assert np.all(got <= full + 1e-4)


def test_snapshot_round_trip_keeps_scores_and_drops_documents_deleted_since(tmp_path):
    texts = random_texts(13, 300)
    index = LexicalIndex()
    for slot, text in enumerate(texts, start=1):
        index.add(slot, text)
    path = tmp_path / "lex"
    assert index.save(path, tag="store-a") == 300
    alive = np.array([s for s in range(1, 301) if s != 7], dtype=np.int64)
    lengths = np.array([term_counts(texts[s - 1])[2] for s in alive])
    loaded = LexicalIndex.load(path, alive, lengths, tag="store-a", max_slot=300)
    index.remove(7, term_counts(texts[6])[0])
    for query in ("camping lake", "小王 你好"):
        assert np.allclose(loaded.scores(query), index.scores(query), rtol=1e-5)
    assert len(loaded) == 299 and 7 not in loaded and loaded.base_watermark == 300


def test_snapshot_is_refused_when_it_does_not_describe_the_store(tmp_path):
    texts = random_texts(17, 40)
    index = LexicalIndex()
    for slot, text in enumerate(texts, start=1):
        index.add(slot, text)
    path = tmp_path / "lex"
    index.save(path, tag="store-a")
    slots = np.arange(1, 41)
    lengths = np.array([term_counts(t)[2] for t in texts])
    with pytest.raises(ValueError, match="another store"):
        LexicalIndex.load(path, slots, lengths, tag="store-b")
    with pytest.raises(ValueError, match="only issued 39"):
        LexicalIndex.load(path, slots[:-1], lengths[:-1], tag="store-a", max_slot=39)
    changed = lengths.copy()
    changed[3] += 1
    with pytest.raises(ValueError, match="disagrees with the stored documents"):
        LexicalIndex.load(path, slots, changed, tag="store-a")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[: len(data) // 2], "truncated"),
        (lambda data: data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:], "checksum of lengths"),
        (lambda data: b"NOTASNAP" + data[8:], "not a lexical snapshot"),
        (lambda data: data + b"x", "trailing bytes"),
        (lambda data: b"", "not a lexical snapshot"),
    ],
)
def test_damaged_snapshot_files_are_refused(tmp_path, damage, message):
    index = LexicalIndex()
    for slot, text in enumerate(random_texts(19, 30), start=1):
        index.add(slot, text)
    path = tmp_path / "lex"
    index.save(path, tag="t")
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError, match=message):
        read_snapshot(path)


def test_captured_snapshot_arrays_are_not_changed_by_later_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(lexical, "DELTA_MAX", 200)
    texts = random_texts(23, 200)
    index = LexicalIndex()
    for slot, text in enumerate(texts[:100], start=1):
        index.add(slot, text)
    index.merge()
    captured = index.snapshot_arrays(tag="t", merge=False)
    reference = LexicalIndex()
    for slot, text in enumerate(texts[:100], start=1):
        reference.add(slot, text)
    for slot, text in enumerate(texts[100:], start=101):  # merges build new arrays
        index.add(slot, text)
    index.remove(3, term_counts(texts[2])[0])
    index.merge()
    write_snapshot(tmp_path / "lex", captured)
    assert not partial_path(tmp_path / "lex").exists()
    slots = np.arange(1, 101)
    lengths = np.array([term_counts(t)[2] for t in texts[:100]])
    loaded = LexicalIndex.load(tmp_path / "lex", slots, lengths, tag="t")
    assert loaded.base_watermark == 100
    assert np.allclose(loaded.scores("paint the lake")[:101], reference.scores("paint the lake")[:101])


def test_replacing_a_document_by_one_of_equal_length_rescores_with_the_new_length():
    index = LexicalIndex()
    index.add(1, "paint lake")
    index.add(2, "yoga recipe museum")
    index.scores("lake")  # caches per-document length factors
    index.remove(2, term_counts("yoga recipe museum")[0])
    index.add(3, "lake lake lake lake")  # same count and total length as before the removal
    assert_matches(index, {1: "paint lake", 3: "lake lake lake lake"}, "lake")


def _rss_file_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("RssFile:"):
                return int(line.split()[1]) / 1024
    pytest.skip("no RssFile in /proc/self/status")


def _big_snapshot(watermark: int, n: int = 16 << 20) -> SnapshotArrays:
    """A snapshot with ``n`` postings of slot 1 in one bucket (64 MB of slots)."""
    counts = np.zeros(BUCKETS, dtype=np.int32)
    counts[7] = n
    return SnapshotArrays(
        tag="t", watermark=watermark, counts=counts, slots=np.ones(n, dtype=np.int32),
        tfs=np.ones(n, dtype=np.uint8), lengths=np.array([0, 3], dtype=np.float32),
        fwd_counts=np.array([0, 1], dtype=np.int32), fwd_terms=[np.array([0], dtype=np.uint16)],
        fwd_tfs=[np.array([1], dtype=np.uint8)], term_buckets=np.array([7], dtype=np.uint32),
    )


def test_checking_a_mapped_snapshot_does_not_make_it_resident(tmp_path):
    path = tmp_path / "lex"
    write_snapshot(path, _big_snapshot(1))
    mapped = read_snapshot(path, verify=False)
    assert mapped.unchecked
    before = _rss_file_mb()
    verify_arrays(mapped)
    assert _rss_file_mb() - before < 16  # the 64 MB of mapped slots were not paged into this process


def test_checking_a_mapped_snapshot_checks_the_mapped_file_when_a_newer_one_replaced_it(tmp_path):
    path = tmp_path / "lex"
    write_snapshot(path, _big_snapshot(1, n=1000))
    mapped = read_snapshot(path, verify=False)
    write_snapshot(path, _big_snapshot(2, n=3000))  # renamed over the path before the check runs
    verify_arrays(mapped)  # the mapped (older) file is intact
    path.unlink()
    write_snapshot(path, _big_snapshot(1, n=1000))
    damaged = read_snapshot(path, verify=False)
    with open(path, "r+b") as fh:  # damage the posting slots of the very file that is mapped
        after_slots = 1000 + 4 * 2 + 2 + 1 + 4 + 4 * 2  # tfs, forward counts, terms and tfs, term buckets, lengths
        fh.seek(-(after_slots + 4 * 1000) + 12, 2)  # the 4th posting's slot
        fh.write(b"\x02")
    path.unlink()  # and remove it from the folder: the check still reads it
    with pytest.raises(ValueError, match=r"checksum of slots|outside"):
        verify_arrays(damaged)


def _saved_and_loaded(tmp_path, seed: int, count: int, **kw):
    """An index built from ``count`` random texts, saved, and loaded back unchecked: (built, loaded, slots, path)."""
    counted = [term_counts(t) for t in random_texts(seed, count)]
    slots = np.arange(1, count + 1, dtype=np.int64)
    lengths = np.array([c[2] for c in counted])
    args = (
        np.array([len(c[0]) for c in counted]), np.concatenate([c[0] for c in counted]),
        np.concatenate([c[1] for c in counted]), lengths,
    )
    in_memory = LexicalIndex.build(slots, *args, **kw)
    path = tmp_path / "lex"
    in_memory.save(path, tag="t")
    loaded = LexicalIndex.load(path, slots, lengths, tag="t", verify=False, **kw)
    return in_memory, loaded, slots, path


def test_queries_on_an_index_opened_from_its_snapshot_read_the_file_without_making_it_resident(tmp_path):
    in_memory, loaded, slots, path = _saved_and_loaded(tmp_path, 31, 20_000, max_postings=20_000, rescore=3000)
    file_mb = path.stat().st_size / 2**20
    spread = slots[::5]  # candidates all over the forward lists
    before = _rss_file_mb()
    for query in ("pottery bowl for the guitar", "melanie painted a sunrise at the lake", "小王 你好 museum"):
        got = loaded.scores(query, candidates=spread)
        assert np.allclose(got, in_memory.scores(query, candidates=spread), rtol=1e-5)
    assert file_mb > 8 and _rss_file_mb() - before < file_mb / 4  # read, not mapped into this process
    assert loaded.unchecked is not None
    verify_arrays(loaded.unchecked)  # and the check reads the same file (it closes its descriptor)


def test_a_check_that_keeps_the_forward_lists_returns_them_as_written(tmp_path):
    in_memory, loaded, slots, path = _saved_and_loaded(tmp_path, 32, 3_000, max_postings=5_000, rescore=300)
    assert loaded.forward_file_bytes > 0
    kept = verify_arrays(loaded.unchecked, keep=frozenset({"fwd_terms", "fwd_tfs"}))
    snap = read_snapshot(path)
    assert np.array_equal(kept["fwd_terms"], snap.fwd_terms[0]) and np.array_equal(kept["fwd_tfs"], snap.fwd_tfs[0])
    assert loaded.hold_forward(kept["fwd_terms"], kept["fwd_tfs"]) and loaded.forward_file_bytes == 0
    for query in ("pottery bowl for the guitar", "melanie painted a sunrise at the lake"):
        spread = slots[::7]
        assert np.array_equal(loaded.scores(query, candidates=spread), in_memory.scores(query, candidates=spread))
    assert not loaded.hold_forward(kept["fwd_terms"], kept["fwd_tfs"])  # already in memory

    # a kept list naming a term id the snapshot lacks is refused, even with a matching checksum
    damaged = LexicalIndex.load(path, slots, in_memory.lengths(slots), tag="t", verify=False)
    bad = damaged.unchecked
    assert bad is not None
    terms = kept["fwd_terms"].copy()
    terms[5] = len(snap.term_buckets) + 3
    with open(path, "r+b") as fh:
        offset = next(u[2] for u in bad.unchecked if u[0] == "fwd_terms")
        fh.seek(offset)
        fh.write(terms.tobytes())
    forged = tuple((n, zlib.crc32(terms.tobytes()) if n == "fwd_terms" else c, o, s) for n, c, o, s in bad.unchecked)
    with pytest.raises(ValueError, match="term ids beyond"):
        verify_arrays(dataclasses.replace(bad, unchecked=forged), keep=frozenset({"fwd_terms", "fwd_tfs"}))


def _peak_bytes(fn: object) -> int:
    """Peak bytes traced while ``fn()`` runs (numpy reports its buffers to tracemalloc)."""
    import tracemalloc

    assert callable(fn)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_adding_a_document_with_unseen_terms_costs_its_terms_not_every_bucket():
    index = LexicalIndex()
    index.add(1, "alpha beta gamma")
    # every gram of this one is new to the index: it gets fresh term ids
    peak = _peak_bytes(lambda: index.add(2, "melanie painted a sunrise over the lake 小王 你好"))
    assert index.scores("sunrise 小王")[2] > 0
    assert peak < 256 * 1024, f"one add allocated {peak:,} bytes: a pass over the bucket table"


def test_term_ids_given_by_sorting_a_batch_equal_those_given_by_counting_it(monkeypatch):
    from homeagent_core.memory.documents.lexical import forward as lexical_forward

    texts = random_texts(11, 300)

    def build() -> LexicalIndex:
        index = LexicalIndex()
        for slot, text in enumerate(texts[:100], start=1):
            index.add(slot, text)
        terms = [term_counts(t) for t in texts[100:]]
        index.add_many_terms(np.arange(101, 301, dtype=np.int64), terms)
        return index

    sorted_ids = build()._forward
    monkeypatch.setattr(lexical_forward, "COUNT_ALL", 0)  # every batch counted over all buckets
    counted_ids = build()._forward
    assert sorted_ids.n_terms == counted_ids.n_terms > 0
    assert np.array_equal(sorted_ids.bucket_of[: sorted_ids.n_terms], counted_ids.bucket_of[: counted_ids.n_terms])
    assert np.array_equal(sorted_ids.mem_terms[: sorted_ids.mem_n], counted_ids.mem_terms[: counted_ids.mem_n])


@pytest.mark.parametrize("count", [1, 5, 63, 64, 65, 130])
def test_scoring_a_few_texts_gives_the_scores_of_an_index_holding_them(count):
    texts = random_texts(count, count)
    texts[count // 2] = ""  # an empty text counts towards the average length, as in the index
    index = LexicalIndex(max_postings=None)
    for slot, text in enumerate(texts, start=1):
        index.add(slot, text)
    for query in ("paint the lake", "小王 pottery", "zzz", ""):
        expected = index.scores(query)[1 : count + 1]
        got = score_texts(query, texts)
        assert got.dtype == np.float32 and len(got) == count
        assert np.array_equal(got, expected), query


def test_scoring_a_few_texts_costs_their_terms_not_an_index():
    texts = random_texts(5, 20)
    peak = _peak_bytes(lambda: score_texts("paint the lake at sunrise", texts))
    assert peak < 256 * 1024, f"scoring 20 texts allocated {peak:,} bytes"
